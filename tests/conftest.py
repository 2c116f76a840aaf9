"""Suite-wide setup.

Fixtures shared by several areas live in tests/fixtures/ and are registered here (pytest only
honours `pytest_plugins` in the top-level conftest).

The repository root goes at the *end* of sys.path, not the front: our top-level `cmd` package
would otherwise shadow the standard library's `cmd`, which pytest's pdb support imports.

Slow tiers are marked by directory (setup.cfg registers the markers): every test under
tests/<tier>/ carries the `slow` marker, and the tier's own marker where it has one, so
`pytest -m "not slow"` is the fast inner loop and `pytest -m "not e2e"` skips one tier.
Scenarios marked `emulator_only` lose the real-plane variant of the e2e `cluster` fixture.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

pytest_plugins = ["tests.fixtures.nb", "tests.fixtures.controlplane", "tests.fixtures.realbed"]

TESTS = Path(__file__).resolve().parent
# tier directory -> its own markers; every tier listed here is also `slow`. The data-plane and
# real-control-plane tiers register and apply their own markers.
SLOW_TIERS: dict[str, tuple[str, ...]] = {
    "e2e": ("e2e",),
    "faults": ("faults",),
    "chart": ("chart",),
    "demo": ("demo",),
    "dataplane": (),
    "controlplane": ("realcp",),
}


def tier_of(path: Path) -> str | None:
    """The slow tier a test file belongs to, or None for the fast unit tests."""
    try:
        first = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in SLOW_TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        tier = tier_of(item.path)
        if tier is not None:
            item.add_marker("slow")
            for marker in SLOW_TIERS[tier]:
                item.add_marker(marker)
        # An emulator_only scenario gets no `real` variant of the two-plane `cluster` fixture
        # (tests/e2e/conftest.py): deselected, not skipped, as nothing is missing. Here, not in
        # that conftest, so that it holds however the tests are chosen (tests/faults borrows
        # the fixture without loading that conftest).
        callspec = getattr(item, "callspec", None)
        plane = callspec.params.get("cluster") if callspec is not None else None
        if plane == "real" and item.get_closest_marker("emulator_only") is not None:
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
