"""`python bench/e2e [options]`: the end-to-end bench (see the package's docstring and cli.py).

Run as a directory, Python puts bench/e2e/ first on sys.path; it is replaced by bench/ so that
`import harness` (which appends the repository root) and `bench.e2e` resolve as in every bench.
"""

import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)

import harness  # noqa: E402, F401 - puts the repository root on sys.path

from bench.e2e.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
