"""`Reflector.list_and_watch(stop)` ends promptly on stop with a real, idle watch stream open.

An idle watch on kube-apiserver sends nothing for minutes (a bookmark about once a minute, the
stream's timeout after 5-10); setting `stop` must close it rather than wait for the server.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.cache import ListOptions, ListWatch, Reflector
from controller.cache.listwatch import ListResult, Watcher, WatchOptions
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.controlplane import RealControlPlane
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock
from tests.cache.test_reflector import RecordingStore

pytestmark = pytest.mark.realcp

RETURN_WITHIN = 5.0  # seconds; the stream's own timeout is at least 300 s


@pytest.fixture(params=["emulator", "real"])
def api(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "emulator":
        with ApiServer(bookmark_interval=60.0) as server, server.api_client() as client:
            yield client
    else:
        plane: RealControlPlane = request.getfixturevalue("real_control_plane")
        with plane.api_client() as client:
            yield client


class CountingListWatch:
    def __init__(self, inner: ListWatch) -> None:
        self.inner = inner
        self.watches: list[Watcher] = []

    def list(self, options: ListOptions) -> ListResult:
        return self.inner.list(options)

    def watch(self, options: WatchOptions) -> Watcher:
        watcher = self.inner.watch(options)
        self.watches.append(watcher)
        return watcher


def test_list_and_watch_returns_when_stopped_with_an_idle_watch_open(api: Any) -> None:
    lw = CountingListWatch(ListWatch(api, group="", version="v1", plural="namespaces"))
    stop = threading.Event()
    reflector = Reflector(
        lw, RecordingStore(), clock=FakeClock(), rng=random.Random(1), name="namespaces"
    )
    errors: list[BaseException] = []

    def call() -> None:
        try:
            reflector.list_and_watch(stop)
        except BaseException as err:  # kept for the assertion
            errors.append(err)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(lw.watches) == 1, timeout=30, message="watch open")
        stop.set()
        thread.join(RETURN_WITHIN)
        assert not thread.is_alive(), "list_and_watch ignored stop with a watch open"
        assert errors == [] and len(lw.watches) == 1
    finally:
        stop.set()
        for watcher in lw.watches:
            watcher.stop()
        thread.join(10)
