"""Suite-wide setup.

Fixtures shared by several areas live in tests/fixtures/ and are registered here (pytest only
honours `pytest_plugins` in the top-level conftest).

The repository root goes at the *end* of sys.path, not the front: our top-level `cmd` package
would otherwise shadow the standard library's `cmd`, which pytest's pdb support imports.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

pytest_plugins = ["tests.fixtures.nb", "tests.fixtures.controlplane", "tests.fixtures.realbed"]
