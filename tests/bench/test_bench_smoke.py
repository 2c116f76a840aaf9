"""Smoke run of bench/e2e.py --quick: it must finish, and print positive figures for every part.

No timing assertion (figures depend on the machine); only that each measurement produced one.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(240)


def _row(out: str, label: str) -> list[float]:
    m = re.search(rf"^{re.escape(label)}\s+(.*)$", out, re.MULTILINE)
    assert m, f"no {label!r} row in:\n{out}"
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.group(1))]


def test_quick_run_prints_figures_limits_and_startup() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/e2e.py", "--quick"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for label in ("pods/s to allocated", "pods/s to routed"):
        controller, emulator_limit, ovn_limit, *ratios = _row(out, label)
        assert min(controller, emulator_limit, ovn_limit) > 0
        assert len(ratios) == 2
    assert _row(out, "controller CPU ms/pod")[0] > 0
    assert "POST ips 201" in out  # the controller's per-pod requests were counted
    assert re.search(r"start-up with 2000 existing pods", out)
    ready = re.search(r"spawn to /readyz 200: ([\d.]+)s", out)
    assert ready and float(ready.group(1)) > 0
    assert "IPAM rebuild (its log)" in out
