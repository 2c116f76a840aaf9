from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from typing import Any

import pytest

from controller.apiclient.errors import ConnectionFailedError, StatusError
from controller.cache import Backoff, ListOptions, Reflector, WatchEvent
from controller.cache.backoff import DelayWithReset
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock, FakeListerWatcher, make_pod


class RecordingStore:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, Any]] = []

    def _rec(self, op: str, arg: Any) -> None:
        with self.lock:
            self.calls.append((op, arg))

    def add(self, obj: Any) -> None:
        self._rec("add", obj["metadata"]["name"])

    def update(self, obj: Any) -> None:
        self._rec("update", obj["metadata"]["name"])

    def delete(self, obj: Any) -> None:
        self._rec("delete", obj["metadata"]["name"])

    def replace(self, objs: Iterable[Any], resource_version: str) -> None:
        self._rec("replace", (sorted(o["metadata"]["name"] for o in objs), resource_version))

    def resync(self) -> None:
        self._rec("resync", None)

    def bookmark(self, resource_version: str) -> None:
        self._rec("bookmark", resource_version)

    def ops(self, op: str) -> list[Any]:
        with self.lock:
            return [a for o, a in self.calls if o == op]


class Harness:
    def __init__(self, lw: FakeListerWatcher, **kwargs: Any) -> None:
        self.lw = lw
        self.clock = FakeClock()
        self.store = RecordingStore()
        self.stop = threading.Event()
        self.reflector = Reflector(lw, self.store, clock=self.clock, rng=random.Random(7), **kwargs)
        self.thread = threading.Thread(target=self.reflector.run, args=(self.stop,))

    def __enter__(self) -> Harness:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        assert not self.thread.is_alive()

    def wait_watching(self, n: int = 1) -> None:
        wait_for(
            lambda: len(self.lw.watch_calls) >= n and self.lw.open_watches() == 1,
            message=f"watch #{n} open",
        )


@pytest.fixture
def lw() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    lw.create(make_pod("a"))
    lw.create(make_pod("b"))
    return lw


