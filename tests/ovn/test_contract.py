"""One contract for both NbClient implementations: the in-memory fake and the real client.

Every test runs twice (subject = fake | real). For the real client, rows are read back with
ovn-nbctl from a fresh ovsdb-server, so these tests pin kube-ovn's NB effects, not our cache.
"""

from __future__ import annotations

import pytest

from controller.ovn.api import (
    DuplicateAddressError,
    InvalidRequestError,
    NatRule,
    OvnConflictError,
    OvnError,
    OvnNotFoundError,
    PortSpec,
    StaticRoute,
)
from tests.ovn.conftest import Subject

pytestmark = pytest.mark.timeout(60)

LR = "ovn-cluster"
LS = "ovn-default"
MAC1 = "00:00:00:00:00:01"
MAC2 = "00:00:00:00:00:02"


def spec(
    name: str = "p1.ns1",
    ip: str = "10.16.0.2",
    mac: str = MAC1,
    switch: str = LS,
    port_security: bool = False,
    security_groups: tuple[str, ...] = (),
) -> PortSpec:
    pod, _, ns = name.partition(".")
    return PortSpec(
        name=name,
        switch=switch,
        mac=mac,
        ips=(ip,),
        pod_name=pod,
        pod_namespace=ns,
        port_security=port_security,
        security_groups=security_groups,
    )


@pytest.fixture
def s(subject: Subject) -> Subject:
    subject.nb.ensure_logical_router(LR)
    subject.nb.ensure_logical_switch(LS, LR, "10.16.0.0/16", "10.16.0.1", {})
    return subject


# -- ports ----------------------------------------------------------------------------------


def test_create_port_writes_kube_ovn_columns(s: Subject) -> None:
    s.nb.create_port(spec(port_security=True))
    info = s.nb.get_port("p1.ns1")
    assert info is not None
    assert info.switch == LS
    assert info.addresses == (f"{MAC1} 10.16.0.2",)
    assert info.port_security == (f"{MAC1} 10.16.0.2",)
    assert info.external_ids == {"pod": "ns1/p1", "vendor": "kube-ovn", "ls": LS}
    assert "p1.ns1" in (s.view.switch_ports(LS) or set())
    assert s.view.port_column("p1.ns1", "addresses") == [f"{MAC1} 10.16.0.2"]
    assert s.view.port_column("p1.ns1", "external_ids") == {
        "pod": "ns1/p1",
        "vendor": "kube-ovn",
        "ls": LS,
    }


def test_create_port_without_pod_or_port_security(s: Subject) -> None:
    s.nb.create_port(PortSpec("node-a", LS, MAC1, ("10.16.0.9",)))
    info = s.nb.get_port("node-a")
    assert info is not None
    assert info.port_security == ()
    assert info.external_ids == {"vendor": "kube-ovn", "ls": LS}


def test_create_port_dual_stack_masks_port_security(s: Subject) -> None:
    s.nb.ensure_logical_switch(
        "dual", LR, "10.17.0.0/16,fd00:10:17::/64", "10.17.0.1,fd00:10:17::1", {}
    )
    s.nb.create_port(
        PortSpec(
            "p.ns",
            "dual",
            MAC1,
            ("10.17.0.5", "fd00:10:17::5"),
            cidrs=("10.17.0.0/16", "fd00:10:17::/64"),
            port_security=True,
        )
    )
    assert s.view.port_column("p.ns", "addresses") == [f"{MAC1} 10.17.0.5 fd00:10:17::5"]
    assert s.view.port_column("p.ns", "port_security") == [f"{MAC1} 10.17.0.5/16 fd00:10:17::5/64"]


def test_create_port_is_idempotent_and_updates_addresses(s: Subject) -> None:
    s.nb.create_port(spec())
    s.nb.create_port(spec())
    assert s.view.switch_ports(LS) == {"p1.ns1", f"{LS}-{LR}"}
    s.nb.create_port(spec(ip="10.16.0.3", mac=MAC2))
    info = s.nb.get_port("p1.ns1")
    assert info is not None and info.addresses == (f"{MAC2} 10.16.0.3",)
    # the old address is free again
    s.nb.create_port(spec("p2.ns1", ip="10.16.0.2"))


