"""`check --dataplane`: the pure NB/SB/OVS cross-check, the one-shot OVSDB reader against a real
ovsdb-server, and the flags."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.audit.audit import ClusterSnapshot
from controller.audit.dataplane import (
    KIND_BINDING_MISSING,
    KIND_IFACE_DUPLICATE,
    KIND_IFACE_ORPHAN,
    KIND_PORT_UNBOUND,
    DataPlaneSnapshot,
    OvsInterface,
    PortBinding,
    audit_dataplane,
)
from controller.config import parse_args
from controller.core.errors import ConfigError
from controller.core.model import Node, Pod
from controller.ovn.api import PortInfo
from controller.ovn.ovsdb_query import OvsdbQueryError, select
from controller.sandbox.ovn.ovsdb import NbServer
from tests.fixtures.nb import nbctl

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _port(name: str, pod: str = "") -> PortInfo:
    return PortInfo(
        name, "ovn-default", ("00:00:00:00:00:01 10.16.0.2",), external_ids={"pod": pod}
    )


SNAP = ClusterSnapshot(
    now=NOW,
    pods=(
        Pod("default", "run", phase="Running", node_name="n1"),
        Pod("default", "wait", phase="Pending", node_name="n1"),
    ),
    nodes=(Node("n1"),),
    ports=(
        _port("run.default", "default/run"),
        _port("wait.default", "default/wait"),
        _port("kept-0.default", "default/kept-0"),  # a kept StatefulSet port, no pod
        _port("node-n1"),
        PortInfo("ovn-default-ovn-cluster", "ovn-default", ("router",)),
    ),
)
BOUND = (
    PortBinding("run.default", "ch1"),
    PortBinding("wait.default", ""),
    PortBinding("kept-0.default", ""),
    PortBinding("node-n1", "ch1"),
    PortBinding("lrp-x", "", type="patch"),
)


def test_bound_ports_and_expected_unbound_ones_are_clean() -> None:
    interfaces = (OvsInterface("h1", "run.default"), OvsInterface("ovn0", "node-n1"))
    report = audit_dataplane(SNAP, DataPlaneSnapshot(BOUND, interfaces))
    assert report.findings == ()
    # the Pending pod's port is pending, not a finding
    assert [(f.kind, f.object) for f in report.pending] == [(KIND_PORT_UNBOUND, "lsp wait.default")]
    assert report.counts == {"port bindings": 4, "OVS interfaces": 2}


def test_missing_and_unbound_bindings_orphan_and_duplicate_interfaces_are_findings() -> None:
    bindings = (
        PortBinding("run.default", ""),
        PortBinding("wait.default", ""),
        PortBinding("node-n1", ""),
    )
    interfaces = (
        OvsInterface("h1", "run.default"),
        OvsInterface("h2", "run.default"),
        OvsInterface("h3", "gone.default"),
    )
    report = audit_dataplane(SNAP, DataPlaneSnapshot(bindings, interfaces))
    assert sorted((f.kind, f.object) for f in report.findings) == [
        (KIND_BINDING_MISSING, "lsp kept-0.default"),
        (KIND_IFACE_DUPLICATE, "lsp run.default"),
        (KIND_IFACE_ORPHAN, "interface h3"),
        (KIND_PORT_UNBOUND, "lsp node-n1"),
        (KIND_PORT_UNBOUND, "lsp run.default"),
    ]


def test_without_an_ovs_database_interfaces_are_not_checked() -> None:
    report = audit_dataplane(SNAP, DataPlaneSnapshot(BOUND, None))
    assert report.findings == () and "OVS interfaces" not in report.counts


def test_select_reads_rows_from_a_real_ovsdb_server(nb_server: NbServer) -> None:
    nbctl(
        nb_server.remote, "ls-add", "sw1", "--", "set", "logical_switch", "sw1", "external_ids:a=b"
    )
    rows = select(
        nb_server.remote, "OVN_Northbound", "Logical_Switch", ["name", "external_ids", "ports"]
    )
    assert rows == [{"name": "sw1", "external_ids": {"a": "b"}, "ports": []}]
    # a dead remote first in the list: the next one answers
    rows = select(
        f"unix:{nb_server.remote[5:]}.nope,{nb_server.remote}",
        "OVN_Northbound",
        "Logical_Switch",
        ["name"],
    )
    assert rows == [{"name": "sw1"}]
    with pytest.raises(OvsdbQueryError, match="Nope"):
        select(nb_server.remote, "OVN_Northbound", "Nope", ["name"])
    with pytest.raises(OvsdbQueryError, match="cannot select"):
        select("unix:/nonexistent.sock", "OVN_Northbound", "Logical_Switch", ["name"], timeout=1)


BASE = ["check", "--ovn-nb-addr=tcp:127.0.0.1:6641"]


def test_dataplane_flags_parse_and_bad_ones_are_refused() -> None:
    cfg = parse_args(
        [*BASE, "--dataplane", "--ovn-sb-addr=tcp:127.0.0.1:6642", "--ovs-db=unix:/x.sock"], {}
    )
    assert (cfg.dataplane, cfg.ovn_sb_addr, cfg.ovs_db) == (
        True,
        "tcp:127.0.0.1:6642",
        "unix:/x.sock",
    )
    for argv, message in (
        ([*BASE, "--dataplane"], "needs --ovn-sb-addr"),
        ([*BASE, "--ovs-db=unix:/x.sock"], "needs --dataplane"),
        ([*BASE, "--dataplane", "--ovn-sb-addr=tcp:127.0.0.1"], "--ovn-sb-addr: .* needs a port"),
        (["run", "--ovn-nb-addr=tcp:127.0.0.1:6641", "--dataplane"], "only apply to check"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_args(argv, {"POD_NAME": "p"})
