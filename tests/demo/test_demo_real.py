"""`python -m controller.sandbox.demo --control-plane real`: the demo on the real control plane
(the controller as its chart ServiceAccount, pods made by kube-controller-manager and bound by
kube-scheduler), leaving no process behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.sandbox.cluster.controlplane import Binaries
from tests.demo.conftest import StartDemo
from tests.demo.helpers import WORKDIR_LINE, in_net, parse_rows

pytestmark = [pytest.mark.e2e, pytest.mark.realcp]

PLANE_LINE = re.compile(r"^real control plane at https://127\.0\.0\.1:\d+ .*logs in (\S+)\)$")


def processes_under(path: str) -> list[str]:
    """Command lines of live processes that mention `path` (the plane's work directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if path in cmdline:
            found.append(cmdline)
    return found


def test_once_on_the_real_plane(start_demo: StartDemo, control_plane_binaries: Binaries) -> None:
    run = start_demo("--control-plane", "real", "--once", "--pods", "2",
                     "--metrics-port", "0", "--timeout", "90")  # fmt: skip
    code = run.finish(timeout=180)
    out = run.output()
    assert code == 0, out
    rows = parse_rows(run.lines)
    deployment = sorted(p for p in rows if p.startswith("demo/demo-app-"))
    assert len(deployment) == 2, out
    assert set(rows) == {*deployment, "demo/web-0", "demo/web-1", "demo/dual"}, out
    for pod, row in rows.items():
        cidr = "10.101.0.0/24" if pod == "demo/dual" else "10.100.0.0/24"
        assert in_net(row.ips[0], cidr), row
        assert row.node in ("demo-node-1", "demo-node-2"), row  # bound by kube-scheduler
    plane = run.first(PLANE_LINE)
    workdir = run.first(WORKDIR_LINE)
    assert plane is not None and workdir is not None, out
    assert processes_under(plane.group(1)) == []
    assert not Path(workdir.group(1)).exists()
    assert "Traceback" not in out
