from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.cache import (
    DeletedFinalStateUnknown,
    FilteringResourceEventHandler,
    InformerStoppedError,
    NotInCacheError,
    SharedIndexInformer,
    wait_for_cache_sync,
)
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock, FakeListerWatcher, RecordingHandler, make_pod


class Running:
    """An informer running on its own thread over the fake, stopped on exit."""

    def __init__(self, lw: FakeListerWatcher, **kwargs: Any) -> None:
        self.lw = lw
        self.clock = FakeClock()
        self.stop = threading.Event()
        self.informer = SharedIndexInformer(lw, clock=self.clock, rng=random.Random(3), **kwargs)
        self.thread: threading.Thread | None = None

    def start(self) -> Running:
        self.thread = self.informer.start(self.stop)
        return self

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(5)
            assert not self.thread.is_alive()

    def synced(self) -> None:
        assert wait_for_cache_sync(self.informer, timeout=5, poll_interval=0.005)
        wait_for(lambda: self.lw.open_watches() >= 1, message="watching")


@pytest.fixture
def lw() -> FakeListerWatcher:
    lw = FakeListerWatcher()
    lw.create(make_pod("a", app="web"))
    lw.create(make_pod("b", app="db"))
    return lw


@pytest.fixture
def running(lw: FakeListerWatcher) -> Iterator[Running]:
    r = Running(lw)
    yield r
    r.close()


def test_initial_sync_fills_the_cache_and_notifies_initial_adds(running: Running) -> None:
    handler = RecordingHandler()
    reg = running.informer.add_event_handler(handler)
    assert not running.informer.has_synced() and not reg.has_synced()
    running.start().synced()
    wait_for(reg.has_synced)
    assert handler.snapshot() == [("add", "a", "101", True), ("add", "b", "102", True)]
    lister = running.informer.lister("pod")
    assert lister.get("a", "default")["metadata"]["labels"] == {"app": "web"}
    assert [p["metadata"]["name"] for p in lister.list("app=db")] == ["b"]
    with pytest.raises(NotInCacheError):
        lister.get("zzz", "default")


