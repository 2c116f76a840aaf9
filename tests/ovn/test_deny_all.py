"""Contract (fake and real client): the deny-all security group (kube-ovn v1.8.18
pkg/controller/security_group.go, created at start-up by Controller.Run) and
NAT address families."""

from __future__ import annotations

import pytest

from controller.ovn.api import InvalidRequestError, PortGroupInfo, PortSpec
from controller.testing.fake_nb import FakeNbClient
from tests.e2e.nbrows import nb_rows
from tests.ovn.conftest import Subject
from tests.ovn.helpers import NbctlView

DENY_ALL = "kubeovn_deny_all"
PG = "ovn.sg.kubeovn_deny_all"
WANT_ACLS = {
    ("to-lport", 2003, f"outport == @{PG} && ip", "drop"),
    ("from-lport", 2003, f"inport == @{PG} && ip", "drop"),
}


def _acls(s: Subject) -> set[tuple[str, int, str, str]]:
    if isinstance(s.nb, FakeNbClient):
        pg = s.nb.state.port_groups[PG]
        return {(a.direction, a.priority, a.match, a.action) for a in pg.acls}
    assert isinstance(s.view, NbctlView)
    remote = s.view.remote
    (pg_row,) = [r for r in nb_rows(remote, "Port_Group") if r["name"] == PG]
    return {
        (a["direction"], a["priority"], a["match"], a["action"])
        for a in nb_rows(remote, "ACL")
        if a["_uuid"] in set(pg_row["acls"])
    }


def _members(s: Subject) -> set[str]:
    got = s.view.port_group(PG)
    assert got is not None
    return got[0]


def _port(name: str, ip: str, *, ps: bool, sgs: tuple[str, ...] = ()) -> PortSpec:
    return PortSpec(
        name=name,
        switch="ls1",
        mac=f"00:00:00:00:00:{ip.rsplit('.', 1)[1]:0>2}",
        ips=(ip,),
        cidrs=("10.16.0.0/16",),
        pod_name=name.split(".", maxsplit=1)[0],
        pod_namespace="ns1",
        port_security=ps,
        security_groups=sgs,
    )


def test_deny_all_group_gets_its_drop_acls_once(subject: Subject) -> None:
    s = subject
    s.nb.create_sg_port_group(DENY_ALL)
    s.nb.create_sg_port_group(DENY_ALL)
    assert _acls(s) == WANT_ACLS
    assert len(_acls(s)) == 2
    s.nb.create_sg_port_group("web")
    assert s.view.port_group("ovn.sg.web") is not None


def test_sync_keeps_ports_with_groups_in_deny_all(subject: Subject) -> None:
    s = subject
    s.nb.ensure_logical_router("lr1")
    s.nb.ensure_logical_switch("ls1", "lr1", "10.16.0.0/16", "10.16.0.1", {})
    s.nb.create_sg_port_group(DENY_ALL)
    s.nb.create_port(_port("a.ns1", "10.16.0.2", ps=True, sgs=("web",)))
    s.nb.create_port(_port("b.ns1", "10.16.0.3", ps=True))
    s.nb.create_port(_port("c.ns1", "10.16.0.4", ps=False, sgs=("web",)))
    s.nb.sync_sg_ports("web")
    assert _members(s) == {"a.ns1"}
    s.nb.reconcile_port_sg("b.ns1", ["db"])
    s.nb.sync_sg_ports("db")
    assert _members(s) == {"a.ns1", "b.ns1"}
    s.nb.reconcile_port_sg("a.ns1", [])
    s.nb.sync_sg_ports(DENY_ALL)  # only the deny-all group
    assert _members(s) == {"b.ns1"}
    assert (s.view.port_group("ovn.sg.web") or (None,))[0] == set()
    groups = {g.name: g for g in s.nb.list_sg_port_groups()}
    assert groups[PG] == PortGroupInfo(PG, DENY_ALL, ("b.ns1",))
    assert groups["ovn.sg.web"] == PortGroupInfo("ovn.sg.web", "web", ())
    assert groups["ovn.sg.db"].ports == ("b.ns1",)
    s.nb.delete_port("b.ns1")
    s.nb.sync_sg_ports("db")
    assert _members(s) == set()
    assert s.view.address_set("ovn.sg.db.associated.v4") == []


def test_dual_stack_address_sets_hold_the_port_addresses(subject: Subject) -> None:
    s = subject
    s.nb.ensure_logical_router("lr1")
    s.nb.ensure_logical_switch(
        "ls1", "lr1", "10.16.0.0/16,fd00:10:16::/64", "10.16.0.1,fd00:10:16::1", {}
    )
    s.nb.create_port(
        PortSpec(
            name="d.ns1",
            switch="ls1",
            mac="00:00:00:00:00:09",
            ips=("10.16.0.9", "fd00:10:16::9"),
            cidrs=("10.16.0.0/16", "fd00:10:16::/64"),
            pod_name="d",
            pod_namespace="ns1",
            port_security=True,
            security_groups=("web",),
        )
    )
    s.nb.sync_sg_ports("web")
    port = s.nb.get_port("d.ns1")
    assert port is not None
    assert port.port_security == ("00:00:00:00:00:09 10.16.0.9/16 fd00:10:16::9/64",)
    assert s.view.address_set("ovn.sg.web.associated.v4") == ["10.16.0.9"]
    assert s.view.address_set("ovn.sg.web.associated.v6") == ["fd00:10:16::9"]
    assert _members(s) == {"d.ns1"}


def test_nat_refuses_mixed_families(subject: Subject) -> None:
    s = subject
    s.nb.ensure_logical_router("lr1")
    with pytest.raises(InvalidRequestError, match="family"):
        s.nb.update_nat_rule("dnat_and_snat", "fd00::5", "172.56.0.50", "lr1")
    with pytest.raises(InvalidRequestError, match="family"):
        s.nb.update_nat_rule("snat", "10.16.0.0/16", "fd00:56::1", "lr1")
    s.nb.update_nat_rule("snat", "fd00::5", "", "lr1")  # a delete: no external address
    assert s.nb.list_nat_rules("lr1") == []