def test_create_port_keeps_foreign_external_ids(s: Subject) -> None:
    s.nb.create_port(spec(port_security=True, security_groups=("web",)))
    s.nb.create_port(spec())
    info = s.nb.get_port("p1.ns1")
    assert info is not None
    # kube-ovn upserts keys and never removes others
    assert info.external_ids["security_groups"] == "web"


def test_create_port_needs_the_switch(s: Subject) -> None:
    with pytest.raises(OvnNotFoundError, match="nope"):
        s.nb.create_port(spec(switch="nope"))
    assert s.nb.get_port("p1.ns1") is None


def test_duplicate_address_on_the_same_switch_is_refused(s: Subject) -> None:
    s.nb.create_port(spec())
    with pytest.raises(DuplicateAddressError, match=r"duplicate IPv4 address '10.16.0.2'.*p1.ns1"):
        s.nb.create_port(spec("p2.ns1", mac=MAC2))
    assert s.nb.get_port("p2.ns1") is None
    s.nb.ensure_logical_switch("other", LR, "10.16.0.0/16", "10.16.0.1", {})
    s.nb.create_port(spec("p3.ns1", switch="other"))  # another switch: fine


def test_duplicate_inside_one_batch_writes_nothing(s: Subject) -> None:
    with pytest.raises(DuplicateAddressError):
        s.nb.create_ports([spec("a.ns"), spec("b.ns", mac=MAC2)])
    assert s.nb.get_port("a.ns") is None
    assert s.nb.get_port("b.ns") is None


def test_port_on_another_switch_conflicts(s: Subject) -> None:
    s.nb.ensure_logical_switch("other", LR, "10.18.0.0/16", "10.18.0.1", {})
    s.nb.create_port(spec())
    with pytest.raises(OvnConflictError, match=LS):
        s.nb.create_port(spec(switch="other", ip="10.18.0.2"))


@pytest.mark.parametrize(
    "bad",
    [
        PortSpec("p", LS, "zz:00:00:00:00:01", ("10.16.0.2",)),
        PortSpec("p", LS, MAC1, ("10.16.0.300",)),
        PortSpec("p", LS, MAC1, ("10.16.0.2", "10.16.0.3")),
        PortSpec("p", LS, MAC1, ()),
        PortSpec("bad name", LS, MAC1, ("10.16.0.2",)),
        PortSpec("p", LS, MAC1, ("10.16.0.2", "fd00::2"), port_security=True),
    ],
)
def test_invalid_spec_is_refused(s: Subject, bad: PortSpec) -> None:
    with pytest.raises(InvalidRequestError):
        s.nb.create_port(bad)
    assert isinstance(InvalidRequestError("x"), OvnError)


def test_batch_create_and_delete(s: Subject) -> None:
    specs = [spec(f"p{i}.ns", ip=f"10.16.1.{i}", mac=f"00:00:00:00:01:{i:02x}") for i in range(20)]
    s.nb.create_ports(specs)
    assert len(s.view.switch_ports(LS) or ()) == 21
    s.nb.delete_ports([f"p{i}.ns" for i in range(10)] + ["absent"])
    assert {p.name for p in s.nb.list_ports()} == {f"p{i}.ns" for i in range(10, 20)} | {
        f"{LS}-{LR}"
    }


def test_delete_port_removes_row_and_memberships(s: Subject) -> None:
    s.nb.create_port(spec(port_security=True, security_groups=("web",)))
    assert s.view.port_group("ovn.sg.web") is not None
    s.nb.delete_port("p1.ns1")
    s.nb.delete_port("p1.ns1")  # absent: no error
    assert s.nb.get_port("p1.ns1") is None
    assert s.view.switch_ports(LS) == {f"{LS}-{LR}"}
    pg = s.view.port_group("ovn.sg.web")
    assert pg is not None and pg[0] == set()


