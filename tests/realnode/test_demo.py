"""`python -m controller.sandbox.demo --control-plane real --node real --once`: two real nodes run
the demo's Deployment and StatefulSet, every pod Ready and reaching every other, and nothing is
left behind. `--node real` without the real control plane is a usage error (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.sandbox.cluster.noderuns import known_runs
from controller.sandbox.demo.app import parse_args

ROOT = Path(__file__).resolve().parents[2]


def test_node_real_needs_the_real_control_plane(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--node", "real"])
    assert exc.value.code == 2
    assert "--node real needs --control-plane real" in capsys.readouterr().err
    assert parse_args(["--node", "real", "--control-plane", "real"]).node == "real"


def test_demo_on_real_nodes(node_requirements: Path) -> None:
    runs_before = known_runs()
    out = subprocess.run(
        [sys.executable, "-m", "controller.sandbox.demo", "--control-plane", "real",
         "--node", "real", "--once", "--metrics-port", "0", "--timeout", "180"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
        env={**os.environ, "KUBE_OVN_KUBELET": str(node_requirements),
             "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    lines = out.stdout.splitlines()
    assert any(line.startswith("every pod Running and Ready") for line in lines), out.stdout
    matrix = lines[lines.index("kubectl exec ping (row -> column):") + 2 :][:5]
    assert len(matrix) == 5
    assert all(line.split()[2:].count("ok") == 4 for line in matrix), out.stdout
    assert "stopped; nothing left behind" in lines
    assert known_runs() <= runs_before
