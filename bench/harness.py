"""What every benchmark under bench/ shares: the repository on sys.path, and timing helpers.

A script runs as `python bench/<name>.py` (or `python bench/e2e`), so Python puts bench/ (or
bench/e2e/, whose __main__ puts bench/ back) first on sys.path and `import harness` finds this
module; importing it appends the repository root, so `controller`, `tests` and `bench` import
from the source tree. Append, never prepend: the repository's top-level `cmd` package must not
shadow the standard library's (pdb imports it). ruff's isort places `import harness` (a
third-party name to it) before the first-party imports that need the path.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) of `values`, nearest rank; `values` must not be empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` calls of `fn`, in seconds (the least disturbed run)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