def test_list_pod_ports(s: Subject) -> None:
    s.nb.create_port(spec("web.ns1"))
    s.nb.create_port(
        PortSpec("web.ns1.attach", LS, MAC2, ("10.16.0.3",), pod_name="web", pod_namespace="ns1")
    )
    s.nb.create_port(spec("web.ns2", ip="10.16.0.4", mac="00:00:00:00:00:04"))
    assert s.nb.list_pod_ports("web", "ns1") == ["web.ns1", "web.ns1.attach"]
    assert s.nb.list_pod_ports("web", "ns2") == ["web.ns2"]
    assert s.nb.list_pod_ports("nope", "ns1") == []
    s.nb.delete_port("web.ns1")
    assert s.nb.list_pod_ports("web", "ns1") == ["web.ns1.attach"]


# -- routes ---------------------------------------------------------------------------------


def test_src_ip_route_canonical_and_idempotent(s: Subject) -> None:
    s.nb.add_static_route("src-ip", "10.16.0.2", "100.64.0.2", LR)
    s.nb.add_static_route("src-ip", "10.16.0.2/32", "100.64.0.2", LR)
    assert s.nb.list_static_routes(LR) == [StaticRoute(LR, "10.16.0.2", "100.64.0.2", "src-ip")]
    s.nb.add_static_route("src-ip", "10.16.0.2", "100.64.0.3", LR)  # nexthop update
    s.nb.add_static_route("", "10.16.0.2", "100.64.0.9", LR)  # dst-ip: a different route
    assert s.nb.list_static_routes(LR) == [
        StaticRoute(LR, "10.16.0.2", "100.64.0.9", "dst-ip"),
        StaticRoute(LR, "10.16.0.2", "100.64.0.3", "src-ip"),
    ]
    s.nb.delete_static_route("10.16.0.2/32", LR)  # every policy, as lr-route-del
    assert s.nb.list_static_routes(LR) == []
    s.nb.delete_static_route("10.16.0.2", LR)
    s.nb.delete_static_route("", LR)


def test_dual_stack_routes_pair_by_family(s: Subject) -> None:
    s.nb.add_static_route("src-ip", "10.16.0.2,fd00::2", "100.64.0.2,fd00:100::2", LR)
    assert s.nb.list_static_routes(LR) == [
        StaticRoute(LR, "10.16.0.2", "100.64.0.2", "src-ip"),
        StaticRoute(LR, "fd00::2", "fd00:100::2", "src-ip"),
    ]
    s.nb.add_static_route("dst-ip", "10.17.0.0/16", "100.64.0.1", LR)
    assert StaticRoute(LR, "10.17.0.0/16", "100.64.0.1", "dst-ip") in s.nb.list_static_routes(LR)


def test_route_errors(s: Subject) -> None:
    with pytest.raises(OvnNotFoundError):
        s.nb.add_static_route("src-ip", "10.16.0.2", "100.64.0.2", "nope")
    with pytest.raises(InvalidRequestError):
        s.nb.add_static_route("bogus", "10.16.0.2", "100.64.0.2", LR)
    with pytest.raises(InvalidRequestError):
        s.nb.add_static_route("src-ip", "10.16.0.2", "fd00::1", LR)
    with pytest.raises(InvalidRequestError):
        s.nb.add_static_route("src-ip", "not-an-ip", "100.64.0.2", LR)
    s.nb.delete_static_route("10.16.0.2", "nope")  # nothing to delete


# -- NAT ------------------------------------------------------------------------------------


