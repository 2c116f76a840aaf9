"""Running a bench script as a user would: `python bench/<script> ...` from the repository root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `python <args>` in the repository root; asserts it exited 0 (its output in the
    message otherwise) and returns the finished process."""
    proc = subprocess.run(
        [sys.executable, *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc
