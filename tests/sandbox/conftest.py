"""Fixtures: a fresh emulator per test (cheap: one socket, one thread) and official clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.apiserver.server import ApiServer


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval=0.2, history_window=1000) as srv:
        yield srv


@pytest.fixture
def api(server: ApiServer) -> Iterator[Any]:
    api_client = server.api_client()
    yield api_client
    api_client.close()


@pytest.fixture
def core(api: Any) -> Any:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: Any) -> Any:
    return client.CustomObjectsApi(api)


@pytest.fixture
def apps(api: Any) -> Any:
    return client.AppsV1Api(api)


@pytest.fixture
def coordination(api: Any) -> Any:
    return client.CoordinationV1Api(api)
