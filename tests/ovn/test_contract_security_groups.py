"""The SecurityGroup verbs (apply / delete / list) under one contract for the fake and the real
client; the real client's rows are read back with ovn-nbctl."""

from __future__ import annotations

import json

import pytest

from controller.core.security_group import Acl, plan_security_group
from controller.ovn.api import InvalidRequestError, OvnError, PortSpec, SecurityGroupRows
from controller.testing.fake_nb import FakeNbClient
from tests.fixtures.nb import nbctl
from tests.ovn.conftest import Subject
from tests.ovn.helpers import NbctlView

pytestmark = pytest.mark.timeout(60)

LR = "ovn-cluster"
LS = "ovn-default"
PG = "ovn.sg.web.a"
V4, V6 = f"{PG}.associated.v4", f"{PG}.associated.v6"


def web_rules(*extra: dict[str, object]) -> list[Acl]:
    spec = {
        "allowSameGroupTraffic": True,
        "ingressRules": [
            {
                "ipVersion": "ipv4",
                "protocol": "icmp",
                "priority": 10,
                "remoteType": "address",
                "remoteAddress": "10.0.0.0/24",
                "policy": "allow",
            },
            *extra,
        ],
        "egressRules": [
            {
                "ipVersion": "ipv4",
                "protocol": "tcp",
                "priority": 1,
                "remoteType": "securityGroup",
                "remoteSecurityGroup": "db",
                "portRangeMin": 5432,
                "portRangeMax": 5432,
                "policy": "allow",
            }
        ],
    }
    plan = plan_security_group("web-a", spec, lambda n: n == "db")
    assert not plan.errors
    return list(plan.acls)


def pg_acls(s: Subject, name: str) -> set[Acl] | None:
    if isinstance(s.nb, FakeNbClient):
        pg = s.nb.state.port_groups.get(name)
        return None if pg is None else set(pg.acls)
    assert isinstance(s.view, NbctlView)
    doc = json.loads(nbctl(s.view.remote, "--format=json", "find", "Port_Group", f"name={name}"))
    if not doc["data"]:
        return None
    row = dict(zip(doc["headings"], doc["data"][0], strict=True))
    kind, inner = row["acls"]
    uuids = {inner} if kind == "uuid" else {u for _, u in inner}
    acls = json.loads(nbctl(s.view.remote, "--format=json", "list", "ACL"))
    out = set()
    for a in acls["data"]:
        r = dict(zip(acls["headings"], a, strict=True))
        if r["_uuid"][1] in uuids:
            out.add(Acl(r["direction"], r["priority"], r["match"], r["action"]))
    return out


def acl_count(s: Subject) -> int:
    """ACL rows in the database, the deny-all group's two left out."""
    if isinstance(s.nb, FakeNbClient):
        matches = [a.match for pg in s.nb.state.port_groups.values() for a in pg.acls]
    else:
        assert isinstance(s.view, NbctlView)
        doc = json.loads(nbctl(s.view.remote, "--format=json", "--columns=match", "list", "ACL"))
        matches = [row[0] for row in doc["data"]]
    return sum("kubeovn_deny_all" not in m for m in matches)


@pytest.fixture
def s(subject: Subject) -> Subject:
    subject.nb.ensure_logical_router(LR)
    subject.nb.ensure_logical_switch(LS, LR, "10.16.0.0/16", "10.16.0.1", {})
    return subject


def test_apply_creates_group_address_sets_and_acls(s: Subject) -> None:
    acls = web_rules()
    s.nb.apply_security_group("web-a", acls, ["db"])
    assert s.view.port_group(PG) == (
        set(),
        {"type": "security_group", "sg": "web-a", "name": PG},
    )
    for name in (V4, V6, "ovn.sg.db.associated.v4", "ovn.sg.db.associated.v6"):
        assert s.view.address_set(name) == [], name
    assert pg_acls(s, PG) == set(acls)
    s.nb.apply_security_group("web-a", acls, ["db"])  # idempotent
    assert pg_acls(s, PG) == set(acls)
    assert acl_count(s) == len(acls)
    assert s.nb.list_security_groups() == [
        SecurityGroupRows(
            "db", "", (), (), {"ovn.sg.db.associated.v4": (), "ovn.sg.db.associated.v6": ()}
        ),
        SecurityGroupRows(
            "web-a",
            PG,
            (),
            tuple(sorted(acls, key=lambda a: (a.direction, -a.priority, a.match, a.action))),
            {V4: (), V6: ()},
        ),
    ]