def test_initial_list_then_watch_from_list_rv(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        assert lw.list_calls == [ListOptions(resource_version="0", limit=500)]
        assert h.store.ops("replace") == [(["a", "b"], "102")]
        watch = lw.watch_calls[0]
        assert watch.resource_version == "102" and watch.allow_watch_bookmarks
        assert watch.timeout_seconds is not None and 300 <= watch.timeout_seconds < 600
        lw.create(make_pod("c"))
        lw.update(lw.get("a"))
        lw.delete("b")
        wait_for(lambda: len(h.store.calls) == 4)
        assert h.store.calls[1:] == [("add", "c"), ("update", "a"), ("delete", "b")]
        assert h.reflector.last_sync_resource_version() == "105"


def test_paginated_initial_list() -> None:
    lw = FakeListerWatcher()
    for i in range(1200):
        lw.create(make_pod(f"p{i:04d}"))
    with Harness(lw) as h:
        h.wait_watching()
        assert [(c.resource_version, c.limit, bool(c.continue_)) for c in lw.list_calls] == [
            ("0", 500, False),
            ("", 500, True),
            ("", 500, True),
        ]
        names, rv = h.store.ops("replace")[0]
        assert len(names) == 1200 and rv == "1300"


def test_expired_continue_token_falls_back_to_one_full_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lw = FakeListerWatcher()
    for i in range(600):
        lw.create(make_pod(f"p{i:04d}"))
    original_list = lw.list

    def list_expiring(options: ListOptions) -> Any:
        if options.continue_:
            lw.expire_continue_tokens()
        return original_list(options)

    monkeypatch.setattr(lw, "list", list_expiring)
    with Harness(lw) as h:
        h.wait_watching()
        assert lw.list_calls[-1] == ListOptions(resource_version="0", limit=0)
        assert len(h.store.ops("replace")[0][0]) == 600


def test_normal_watch_close_resumes_without_relist_or_delay(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        lw.create(make_pod("c"))
        wait_for(lambda: h.store.ops("add") == ["c"])
        lw.close_watches()
        h.wait_watching(2)
        lw.create(make_pod("d"))
        wait_for(lambda: h.store.ops("add") == ["c", "d"])
        assert len(lw.list_calls) == 1
        assert lw.watch_calls[1].resource_version == "103"
        assert h.clock.waits == []


def test_watch_410_relists_after_backoff_from_last_rv(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        lw.create(make_pod("c"))
        wait_for(lambda: h.store.ops("add") == ["c"])
        lw.send_error(410, "Expired", "too old resource version")
        wait_for(lambda: h.clock.waiters() == 1, message="backoff wait")
        assert 0.8 <= h.clock.waits[0] < 1.6
        assert len(lw.list_calls) == 1
        h.clock.step(h.clock.waits[0])
        h.wait_watching(2)
        # relist from the last synced RV, unpaginated (served from the watch cache)
        assert lw.list_calls[1] == ListOptions(resource_version="103", limit=0)
        assert h.store.ops("replace")[-1] == (["a", "b", "c"], "103")


def test_list_410_retries_at_once_with_empty_rv(lw: FakeListerWatcher) -> None:
    lw.list_errors.append(StatusError(410, "Expired"))
    with Harness(lw) as h:
        h.wait_watching()
        assert [(c.resource_version, c.limit) for c in lw.list_calls] == [("0", 500), ("", 500)]
        assert h.clock.waits == []


def test_list_failures_back_off_exponentially_with_jitter(lw: FakeListerWatcher) -> None:
    lw.list_errors.extend([StatusError(500, "InternalError"), ConnectionFailedError("reset")])
    with Harness(lw) as h:
        wait_for(lambda: h.clock.waiters() == 1)
        h.clock.step(h.clock.waits[0])
        wait_for(lambda: len(h.clock.waits) == 2 and h.clock.waiters() == 1)
        h.clock.step(h.clock.waits[1])
        h.wait_watching()
        assert 0.8 <= h.clock.waits[0] < 1.6
        assert 1.6 <= h.clock.waits[1] < 3.2
        assert len(lw.list_calls) == 3


@pytest.mark.parametrize(
    ("error", "lists"),
    [
        # refused: back off and re-watch from the same version, without a relist
        (ConnectionFailedError("Connection refused", refused=True), 1),
        # any other failure to start the watch: relist after the backoff
        (StatusError(500, "InternalError"), 2),
    ],
    ids=["refused-rewatches", "500-relists"],
)
def test_watch_start_failure_backs_off_then_rewatches_or_relists(
    lw: FakeListerWatcher, error: Exception, lists: int
) -> None:
    lw.watch_errors.append(error)
    with Harness(lw) as h:
        wait_for(lambda: h.clock.waiters() == 1)
        h.clock.step(h.clock.waits[0])
        h.wait_watching(2)
        assert len(lw.list_calls) == lists


def test_bookmarks_only_move_the_resource_version(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        rv = lw.bookmark()
        wait_for(lambda: h.store.ops("bookmark") == [rv])
        assert h.reflector.last_sync_resource_version() == rv
        lw.close_watches()
        h.wait_watching(2)
        assert lw.watch_calls[1].resource_version == rv
        assert len(lw.list_calls) == 1


def test_last_event_rv_wins_without_max(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        for rv in ("155", "132"):
            pod = make_pod("x")
            pod["metadata"]["resourceVersion"] = rv
            lw.send_raw(WatchEvent("MODIFIED", pod))
        wait_for(lambda: h.store.ops("update") == ["x", "x"])
        assert h.reflector.last_sync_resource_version() == "132"


def test_events_without_metadata_and_unknown_types_are_skipped(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        lw.send_raw(WatchEvent("ADDED", {"spec": {}}))
        lw.send_raw(WatchEvent("WEIRD", make_pod("w")))
        lw.create(make_pod("c"))
        wait_for(lambda: h.store.ops("add") == ["c"])
        assert h.reflector.last_sync_resource_version() == "103"


def test_very_short_empty_watch_leads_to_relist(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
        lw.close_watches()  # no events, virtual time did not move: "very short watch"
        wait_for(lambda: h.clock.waiters() == 1)
        h.clock.step(h.clock.waits[0])
        h.wait_watching(2)
        assert len(lw.list_calls) == 2


def test_internal_error_event_rewatches_only_within_retry_window(lw: FakeListerWatcher) -> None:
    with Harness(lw, max_internal_error_retry_duration=30.0) as h:
        h.wait_watching()
        lw.create(make_pod("c"))
        wait_for(lambda: h.store.ops("add") == ["c"])
        lw.send_error(500, "InternalError", "etcd hiccup")
        h.wait_watching(2)
        assert len(lw.list_calls) == 1 and h.clock.waits == []


def test_resync_timer_asks_should_resync(lw: FakeListerWatcher) -> None:
    answers = iter([False, True])
    with Harness(lw, resync_period=10.0, should_resync=lambda: next(answers)) as h:
        h.wait_watching()
        for _ in range(2):
            wait_for(lambda: h.clock.waiters() == 1)
            h.clock.step(10.0)
            wait_for(lambda: len(h.clock.waits) >= 2)
        wait_for(lambda: h.store.ops("resync") == [None])
        assert len(lw.list_calls) == 1


def test_stop_interrupts_a_blocked_watch(lw: FakeListerWatcher) -> None:
    with Harness(lw) as h:
        h.wait_watching()
    # __exit__ joined the thread although no event ever arrived: the stream was stopped.
    assert [w.stopped.is_set() for w in lw.created_watchers] == [True]


def test_backoff_sequence_caps_and_resets() -> None:
    rng = random.Random(1)
    clock = FakeClock()
    delay = DelayWithReset(Backoff(), clock, rng)
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    for base in bases:
        d = delay()
        assert base <= d < 2 * base
    clock.step(121)
    assert 0.8 <= delay() < 1.6


def test_backoff_without_jitter_is_exact() -> None:
    b = Backoff(jitter=0)
    assert [b.step(random.Random()) for _ in range(8)] == [
        0.8,
        1.6,
        3.2,
        6.4,
        12.8,
        25.6,
        30.0,
        30.0,
    ]
