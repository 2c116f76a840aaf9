"""Demo fixtures: every demo subprocess a test starts is killed at teardown if still running."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.demo.helpers import DemoRun

StartDemo = Callable[..., DemoRun]


@pytest.fixture
def start_demo() -> Iterator[StartDemo]:
    runs: list[DemoRun] = []

    def start(*args: str) -> DemoRun:
        run = DemoRun(list(args))
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.kill()