def test_events_reach_handlers_in_order_after_the_store(running: Running) -> None:
    seen_in_store: list[bool] = []
    handler = RecordingHandler()
    informer = running.informer

    def on_update(old: Any, new: Any) -> None:
        cached = informer.indexer.get_by_key("default/a")
        seen_in_store.append(
            cached is not None
            and cached["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]
        )

    informer.add_event_handler(handler)
    informer.add_event_handler(on_update=on_update)
    running.start().synced()
    lw = running.lw
    lw.create(make_pod("c"))
    pod = lw.get("a")
    pod["metadata"]["labels"]["v"] = "2"
    lw.update(pod)
    lw.delete("b")
    wait_for(lambda: handler.count() == 5)
    assert handler.snapshot()[2:] == [
        ("add", "c", "103", False),
        ("update", "a", "101", "104"),
        ("delete", "b", "dict"),
    ]
    assert sorted(informer.indexer.list_keys()) == ["default/a", "default/c"]
    assert informer.last_sync_resource_version() == "105"
    assert seen_in_store == [True]


def test_relist_after_410_delivers_tombstones_then_updates(running: Running) -> None:
    handler = RecordingHandler()
    running.informer.add_event_handler(handler)
    running.start().synced()
    wait_for(lambda: handler.count() == 2)
    lw = running.lw
    # While the informer is "disconnected": b vanishes, a changes, c appears; history is lost.
    a = lw.get("a")
    a["metadata"]["labels"]["v"] = "2"
    lw.set_silently([a, make_pod("c")])
    lw.send_error(410, "Expired", "too old resource version")
    wait_for(lambda: running.clock.waiters() == 1, message="relist backoff")
    running.clock.step(running.clock.waits[0])
    wait_for(lambda: handler.count() == 5)
    events = handler.snapshot()[2:]
    assert events == [
        ("delete", "b", "DeletedFinalStateUnknown"),
        ("update", "a", "101", "103"),
        ("add", "c", "104", False),
    ]
    assert sorted(running.informer.indexer.list_keys()) == ["default/a", "default/c"]
    assert len(running.lw.list_calls) == 2


def test_tombstone_carries_the_last_cached_object(running: Running) -> None:
    tombstones: list[DeletedFinalStateUnknown] = []
    running.informer.add_event_handler(on_delete=tombstones.append)
    running.start().synced()
    running.lw.set_silently([running.lw.get("a")])
    running.lw.send_error(410, "Expired")
    wait_for(lambda: running.clock.waiters() == 1)
    running.clock.step(running.clock.waits[0])
    wait_for(lambda: len(tombstones) == 1)
    assert tombstones[0].key == "default/b"
    assert tombstones[0].obj is not None and tombstones[0].obj["metadata"]["labels"] == {
        "app": "db"
    }


def test_unchanged_objects_in_a_relist_are_sync_updates(running: Running) -> None:
    handler = RecordingHandler()
    running.informer.add_event_handler(handler)
    running.start().synced()
    running.lw.send_error(410, "Expired")
    wait_for(lambda: running.clock.waiters() == 1)
    running.clock.step(running.clock.waits[0])
    wait_for(lambda: handler.count() == 4)
    assert handler.snapshot()[2:] == [("update", "a", "101", "101"), ("update", "b", "102", "102")]


def test_late_handler_gets_the_current_cache_first(running: Running) -> None:
    running.start().synced()
    running.lw.create(make_pod("c"))
    wait_for(lambda: len(running.informer.indexer) == 3)
    late = RecordingHandler()
    reg = running.informer.add_event_handler(late)
    running.lw.delete("a")
    wait_for(lambda: late.count() == 4)
    events = late.snapshot()
    assert sorted(e[1] for e in events[:3]) == ["a", "b", "c"]
    assert all(e[0] == "add" and e[3] is True for e in events[:3])
    assert events[3] == ("delete", "a", "dict")
    assert reg.has_synced()


def test_slow_handler_does_not_block_others(running: Running) -> None:
    gate = threading.Event()
    fast = RecordingHandler()

    def slow(obj: object) -> None:
        gate.wait(10)

    running.informer.add_event_handler(on_add=slow)
    running.informer.add_event_handler(fast)
    running.start()
    for i in range(50):
        running.lw.create(make_pod(f"x{i}"))
    wait_for(lambda: fast.count() == 52)
    assert running.informer.pending_notifications() > 0
    gate.set()
    wait_for(lambda: running.informer.pending_notifications() == 0)


def test_resync_delivers_same_rv_updates_to_due_handlers(lw: FakeListerWatcher) -> None:
    r = Running(lw, resync_period=30.0)
    try:
        resyncing = RecordingHandler()
        quiet = RecordingHandler()
        r.informer.add_event_handler(resyncing)
        r.informer.add_event_handler(quiet, resync_period=0)
        r.start().synced()
        wait_for(lambda: resyncing.count() == 2 and r.clock.waiters() == 1)
        r.clock.step(30.0)
        wait_for(lambda: resyncing.count() == 4)
        assert sorted(resyncing.snapshot()[2:]) == [
            ("update", "a", "101", "101"),
            ("update", "b", "102", "102"),
        ]
        assert quiet.count() == 2
    finally:
        r.close()


def test_failing_handler_is_logged_and_skipped(running: Running) -> None:
    received: list[str] = []

    def on_add(obj: Any) -> None:
        if obj["metadata"]["name"] == "a":
            raise RuntimeError("handler bug")
        received.append(obj["metadata"]["name"])

    reg = running.informer.add_event_handler(on_add=on_add)
    running.start().synced()
    wait_for(lambda: running.clock.waiters() >= 1, message="1s pause after the failure")
    running.clock.step(1.0)
    wait_for(lambda: received == ["b"])
    assert not reg.has_synced()  # the failed initial add never finished (client-go)


def test_filtering_handler_turns_crossing_updates_into_add_and_delete(running: Running) -> None:
    inner = RecordingHandler()
    running.informer.add_event_handler(
        FilteringResourceEventHandler(lambda o: o["metadata"]["labels"].get("app") == "web", inner)
    )
    running.start().synced()
    wait_for(lambda: inner.count() == 1)
    b = running.lw.get("b")
    b["metadata"]["labels"]["app"] = "web"
    running.lw.update(b)
    a = running.lw.get("a")
    a["metadata"]["labels"]["app"] = "db"
    running.lw.update(a)
    wait_for(lambda: inner.count() == 3)
    assert inner.snapshot()[1:] == [("add", "b", "103", False), ("delete", "a", "dict")]


def test_removed_handler_gets_nothing_more(running: Running) -> None:
    handler = RecordingHandler()
    reg = running.informer.add_event_handler(handler)
    running.start().synced()
    wait_for(lambda: handler.count() == 2)
    running.informer.remove_event_handler(reg)
    running.informer.remove_event_handler(reg)  # second removal is a no-op
    running.lw.create(make_pod("c"))
    wait_for(lambda: len(running.informer.indexer) == 3)
    assert handler.count() == 2


def test_stopped_informer_refuses_handlers(running: Running) -> None:
    running.start().synced()
    running.close()
    assert running.informer.is_stopped()
    with pytest.raises(InformerStoppedError):
        running.informer.add_event_handler(on_add=lambda o: None)
    with pytest.raises(InformerStoppedError):
        running.informer.set_transform(None)


def test_managed_fields_are_stripped_on_ingest(running: Running) -> None:
    pod = make_pod("m")
    pod["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    running.lw.create(pod)
    running.start().synced()
    stored = running.informer.indexer.get_by_key("default/m")
    assert stored is not None and "managedFields" not in stored["metadata"]


def test_wait_for_cache_sync_times_out_and_honours_stop(lw: FakeListerWatcher) -> None:
    informer = SharedIndexInformer(lw)
    assert not wait_for_cache_sync(informer, timeout=0.05)
    stop = threading.Event()
    stop.set()
    assert not wait_for_cache_sync(informer, stop=stop)
    assert wait_for_cache_sync(lambda: True, timeout=0)


def test_informer_stop_method(lw: FakeListerWatcher) -> None:
    informer = SharedIndexInformer(lw)
    thread = informer.start()
    assert wait_for_cache_sync(informer, timeout=5)
    informer.stop()
    thread.join(5)
    assert not thread.is_alive() and informer.is_stopped()


def test_notifications_handled_waits_for_the_handler_holding_a_change(running: Running) -> None:
    informer = running.informer
    release = threading.Event()
    entered = threading.Event()
    done: list[str] = []

    def on_add(obj: Any) -> None:
        if obj["metadata"]["name"] != "c":
            return
        entered.set()
        assert release.wait(10), "the test never released the handler"
        done.append(obj["metadata"]["name"])

    informer.add_event_handler(on_add=on_add)
    running.start().synced()
    wait_for(informer.notifications_handled, message="initial adds handled")
    try:
        running.lw.create(make_pod("c"))
        wait_for(lambda: informer.indexer.get_by_key("default/c") is not None)
        wait_for(entered.is_set, message="the handler holds the add")
        # in the cache, nothing buffered: only the handler in flight says it is not handled yet
        assert informer.pending_notifications() == 0
        assert not informer.notifications_handled() and done == []
    finally:
        release.set()
    wait_for(informer.notifications_handled, message="the add handled")
    assert done == ["c"]
