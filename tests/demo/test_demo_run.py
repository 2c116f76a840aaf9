"""`python -m controller.sandbox.demo` end to end: the real controller, emulator and ovsdb-server.

Every test runs the demo as a subprocess from the repository root, as the README tells users to,
and checks what it printed, what it left running and what it left on disk.
"""

from __future__ import annotations

import re
import signal
import socket
import urllib.request
from pathlib import Path

import pytest

from tests.demo.conftest import StartDemo
from tests.demo.helpers import (
    CONTROLLER_LINE,
    METRICS_LINE,
    NB_LINE,
    SERVING_LINE,
    WORKDIR_LINE,
    DemoRun,
    in_net,
    parse_rows,
    process_alive,
)

pytestmark = pytest.mark.e2e

MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$", re.I)
# The data plane has its own demo test (tests/dataplane/test_demo.py); these stay API-only.
FLAGS = ("--metrics-port", "0", "--timeout", "60", "--no-dataplane")


def assert_nothing_left(run: DemoRun, *, workdir_removed: bool = True) -> None:
    nb = run.first(NB_LINE)
    controller = run.first(CONTROLLER_LINE)
    if nb is not None:
        assert not process_alive(int(nb.group(1)), b"ovsdb-server"), run.output()
    if controller is not None:
        assert not process_alive(int(controller.group(1)), b"cmd.controller"), run.output()
    workdir = run.first(WORKDIR_LINE)
    assert workdir is not None, run.output()
    assert Path(workdir.group(1)).exists() is not workdir_removed, run.output()
    assert "Traceback" not in run.output()


def test_once_shows_every_pod_in_its_subnet(start_demo: StartDemo) -> None:
    run = start_demo("--once", "--pods", "3", *FLAGS)
    code = run.finish()
    out = run.output()
    assert code == 0, out

    rows = parse_rows(run.lines)
    deployment = sorted(p for p in rows if p.startswith("demo/demo-app-"))
    assert len(deployment) == 3, out
    assert set(rows) == {*deployment, "demo/web-0", "demo/web-1", "demo/dual"}, out
    for pod, row in rows.items():
        name = pod.split("/", 1)[1]
        assert row.lsp == f"{name}.demo", out
        assert MAC.match(row.mac), out
        assert row.routed == "yes", out
        assert row.node in ("demo-node-1", "demo-node-2"), out
        if name == "dual":
            assert row.switch == "demo-dual", out
            v4, v6 = row.ips
            assert in_net(v4, "10.101.0.0/24") and in_net(v6, "fd00:101::/120"), out
        else:
            assert row.switch == "demo-subnet", out
            (ip,) = row.ips
            assert in_net(ip, "10.100.0.0/24"), out
    every_ip = [ip for row in rows.values() for ip in row.ips]
    assert len(set(every_ip)) == len(every_ip), out
    assert len({row.mac for row in rows.values()}) == len(rows), out
    assert "--once: every pod is up" in out
    assert_nothing_left(run)


@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["sigint", "terminal-ctrl-c", "sigterm"],
)
def test_ctrl_c_after_the_table_stops_everything(
    start_demo: StartDemo, sig: signal.Signals, group: bool
) -> None:
    run = start_demo("--pods", "1", *FLAGS)
    run.wait_line(SERVING_LINE)
    metrics = run.first(METRICS_LINE)
    assert metrics is not None, run.output()
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with direct.open(metrics.group(1), timeout=10) as resp:
        body = resp.read().decode()
    assert resp.status == 200
    assert 'workqueue_adds_total{name="AddPod"}' in body
    controller = run.first(CONTROLLER_LINE)
    assert controller is not None
    assert process_alive(int(controller.group(1)), b"cmd.controller")

    run.interrupt(sig, group=group)
    assert run.finish() == 0, run.output()
    assert_nothing_left(run)
    assert re.search(r"stopped the controller \(pid \d+, exit code 0\)", run.output())


def test_ctrl_c_while_the_controller_starts(start_demo: StartDemo) -> None:
    run = start_demo("--pods", "1", *FLAGS)
    run.wait_line(CONTROLLER_LINE)
    run.interrupt()
    assert run.finish() == 0, run.output()
    assert_nothing_left(run)


def test_ctrl_c_while_the_nb_server_starts(start_demo: StartDemo) -> None:
    run = start_demo("--pods", "1", *FLAGS)
    run.wait_line(WORKDIR_LINE)
    run.interrupt()
    assert run.finish() == 0, run.output()
    assert_nothing_left(run)


def test_given_workdir_is_kept_with_its_files(start_demo: StartDemo, tmp_path: Path) -> None:
    workdir = tmp_path / "sandbox"
    run = start_demo("--once", "--pods", "0", "--workdir", str(workdir), *FLAGS)
    assert run.finish() == 0, run.output()
    assert set(parse_rows(run.lines)) == {"demo/web-0", "demo/web-1", "demo/dual"}
    assert_nothing_left(run, workdir_removed=False)
    assert (workdir / "nb" / "nb.db").is_file()
    assert (workdir / "kubeconfig").is_file()
    assert "controller.log" in {p.name for p in workdir.iterdir()}


def test_busy_metrics_port_is_a_clear_error(start_demo: StartDemo) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = start_demo("--metrics-port", str(port))
        code = run.finish()
    assert code == 1
    assert f"port {port} on 127.0.0.1 is in use" in run.output()
    assert run.first(NB_LINE) is None
    assert "Traceback" not in run.output()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pods", "-1"), "--pods must be between 0 and 200"),
        (("--pods", "many"), "invalid int value"),
        (("--metrics-port", "70000"), "--metrics-port must be a TCP port"),
        (("--timeout", "0"), "--timeout must be positive"),
    ],
)
def test_bad_flags_exit_2(start_demo: StartDemo, args: tuple[str, ...], message: str) -> None:
    run = start_demo(*args)
    assert run.finish() == 2
    assert message in run.output()
