"""The documented entry point works from the repository root (run as a subprocess: see cmd/)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_python_m_cmd_controller_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cmd.controller", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--ovn-nb-addr" in out.stdout
    assert "--kubeconfig" in out.stdout
