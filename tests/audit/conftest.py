"""Fixtures for tests/audit: one API server emulator per module, a short temp dir for sockets."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.sandbox.apiserver import ApiServer


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    # unix socket paths must stay under 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="audit") as d:
        yield Path(d)
