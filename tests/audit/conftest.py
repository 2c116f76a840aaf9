"""Fixtures for tests/audit: one API server emulator per module (`short_tmp` and `nb_server`
come from tests/fixtures/nb.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.sandbox.apiserver.server import ApiServer


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server