def test_snat_replace_and_remove(s: Subject) -> None:
    s.nb.update_nat_rule("snat", "10.16.0.0/16", "172.18.0.1", LR)
    s.nb.update_nat_rule("snat", "10.16.0.0/16", "172.18.0.1", LR)
    assert s.nb.list_nat_rules(LR) == [NatRule(LR, "snat", "172.18.0.1", "10.16.0.0/16")]
    s.nb.update_nat_rule("snat", "10.16.0.0/16", "172.18.0.2", LR)
    assert s.nb.list_nat_rules(LR) == [NatRule(LR, "snat", "172.18.0.2", "10.16.0.0/16")]
    s.nb.update_nat_rule("snat", "10.16.0.0/16", "", LR)
    assert s.nb.list_nat_rules(LR) == []


def test_dnat_and_snat_moves_eip(s: Subject) -> None:
    s.nb.update_nat_rule("dnat_and_snat", "10.16.0.2", "172.18.0.100", LR)
    s.nb.update_nat_rule("dnat_and_snat", "10.16.0.2", "172.18.0.100", LR)
    assert s.nb.list_nat_rules(LR) == [NatRule(LR, "dnat_and_snat", "172.18.0.100", "10.16.0.2")]
    s.nb.update_nat_rule("dnat_and_snat", "10.16.0.2", "172.18.0.101", LR, MAC1, "p1.ns1")
    assert s.nb.list_nat_rules(LR) == [
        NatRule(LR, "dnat_and_snat", "172.18.0.101", "10.16.0.2", "p1.ns1", MAC1)
    ]
    with pytest.raises(OvnConflictError):
        s.nb.update_nat_rule("dnat_and_snat", "10.16.0.3", "172.18.0.101", LR)
    s.nb.update_nat_rule("snat", "10.16.0.2", "172.18.0.1", LR)
    s.nb.delete_nat_rule("10.16.0.2", LR)  # both types for that logical IP
    assert s.nb.list_nat_rules(LR) == []
    s.nb.delete_nat_rule("10.16.0.2", LR)
    s.nb.delete_nat_rule("10.16.0.2", "nope")


def test_nat_errors(s: Subject) -> None:
    with pytest.raises(InvalidRequestError):
        s.nb.update_nat_rule("dnat", "10.16.0.2", "172.18.0.100", LR)
    with pytest.raises(InvalidRequestError):
        s.nb.update_nat_rule("snat", "10.16.0.2", "172.18.0.100", LR, MAC1, "p1.ns1")
    with pytest.raises(InvalidRequestError):
        s.nb.update_nat_rule("dnat_and_snat", "10.16.0.2", "172.18.0.100", LR, MAC1, "")
    with pytest.raises(OvnNotFoundError):
        s.nb.update_nat_rule("snat", "10.16.0.0/16", "172.18.0.1", "nope")


# -- security groups ------------------------------------------------------------------------


def test_sg_port_group_naming(s: Subject) -> None:
    s.nb.create_sg_port_group("my-sg")
    s.nb.create_sg_port_group("my-sg")
    assert s.view.port_group("ovn.sg.my.sg") == (
        set(),
        {"type": "security_group", "sg": "my-sg", "name": "ovn.sg.my.sg"},
    )


def test_create_port_with_security_groups(s: Subject) -> None:
    s.nb.create_port(spec(port_security=True, security_groups=("web", "db")))
    info = s.nb.get_port("p1.ns1")
    assert info is not None
    assert info.external_ids["security_groups"] == "web,db"
    assert info.external_ids["associated_sg_web"] == "true"
    assert info.external_ids["associated_sg_db"] == "true"
    for pg in ("ovn.sg.web", "ovn.sg.db"):
        got = s.view.port_group(pg)
        assert got is not None and got[0] == {"p1.ns1"}
    # without port security kube-ovn ignores security groups
    s.nb.create_port(spec("p2.ns1", ip="10.16.0.3", mac=MAC2, security_groups=("web",)))
    info2 = s.nb.get_port("p2.ns1")
    assert info2 is not None and "security_groups" not in info2.external_ids


