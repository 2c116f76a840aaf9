"""A root-logger handler a test leaves behind does not print other tests' log lines.

Runs a small pytest session in a subprocess, with output capture off (`-s`) so that whatever a
stray stderr handler writes reaches the terminal, as lines logged between two tests do in a
captured run: the first test installs the controller's handler as `controller.process.main()`
does and forgets it; a later test stands for a controller of the test bed that keeps running and
logging. Without `contained_logging` the later line reaches the terminal (the control run); with
it only a failing test's own captured log does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent

SESSION = """
import logging

from controller.runtime.log import setup_logging


def test_leaves_a_handler() -> None:
    setup_logging("info", "text")


def test_a_background_controller_logs() -> None:
    logging.getLogger("controller.background").info("a background line")


def test_fails_with_its_own_log() -> None:
    logging.getLogger("controller.own").warning("its own line")
    assert False
"""


def _run(pytester: pytest.Pytester, *, contained: bool) -> str:
    plugins = ["tests.fixtures.logging_state"] if contained else []
    # the repository at the end of sys.path: its `cmd` package must not shadow the stdlib's
    pytester.makeconftest(
        f"import sys\nsys.path.append({str(ROOT)!r})\npytest_plugins = {plugins!r}\n"
    )
    pytester.makepyfile(test_session=SESSION)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    return result.stdout.str() + result.stderr.str()


def test_a_leaked_handler_prints_other_tests_lines_without_the_fixture(
    pytester: pytest.Pytester,
) -> None:
    assert "a background line" in _run(pytester, contained=False)


def test_only_a_failing_tests_own_log_is_printed(pytester: pytest.Pytester) -> None:
    output = _run(pytester, contained=True)
    assert "a background line" not in output
    assert "its own line" in output  # the failing test's captured log, intact
