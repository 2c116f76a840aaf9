"""The demo's closing lines say what happened: "nothing left behind" only when the temporary
work directory was removed (a given --workdir is kept, and it says so), and "stopped the real
control plane" only when one was started. Runs the demo in-process up to a real control plane
whose binaries are missing: the NB ovsdb-server starts and stops, nothing else does."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from controller.sandbox.cluster.controlplane import ENV_BIN
from controller.sandbox.demo.app import Demo
from controller.sandbox.demo.options import parse_args
from controller.sandbox.demo.supervision import StopFlag

pytestmark = pytest.mark.server  # an ovsdb-server


def _run(argv: list[str], monkeypatch: pytest.MonkeyPatch, empty_bin: Path) -> list[str]:
    monkeypatch.setenv(ENV_BIN, str(empty_bin))
    out = io.StringIO()
    code = Demo(parse_args(argv), StopFlag(), out).run()
    assert code == 1
    return out.getvalue().splitlines()


@pytest.fixture
def empty_bin(tmp_path: Path) -> Path:
    path = tmp_path / "no-binaries"
    path.mkdir()
    return path


def test_a_real_plane_that_never_started_is_not_reported_stopped(
    monkeypatch: pytest.MonkeyPatch, empty_bin: Path
) -> None:
    lines = _run(
        ["--control-plane", "real", "--no-dataplane", "--metrics-port", "0"], monkeypatch, empty_bin
    )
    assert any(line.startswith("error: real control plane:") for line in lines), lines
    assert "stopped the real control plane" not in lines
    assert "stopped NB ovsdb-server" in lines
    assert lines[-1] == "stopped; nothing left behind"


def test_a_given_workdir_is_kept_and_said_so(
    monkeypatch: pytest.MonkeyPatch, empty_bin: Path, short_tmp: Path
) -> None:
    workdir = short_tmp / "demo"
    lines = _run(
        [
            "--control-plane",
            "real",
            "--no-dataplane",
            "--metrics-port",
            "0",
            "--workdir",
            str(workdir),
        ],
        monkeypatch,
        empty_bin,
    )
    assert workdir.is_dir()
    assert "stopped; nothing left behind" not in lines
    assert lines[-1] == f"stopped; the work directory {workdir.resolve()} is kept"


def test_a_reused_workdir_starts_from_fresh_databases(tmp_path: Path) -> None:
    # A data plane left by an earlier run (its SB and Open_vSwitch databases) kept the next
    # run's ovn-controller from ever getting ready.
    workdir = tmp_path / "demo"
    for stale in ("dp/sb/sb.db", "dp/ovs/conf.db", "nb/nb.db", "controller.log"):
        (workdir / stale).parent.mkdir(parents=True, exist_ok=True)
        (workdir / stale).write_text("stale")
    demo = Demo(parse_args(["--workdir", str(workdir)]), StopFlag(), io.StringIO())
    with contextlib.ExitStack() as stack:
        assert demo._workdir(stack) == workdir.resolve()
    assert workdir.is_dir()
    assert sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*")) == ["nb"]
