"""Fixtures of the PodController tests: a standard environment, closed after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pod.env import Env, standard_env


@pytest.fixture
def env() -> Iterator[Env]:
    environment = standard_env()
    yield environment
    environment.close()
