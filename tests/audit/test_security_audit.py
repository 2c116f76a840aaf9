"""audit() of port security and security-group membership (`sg-mismatch`)."""

from __future__ import annotations

import dataclasses

from controller.audit.audit import KIND_SG_MISMATCH, AuditReport, audit
from controller.config import Config
from controller.core.object_fields import FrozenDict
from controller.ovn.api import PortGroupInfo
from tests.audit.helpers import Cluster, clean_cluster, mac

DENY = "ovn.sg.kubeovn_deny_all"


def secured_cluster() -> tuple[Cluster, dict[str, PortGroupInfo]]:
    """Pod a has port security and groups web + db; pod b nothing."""
    c = clean_cluster()
    pod = c.pods["default/a"]
    annotations = {
        **pod.annotations.to_dict(),
        "ovn.kubernetes.io/port_security": "true",
        "ovn.kubernetes.io/security_groups": "web,db",
    }
    c.pods["default/a"] = dataclasses.replace(pod, annotations=FrozenDict(annotations))
    port = c.ports["a.default"]
    c.ports["a.default"] = dataclasses.replace(
        port,
        port_security=(f"{mac(2)} 10.16.0.2",),
        external_ids={
            **port.external_ids,
            "security_groups": "web,db",
            "associated_sg_web": "true",
            "associated_sg_db": "true",
        },
    )
    groups = {
        "web": PortGroupInfo("ovn.sg.web", "web", ("a.default",)),
        "db": PortGroupInfo("ovn.sg.db", "db", ("a.default",)),
        "kubeovn_deny_all": PortGroupInfo(DENY, "kubeovn_deny_all", ("a.default",)),
    }
    return c, groups


def run(c: Cluster, groups: dict[str, PortGroupInfo] | None) -> AuditReport:
    snap = c.snapshot()
    if groups is not None:
        snap = dataclasses.replace(snap, port_groups=tuple(groups.values()))
    return audit(snap, Config())


def sg_messages(report: AuditReport) -> list[str]:
    assert {f.kind for f in report.findings} <= {KIND_SG_MISMATCH}, report.render()
    return sorted(f.message for f in report.findings)


def test_consistent_security_is_clean() -> None:
    c, groups = secured_cluster()
    report = run(c, groups)
    assert report.settled, report.render()


def test_missing_memberships_are_reported() -> None:
    c, groups = secured_cluster()
    groups["db"] = PortGroupInfo("ovn.sg.db", "db", ())
    groups["kubeovn_deny_all"] = PortGroupInfo(DENY, "kubeovn_deny_all", ())
    assert sg_messages(run(c, groups)) == [
        "port a.default missing from security group db",
        "port a.default missing from security group kubeovn_deny_all",
    ]


def test_stale_members_and_wrong_columns_are_reported() -> None:
    c, groups = secured_cluster()
    groups["web"] = PortGroupInfo("ovn.sg.web", "web", ("a.default", "b.default"))
    groups["kubeovn_deny_all"] = PortGroupInfo(DENY, "kubeovn_deny_all", ("a.default", "b.default"))
    port = c.ports["a.default"]
    c.ports["a.default"] = dataclasses.replace(
        port, external_ids={**port.external_ids, "security_groups": "web"}
    )
    assert sg_messages(run(c, groups)) == [
        "port a.default has security_groups ['web'], want ['web', 'db']",
        "port b.default is a member but not associated with it",
        "port b.default is a member but not associated with it",
    ]
    # port security asked for but not set
    c, groups = secured_cluster()
    c.ports["a.default"] = dataclasses.replace(c.ports["a.default"], port_security=())
    assert "port a.default lacks port_security" in sg_messages(run(c, groups))


def test_not_read_means_not_checked() -> None:
    c, _ = secured_cluster()
    c.ports["a.default"] = dataclasses.replace(c.ports["a.default"], port_security=())
    assert run(c, None).settled
