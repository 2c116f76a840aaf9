"""Suite-wide setup.

Fixtures shared by several areas live in tests/fixtures/ and are registered here (pytest only
honours `pytest_plugins` in the top-level conftest).

The repository root goes at the *end* of sys.path, not the front: our top-level `cmd` package
would otherwise shadow the standard library's `cmd`, which pytest's pdb support imports.

Slow tiers are marked by directory (setup.cfg registers the markers): every test under
tests/<tier>/ carries the `slow` marker, and the tier's own marker where it has one, so
`pytest -m "not e2e"` skips one tier. A unit test that starts a process (an ovsdb-server, a
`python -m ...`, a build) carries `server`: found from its fixtures and its file's text, and,
when the run deselects `server`, any process a test starts anyway fails it with a message saying
to mark it. `pytest -m "not slow and not server"` (`make fast`) is the inner loop.
Scenarios marked `emulator_only` lose the real-plane variant of the e2e `cluster` fixture.
"""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

pytest_plugins = [
    "tests.fixtures.nb",
    "tests.fixtures.controlplane",
    "tests.fixtures.realbed",
    "tests.fixtures.logging_state",
]

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
    "realnode": ("realcp", "realnode"),
    "bench": ("bench",),
}

# Fixtures that start a process (an ovsdb-server, a real control plane), and words in a test
# file that mean it starts one itself.
SERVER_FIXTURES = frozenset(
    {"nb_server", "real_client", "real_control_plane", "control_plane_binaries", "real_bed"}
)
SERVER_WORDS = ("subprocess", "Popen", "NbServer", "sys.executable", "DataPlane(")
_starts_processes: dict[Path, bool] = {}


def _file_starts_processes(path: Path) -> bool:
    if path not in _starts_processes:
        text = path.read_text(encoding="utf-8", errors="replace")
        _starts_processes[path] = any(word in text for word in SERVER_WORDS)
    return _starts_processes[path]


def _starts_a_server(item: pytest.Item) -> bool:
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    # Two-variant fixtures (tests/ovn `subject`) start the server for their "real" side only.
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "real" in callspec.params.values():
        return True
    return _file_starts_processes(item.path)


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
        elif _starts_a_server(item):
            item.add_marker("server")
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


def _no_processes(config: pytest.Config) -> bool:
    """True when the run deselects `server`: the fast tier, which must start no process."""
    expr = config.getoption("markexpr", "") or ""
    return "not server" in expr


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    if not _no_processes(request.config):
        yield
        return
    original = subprocess.Popen.__init__
    nodeid = request.node.nodeid

    def refuse(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{nodeid} starts a process in the fast tier: give it the `server` marker "
            "(or a fixture tests/conftest.py knows starts one)"
        )

    # the guard swaps the constructor for the test's duration (hence the ignores)
    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]
