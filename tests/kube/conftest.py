"""Fixtures for tests/kube: `harness` runs each contract test over every KubeApi implementation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.server import ApiServer
from tests.kube.helpers import FakeHarness, Harness, RealHarness

KEEP_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease", "ns1"}
CLEANED = (
    "pods",
    "ips",
    "subnets",
    "events",
    "nodes",
    "configmaps",
    "statefulsets",
    "network-attachment-definitions",
    "virtualmachines",
)


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServer]:
    # NOTE: one emulator per module, emptied after each test: stopping one costs its 0.5 s
    # serve_forever poll interval, which per test would dominate this suite's run time.
    with ApiServer() as server:
        server.store.create("namespaces", {"metadata": {"name": "ns1"}})
        yield server


def _empty(server: ApiServer) -> None:
    server.faults.clear()
    store = server.store
    for resource in CLEANED:
        for obj in store.list(resource):
            meta = obj["metadata"]
            with contextlib.suppress(ApiError):
                store.delete(resource, meta.get("namespace"), meta["name"], grace_period_seconds=0)
    for ns in store.list("namespaces"):
        if ns["metadata"]["name"] not in KEEP_NAMESPACES:
            with contextlib.suppress(ApiError):
                store.delete("namespaces", None, ns["metadata"]["name"])


@pytest.fixture
def emulator(apiserver: ApiServer) -> Iterator[ApiServer]:
    """The module's emulator, emptied (objects and pending faults) after the test."""
    try:
        yield apiserver
    finally:
        _empty(apiserver)


@pytest.fixture(params=["fake", "real"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "fake":
        fake = FakeHarness()
        fake.seed("namespaces", {"metadata": {"name": "default"}})  # a real cluster has it
        fake.seed("namespaces", {"metadata": {"name": "ns1"}})
        yield fake
        return
    real = RealHarness(request.getfixturevalue("emulator"))
    try:
        yield real
    finally:
        real.close()
