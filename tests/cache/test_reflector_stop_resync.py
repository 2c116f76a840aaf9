"""`Reflector.list_and_watch` called directly: a stop ends it, a failing resync ends it.

client-go's `ListAndWatch(stopCh)` returns nil soon after `stopCh` closes, even with a watch
open and idle; and a `store.Resync()` error ends the watch and `ListAndWatch` (the Run loop then
relists after its backoff delay) instead of leaving the watch running without resyncs.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import pytest

from controller.cache import Reflector
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock, FakeListerWatcher, make_pod
from tests.cache.test_reflector import RecordingStore

JOIN = 5.0  # real seconds a returning list_and_watch may take: generous, never reached when right


class ResyncFailsStore(RecordingStore):
    """A store whose `resync()` raises on its first call and succeeds afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def resync(self) -> None:
        super().resync()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("resync exploded")


class Call:
    """`reflector.list_and_watch(stop)` in a thread, with its outcome kept."""

    def __init__(self, reflector: Reflector, stop: threading.Event) -> None:
        self.error: BaseException | None = None
        self.returned = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(reflector, stop), daemon=True)
        self.thread.start()

    def _run(self, reflector: Reflector, stop: threading.Event) -> None:
        try:
            reflector.list_and_watch(stop)
        except BaseException as err:  # kept for the assertion
            self.error = err
        finally:
            self.returned.set()


@pytest.fixture
def lw() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    lw.create(make_pod("a"))
    return lw


def _reflector(lw: FakeListerWatcher, store: Any, clock: FakeClock, **kwargs: Any) -> Reflector:
    return Reflector(lw, store, clock=clock, rng=random.Random(3), **kwargs)


def test_list_and_watch_returns_without_error_when_stop_is_set_while_watching(
    lw: FakeListerWatcher,
) -> None:
    stop = threading.Event()
    reflector = _reflector(lw, RecordingStore(), FakeClock())
    call = Call(reflector, stop)
    try:
        wait_for(lambda: lw.open_watches() == 1, message="watch open")
        stop.set()  # no event will ever arrive on this watch
        assert call.returned.wait(JOIN), "list_and_watch ignored stop with a watch open"
        assert call.error is None
        assert [w.stopped.is_set() for w in lw.created_watchers] == [True]
        assert len(lw.watch_calls) == 1
    finally:
        stop.set()
        lw.close_watches()
        call.thread.join(JOIN)


def test_list_and_watch_returns_at_once_when_stop_is_already_set(lw: FakeListerWatcher) -> None:
    stop = threading.Event()
    stop.set()
    reflector = _reflector(lw, RecordingStore(), FakeClock())
    call = Call(reflector, stop)
    assert call.returned.wait(JOIN)
    assert call.error is None and lw.watch_calls == []


def test_failing_resync_ends_list_and_watch_and_stops_the_watch(
    lw: FakeListerWatcher, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    store = ResyncFailsStore()
    stop = threading.Event()
    reflector = _reflector(lw, store, clock, resync_period=10.0)
    call = Call(reflector, stop)
    try:
        wait_for(lambda: lw.open_watches() == 1 and clock.waiters() == 1, message="resync timer")
        with caplog.at_level(logging.WARNING, logger="controller.cache.reflector"):
            clock.step(10.0)
            assert call.returned.wait(JOIN), "the watch ran on after the resync failed"
        assert store.ops("resync") == [None]
        # client-go: the resync error ends the watch ("watch ended with error") and ListAndWatch
        # returns; the Run loop's backoff and relist follow.
        assert call.error is None
        assert any("resync exploded" in r.getMessage() for r in caplog.records), caplog.text
        assert [w.stopped.is_set() for w in lw.created_watchers] == [True]
        assert len(lw.watch_calls) == 1
    finally:
        stop.set()
        lw.close_watches()
        call.thread.join(JOIN)


def test_failing_resync_makes_run_relist_after_the_backoff(lw: FakeListerWatcher) -> None:
    clock = FakeClock()
    store = ResyncFailsStore()
    stop = threading.Event()
    reflector = _reflector(lw, store, clock, resync_period=10.0)
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: lw.open_watches() == 1 and clock.waiters() == 1, message="resync timer")
        clock.step(10.0)
        # the resync thread is gone; the only sleeper left is the Run loop's backoff
        wait_for(lambda: lw.open_watches() == 0 and clock.waiters() == 1, message="backoff")
        backoff = clock.waits[-1]
        assert 0.8 <= backoff < 1.6
        assert len(lw.list_calls) == 1
        clock.step(backoff)
        wait_for(lambda: len(lw.list_calls) == 2 and lw.open_watches() == 1, message="relist")
        assert len(store.ops("replace")) == 2
    finally:
        stop.set()
        thread.join(JOIN)
    assert not thread.is_alive()