def test_reconcile_port_sg(s: Subject) -> None:
    s.nb.create_port(spec(port_security=True, security_groups=("web",)))
    assert s.nb.reconcile_port_sg("p1.ns1", ["web"]) == []
    assert s.nb.reconcile_port_sg("p1.ns1", ["db", "web"]) == ["db"]
    assert s.nb.reconcile_port_sg("p1.ns1", ["db"]) == ["web"]
    info = s.nb.get_port("p1.ns1")
    assert info is not None
    assert info.external_ids["security_groups"] == "db"
    assert info.external_ids["associated_sg_web"] == "false"
    assert info.external_ids["associated_sg_db"] == "true"
    assert (s.view.port_group("ovn.sg.web") or (None,))[0] == set()
    assert (s.view.port_group("ovn.sg.db") or (None,))[0] == {"p1.ns1"}
    assert s.nb.reconcile_port_sg("p1.ns1", []) == ["db"]
    assert (s.view.port_group("ovn.sg.db") or (None,))[0] == set()
    with pytest.raises(OvnNotFoundError):
        s.nb.reconcile_port_sg("absent", ["web"])


def test_sync_sg_ports_sets_group_and_address_sets(s: Subject) -> None:
    s.nb.create_port(spec(port_security=True, security_groups=("web",)))
    s.nb.create_port(spec("p2.ns1", ip="10.16.0.3", mac=MAC2))
    s.nb.sync_sg_ports("web")
    assert (s.view.port_group("ovn.sg.web") or (None,))[0] == {"p1.ns1"}
    assert s.view.address_set("ovn.sg.web.associated.v4") == ["10.16.0.2"]
    assert s.view.address_set("ovn.sg.web.associated.v6") == []
    s.nb.delete_port("p1.ns1")
    s.nb.sync_sg_ports("web")
    assert s.view.address_set("ovn.sg.web.associated.v4") == []


# -- switches and routers -------------------------------------------------------------------


def test_switch_attached_to_router(s: Subject) -> None:
    assert s.view.router_ports(LR) == {f"{LR}-{LS}": ["10.16.0.1/16"]}
    cfg = s.view.switch_config(LS)
    assert cfg is not None
    assert cfg[0]["vendor"] == "kube-ovn"
    assert cfg[1] == {"subnet": "10.16.0.0/16", "gateway": "10.16.0.1"}
    assert s.view.port_column(f"{LS}-{LR}", "type") == "router"
    assert s.view.port_column(f"{LS}-{LR}", "options") == {"router-port": f"{LR}-{LS}"}
    s.nb.ensure_logical_switch(LS, LR, "10.16.0.0/16", "10.16.0.1", {"key": "v"})
    assert s.nb.list_logical_switches() == [LS]
    cfg = s.view.switch_config(LS)
    assert cfg is not None and cfg[0]["key"] == "v"
    assert s.view.router_ports(LR) == {f"{LR}-{LS}": ["10.16.0.1/16"]}


def test_switch_without_router_and_errors(s: Subject) -> None:
    s.nb.ensure_logical_switch("lonely", "", "10.20.0.0/16", "10.20.0.1", {})
    assert s.view.switch_ports("lonely") == set()
    with pytest.raises(OvnNotFoundError):
        s.nb.ensure_logical_switch("x", "nope", "10.21.0.0/16", "10.21.0.1", {})
    with pytest.raises(InvalidRequestError):
        s.nb.ensure_logical_switch("y", LR, "10.22.0.0/33", "10.22.0.1", {})
    with pytest.raises(InvalidRequestError):
        s.nb.ensure_logical_switch("z", LR, "10.22.0.0/16", "fd00::1", {})
    assert sorted(s.nb.list_logical_switches()) == ["lonely", LS]


def test_delete_logical_switch_removes_ports_and_router_port(s: Subject) -> None:
    s.nb.create_port(spec())
    s.nb.delete_logical_switch(LS)
    s.nb.delete_logical_switch(LS)
    assert s.nb.list_logical_switches() == []
    assert s.nb.get_port("p1.ns1") is None
    assert s.view.router_ports(LR) == {}
    s.nb.ensure_logical_router(LR)  # still there, idempotent
