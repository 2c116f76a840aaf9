"""Smoke run of bench/dataplane.py with a few pods: it must finish and print every figure.

No timing assertion (figures depend on the machine); only that each measurement produced one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


def test_small_run_prints_startup_and_ping_latencies() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "bench/dataplane.py",
            "--pods",
            "4",
            "--sequential",
            "2",
            "--startups",
            "1",
        ],
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert re.search(r"data-plane start-up .*: median \d+\.\d+ s", out), out
    rows = re.findall(r"^  first answered ping\s+(\d+)\s+(\d+)\s+(\d+)$", out, re.MULTILINE)
    assert len(rows) == 2, out  # burst and sequential
    assert all(int(p50) > 0 for p50, _, _ in rows), out
    assert re.search(r"burst / sequential: \d+\.\d+x", out), out
