"""A `RawWatcher` stopped from another thread while it is read ends like a normal close.

`stop()` unblocks the reading thread; tearing the connection down under that read must not
escape as an exception (http.client's chunked reader then closes a file that is already gone).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.cache import ListWatch
from controller.cache.listwatch import WatchOptions
from controller.sandbox.apiserver.server import ApiServer
from controller.testing.wait import wait_for

ROUNDS = 10  # the race is timing-dependent: several rounds give it the chance to show


@pytest.fixture
def api() -> Iterator[Any]:
    with ApiServer(bookmark_interval=60.0) as server, server.api_client() as client:
        yield client


def test_watch_stopped_from_another_thread_while_reading_ends_without_error(api: Any) -> None:
    lw = ListWatch(api, group="", version="v1", plural="namespaces")
    for _ in range(ROUNDS):
        watcher = lw.watch(WatchOptions(timeout_seconds=300))
        errors: list[BaseException] = []
        reading = threading.Event()

        def read(
            w: Any = watcher, errs: list[BaseException] = errors, started: Any = reading
        ) -> None:
            started.set()
            try:
                for _event in w:
                    pass
            except BaseException as err:  # kept for the assertion
                errs.append(err)

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        wait_for(reading.is_set, message="reader started")
        watcher.stop()
        thread.join(5)
        assert not thread.is_alive()
        assert errors == []


def test_watch_stopped_before_it_is_read_releases_its_connection(api: Any) -> None:
    lw = ListWatch(api, group="", version="v1", plural="namespaces")
    watcher = lw.watch(WatchOptions(timeout_seconds=300))
    watcher.stop()
    assert list(watcher) == []
