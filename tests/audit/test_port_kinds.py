"""The audit judges the same port kinds the gc may delete (`ovn.port_kinds`), nothing else."""

from __future__ import annotations

from controller.audit.audit import audit
from controller.config import Config
from controller.core.constants import VENDOR
from controller.ovn.api import PortInfo
from controller.ovn.port_kinds import is_controller_port
from tests.audit.helpers import clean_cluster

IDS = {"vendor": VENDOR}


def test_audit_ignores_ports_gc_leaves_alone() -> None:
    c = clean_cluster()
    for port in (
        PortInfo("localnet.ovn-default", "ovn-default", ("unknown",), (), IDS, "localnet"),
        PortInfo("ts-az2", "ts", ("00:00:00:00:02:01 169.254.100.2",), (), IDS, "remote"),
        PortInfo("vpc-nat-gw-gw1", "ovn-default", ("00:00:00:00:02:02 10.16.0.250",), (), IDS),
    ):
        assert not is_controller_port(port)
        c.ports[port.name] = port
    report = audit(c.snapshot(), Config())
    assert report.settled, report.render()
    # a pod-named or node-named VIF nobody accounts for is still an orphan
    c.ports["gone.default"] = PortInfo(
        "gone.default", "ovn-default", ("00:00:00:00:02:03 10.16.0.251",), (), IDS
    )
    assert "orphan-lsp" in audit(c.snapshot(), Config()).render()
