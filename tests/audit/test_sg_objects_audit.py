"""audit() of SecurityGroup objects against their NB rows (audit/security_groups.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.audit.audit import AuditReport, audit
from controller.config import Config
from controller.core.security_group import Acl, plan_security_group
from controller.ovn.api import PortGroupInfo, SecurityGroupRows
from tests.audit.test_security_audit import secured_cluster

RULES = {
    "ingressRules": [
        {
            "ipVersion": "ipv4",
            "protocol": "tcp",
            "priority": 1,
            "remoteType": "address",
            "remoteAddress": "10.9.0.0/16",
            "portRangeMin": 80,
            "portRangeMax": 80,
            "policy": "allow",
        },
        {"ipVersion": "ipv4", "protocol": "sctp", "priority": 2, "policy": "allow"},
    ]
}


def sg(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec or {}}


def rows_for(name: str, spec: dict[str, Any], ports: tuple[str, ...], v4: tuple[str, ...]) -> Any:
    plan = plan_security_group(name, spec)
    return SecurityGroupRows(
        name,
        f"ovn.sg.{name}",
        ports,
        plan.acls,
        {f"ovn.sg.{name}.associated.v4": v4, f"ovn.sg.{name}.associated.v6": ()},
    )


def run(
    sgs: list[dict[str, Any]],
    rows: list[SecurityGroupRows],
    groups: dict[str, PortGroupInfo] | None = None,
) -> AuditReport:
    c, default_groups = secured_cluster()
    snap = dataclasses.replace(
        c.snapshot(),
        port_groups=tuple((groups if groups is not None else default_groups).values()),
        security_groups=tuple(sgs),
        sg_rows=tuple(rows),
    )
    return audit(snap, Config())


def messages(report: AuditReport) -> list[str]:
    return sorted(f"{f.kind} {f.object}: {f.message}" for f in report.findings)


def test_groups_matching_their_rules_are_clean() -> None:
    report = run(
        [sg("web", RULES), sg("db")],
        [
            rows_for("web", RULES, ("a.default",), ("10.16.0.2",)),
            rows_for("db", {}, ("a.default",), ("10.16.0.2",)),
        ],
    )
    assert report.settled, report.render()


def test_acl_and_address_set_drift_is_reported() -> None:
    web = rows_for("web", RULES, ("a.default",), ("10.16.0.9",))
    stray = Acl("to-lport", 2100, "outport==@ovn.sg.web && ip", "allow-related")
    web = dataclasses.replace(web, acls=(stray,))
    assert messages(run([sg("web", RULES), sg("db")], [web])) == [
        "sg-acl-mismatch security group db: port group ovn.sg.db missing",
        "sg-acl-mismatch security group web: ACL missing: to-lport 2299 "
        "'outport==@ovn.sg.web && ip4 && ip4.src==10.9.0.0/16 && 80<=tcp.dst<=80' allow-related",
        "sg-acl-mismatch security group web: unexpected ACL: to-lport 2100 "
        "'outport==@ovn.sg.web && ip' allow-related",
        "sg-address-set-mismatch security group web: address set ovn.sg.web.associated.v4 "
        "has ['10.16.0.9'], want ['10.16.0.2']",
    ]


def test_acls_left_without_a_security_group_are_orphans() -> None:
    left = rows_for("web", RULES, ("a.default",), ("10.16.0.2",))
    empty = SecurityGroupRows("ghost", "ovn.sg.ghost", (), (), {})
    found = messages(
        run([sg("db")], [left, empty, rows_for("db", {}, ("a.default",), ("10.16.0.2",))])
    )
    assert found == [
        "orphan-sg security group web: port group ovn.sg.web has 1 ACLs but no SecurityGroup"
    ]


def test_a_deleted_group_is_not_expected_to_hold_its_ports() -> None:
    # web was deleted (no SecurityGroup, no port group); the pod still names it
    c, groups = secured_cluster()
    del groups["web"]
    report = run([sg("db")], [rows_for("db", {}, ("a.default",), ("10.16.0.2",))], groups)
    assert report.settled, report.render()
    # without the SecurityGroups read, the old rule applies: the port must be in every group
    snap = dataclasses.replace(c.snapshot(), port_groups=tuple(groups.values()))
    assert [f.message for f in audit(snap, Config()).findings] == [
        "port a.default missing from security group web"
    ]
