"""A LIST at a resourceVersion the server has not reached: what kube-apiserver answers, and that
the emulator and the reflector agree with it.

kube-apiserver (v1.37.2 here) waits about 3 s for its watch cache, then answers 504 Timeout,
message "Timeout: Too large resource version: <asked>, current: <current>", with one
`details.causes` entry of type `ResourceVersionTooLarge`. The reflector must read that from the
cause and fall back to a LIST at `resourceVersion=""` at once.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.apiclient.errors import KubeApiError
from controller.cache import ListOptions, ListWatch, Reflector
from controller.cache.errors import is_too_large_resource_version
from controller.cache.listwatch import ListResult, Watcher, WatchOptions
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.controlplane import RealControlPlane
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock
from tests.cache.test_reflector import RecordingStore

pytestmark = pytest.mark.realcp

AHEAD = 1_000_000  # resourceVersions beyond the server's current one
MESSAGE = re.compile(r"^Timeout: Too large resource version: (\d+), current: (\d+)$")


@pytest.fixture(params=["emulator", "real"])
def api(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "emulator":
        with ApiServer() as server, server.api_client() as client:
            yield client
    else:
        plane: RealControlPlane = request.getfixturevalue("real_control_plane")
        with plane.api_client() as client:
            yield client


def namespaces(api: Any) -> ListWatch:
    return ListWatch(api, group="", version="v1", plural="namespaces")


@pytest.mark.parametrize("limit", [0, 500], ids=["unpaginated", "paginated"])
def test_list_at_a_too_large_rv_is_a_timeout_with_the_status_cause(api: Any, limit: int) -> None:
    lw = namespaces(api)
    current = int(lw.list(ListOptions(resource_version="0", limit=500)).resource_version)
    asked = current + AHEAD
    with pytest.raises(KubeApiError) as err:
        lw.list(ListOptions(resource_version=str(asked), limit=limit))
    e = err.value
    assert (e.status, e.status_reason) == (504, "Timeout"), e
    match = MESSAGE.match(e.message)
    assert match is not None and int(match.group(1)) == asked, e.message
    assert [(c.type, c.message) for c in e.causes] == [
        ("ResourceVersionTooLarge", "Too large resource version")
    ]
    assert is_too_large_resource_version(e)


class AheadListWatch:
    """Asks the first LIST at a resourceVersion the server has not reached (as a reflector
    whose last version came from a newer etcd would), then passes everything through."""

    def __init__(self, inner: ListWatch) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.asked: list[str] = []
        self.watches = 0

    def list(self, options: ListOptions) -> ListResult:
        if not self.asked:
            current = int(self.inner.list(ListOptions(resource_version="0")).resource_version)
            options = ListOptions(resource_version=str(current + AHEAD), limit=options.limit)
        with self.lock:
            self.asked.append(options.resource_version)
        return self.inner.list(options)

    def watch(self, options: WatchOptions) -> Watcher:
        with self.lock:
            self.watches += 1
        return self.inner.watch(options)


def test_reflector_relists_at_latest_after_a_too_large_rv(api: Any) -> None:
    lw = AheadListWatch(namespaces(api))
    store = RecordingStore()
    clock = FakeClock()
    stop = threading.Event()
    reflector = Reflector(lw, store, clock=clock, rng=random.Random(1), name="namespaces")
    thread = threading.Thread(target=reflector.list_and_watch, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: lw.watches == 1, timeout=30, message="watching after the fallback list")
        with lw.lock:
            assert lw.asked[1:] == [""]
        (names, _), *_ = store.ops("replace")
        assert "default" in names
        assert clock.waits == []  # no backoff: the fallback ran at once
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
