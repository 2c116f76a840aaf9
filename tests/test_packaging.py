"""The wheel holds what runs in production and nothing else: no sandbox, no test doubles.

Built for real with pip (no network: the build backend is already installed), then listed.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_leaves_out_the_sandbox_and_the_test_doubles(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith(".py")}
    assert "controller/app.py" in names
    assert "controller/__main__.py" in names
    for needed in (
        "controller/core",
        "controller/pod_logic",
        "controller/pod",
        "controller/ovn",
        "controller/kube",
        "controller/cache",
        "controller/runtime",
        "controller/controllers",
        "controller/audit",
        "controller/ipam",
        "controller/queues",
    ):
        assert needed in packages, f"{needed} is missing from the wheel"
    leaked = sorted(n for n in names if n.startswith(("controller/sandbox", "controller/testing")))
    assert not leaked, f"test-only code in the wheel: {leaked}"
    assert not any(n.startswith(("cmd/", "tests/", "bench/")) for n in names)


def test_python_dash_m_controller_is_the_command_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "controller", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--ovn-nb-addr" in out.stdout