def test_apply_replaces_exactly_the_groups_acls(s: Subject) -> None:
    s.nb.apply_security_group("web-a", web_rules(), ["db"])
    other = plan_security_group("other", {"allowSameGroupTraffic": True}).acls
    s.nb.apply_security_group("other", other)
    extra = {
        "ipVersion": "ipv4",
        "protocol": "udp",
        "priority": 20,
        "remoteType": "address",
        "remoteAddress": "10.1.0.5",
        "portRangeMin": 53,
        "portRangeMax": 53,
        "policy": "drop",
    }
    edited = web_rules(extra)
    s.nb.apply_security_group("web-a", edited, ["db"])
    assert pg_acls(s, PG) == set(edited)
    assert pg_acls(s, "ovn.sg.other") == set(other)
    s.nb.apply_security_group("web-a", [])
    assert pg_acls(s, PG) == set()
    assert acl_count(s) == len(other)  # the dropped ACL rows are gone, not just unlinked


def test_apply_keeps_members_and_address_set_contents(s: Subject) -> None:
    s.nb.create_port(
        PortSpec(
            "p1.ns1",
            LS,
            "00:00:00:00:00:01",
            ("10.16.0.2",),
            pod_name="p1",
            pod_namespace="ns1",
            port_security=True,
            security_groups=("web-a",),
        )
    )
    s.nb.sync_sg_ports("web-a")
    s.nb.apply_security_group("web-a", web_rules(), ["db"])
    assert (s.view.port_group(PG) or (None,))[0] == {"p1.ns1"}
    assert s.view.address_set(V4) == ["10.16.0.2"]
    s.nb.delete_security_group("web-a")
    assert s.view.port_group(PG) is None
    assert s.view.address_set(V4) is None and s.view.address_set(V6) is None
    assert acl_count(s) == 0
    info = s.nb.get_port("p1.ns1")
    assert info is not None  # the port itself stays, with its annotations' record
    assert info.external_ids["associated_sg_web-a"] == "true"
    # re-created: the members come back from the ports' external_ids
    s.nb.apply_security_group("web-a", web_rules(), ["db"])
    s.nb.sync_sg_ports("web-a")
    assert (s.view.port_group(PG) or (None,))[0] == {"p1.ns1"}
    assert s.view.address_set(V4) == ["10.16.0.2"]


def test_delete_is_idempotent_and_leaves_others(s: Subject) -> None:
    s.nb.apply_security_group("web-a", web_rules(), ["db"])
    s.nb.delete_security_group("web-a")
    s.nb.delete_security_group("web-a")
    s.nb.delete_security_group("never")
    # the remote group's address sets belong to db, not to web-a
    assert s.view.address_set("ovn.sg.db.associated.v4") == []
    assert [g.sg for g in s.nb.list_security_groups()] == ["db"]


@pytest.mark.parametrize(
    ("sg", "acls", "remotes"),
    [
        ("kubeovn_deny_all", [], []),
        ("bad name", [], []),
        ("web-a", [Acl("sideways", 2100, f"outport==@{PG} && ip", "drop")], []),
        ("web-a", [Acl("to-lport", 2100, "outport==@ovn.sg.other && ip", "drop")], []),
        ("web-a", [Acl("to-lport", 2100, f"outport==@{PG} && ip", "permit")], []),
        ("web-a", [], ["no,comma"]),
    ],
)
def test_invalid_apply_writes_nothing(
    s: Subject, sg: str, acls: list[Acl], remotes: list[str]
) -> None:
    with pytest.raises(InvalidRequestError):
        s.nb.apply_security_group(sg, acls, remotes)
    assert s.nb.list_security_groups() == []


def test_deny_all_is_not_deletable(s: Subject) -> None:
    s.nb.create_sg_port_group("kubeovn_deny_all")
    with pytest.raises(OvnError):
        s.nb.delete_security_group("kubeovn_deny_all")
    assert s.view.port_group("ovn.sg.kubeovn_deny_all") is not None
