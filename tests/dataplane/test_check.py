"""`check --dataplane` against the real data plane: clean while every port is bound; an OVS
interface whose iface-id names no port and a Running pod's port that no chassis claims are
reported (and the pod indeed stops answering); clean again once repaired."""

from __future__ import annotations

import io

from controller.audit.check import run_check
from controller.config import parse_args
from tests.dataplane.helpers import DUAL_STACK, Net
from tests.e2e.helpers import wait_for


def _check(net: Net) -> tuple[int, str]:
    argv = [
        "check",
        *net.cluster.argv(*DUAL_STACK),
        "--dataplane",
        f"--ovn-sb-addr={net.dp.sb_remote}",
        f"--ovs-db={net.dp.conf_remote}",
    ]
    out = io.StringIO()
    code = run_check(parse_args(argv, {"KUBE_NAMESPACE": "kube-system"}), out=out)
    return code, out.getvalue()


def _clean(net: Net) -> str:
    def clean() -> str | None:
        code, out = _check(net)
        return out if code == 0 else None

    return wait_for(clean, message="check --dataplane clean", interval=0.3)


def test_check_dataplane_reports_unbound_ports_and_orphan_interfaces(net: Net) -> None:
    probe = net.create("chk-probe")
    pod = net.create("chk-a")
    out = _clean(net)
    assert "port bindings" in out and "OVS interfaces" in out, out

    net.dp.vsctl(
        "add-port",
        "br-int",
        "ghost0",
        "--",
        "set",
        "interface",
        "ghost0",
        "type=internal",
        "external_ids:iface-id=ghost.default",
    )
    host = net.cni.wired_ports()["chk-a.default"]
    net.dp.vsctl("remove", "interface", host, "external_ids", "iface-id")
    try:
        wait_for(lambda: "port-unbound" in _check(net)[1], message="the port reported unbound")
        code, out = _check(net)
        assert code == 1, out
        assert "iface-orphan" in out and "interface ghost0" in out, out
        assert "lsp chk-a.default: pod default/chk-a on node1 is Running" in out, out
        net.goes_silent(probe.netns, pod.ip())
    finally:
        net.dp.vsctl("--if-exists", "del-port", "br-int", "ghost0")
        net.dp.vsctl("set", "interface", host, "external_ids:iface-id=chk-a.default")
    _clean(net)
    net.reaches(probe.netns, pod.ip())
