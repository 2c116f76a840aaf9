"""Fixtures: an emulator with graceful pod deletion, a FakeClock and a started sandbox kubelet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode
from controller.testing.clock import FakeClock
from tests.sandbox.kubelet.helpers import RecordingWiring

NODES = (SimNode("node-a", "172.18.0.2"), SimNode("node-b", "172.18.0.3", cpu="4"))


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval=0.2, immediate_pod_delete=False) as srv:
        yield srv


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def wiring() -> RecordingWiring:
    return RecordingWiring()


@pytest.fixture
def sigterm_exit() -> float | None:
    """Seconds the pods' containers take to exit on SIGTERM (None: they ignore it); a test
    overrides it with `@pytest.mark.parametrize("sigterm_exit", [...])`."""
    return 0.0


@pytest.fixture
def kubelet(
    server: ApiServer, clock: FakeClock, wiring: RecordingWiring, sigterm_exit: float | None
) -> Iterator[SandboxKubelet]:
    api = server.api_client()
    kl = SandboxKubelet(api, NODES, wiring=wiring, clock=clock, sigterm_exit=sigterm_exit).start()
    try:
        yield kl
    finally:
        kl.stop()
        api.close()
