"""DelayingQueue: client-go util/workqueue/delaying_queue.go semantics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.queues import DelayingQueue, RealClock
from controller.testing.clock import FakeClock
from tests.queues.helpers import run_in_thread

Make = Callable[..., Any]


def drain(q: DelayingQueue[Any]) -> list[Any]:
    """Get and finish everything queued right now, in order."""
    items = []
    while len(q):
        item, shutdown = q.get()
        assert not shutdown
        q.done(item)
        items.append(item)
    return items


def test_item_becomes_ready_after_its_delay(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 0.05)
    assert len(q) == 0 and q.pending() == 1
    clock.step(0.04)
    assert len(q) == 0
    clock.step(0.01)  # ready time reached exactly: not after now, so it fires
    assert len(q) == 1 and q.pending() == 0
    assert drain(q) == ["a"]


def test_non_positive_delay_adds_at_once(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 0)
    q.add_after("b", -3)
    assert drain(q) == ["a", "b"]
    assert q.pending() == 0


def test_waiting_lists_the_pending_items_earliest_first(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("late", 0.10)
    q.add_after("early", 0.02)
    q.add_after("late", 0.30)  # later: the entry keeps its ready time
    q.add("now")
    assert q.waiting() == ["early", "late"]  # the queued item is not waiting
    clock.step(0.02)
    assert q.waiting() == ["late"]
    assert sorted(drain(q)) == ["early", "now"]
    clock.step(0.08)
    assert q.waiting() == []
    assert drain(q) == ["late"]


def test_duplicate_keeps_the_earliest_ready_time(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 0.05)
    q.add_after("a", 0.10)  # later: ignored
    q.add_after("b", 0.10)
    q.add_after("b", 0.02)  # earlier: advances the entry
    assert q.pending() == 2
    clock.step(0.02)
    assert drain(q) == ["b"]
    clock.step(0.03)
    assert drain(q) == ["a"]
    clock.step(0.10)
    assert drain(q) == []  # superseded entries never fire
    assert q.pending() == 0


def test_items_fire_in_ready_order(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 3)
    q.add_after("b", 1)
    q.add_after("c", 2)
    q.add_after("d", 2)  # equal ready times keep insertion order
    clock.step(2)
    assert drain(q) == ["b", "c", "d"]
    clock.step(1)
    assert drain(q) == ["a"]


def test_add_does_not_cancel_a_pending_delayed_add(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 1)
    q.add("a")
    assert drain(q) == ["a"]
    assert q.pending() == 1
    clock.step(1)
    assert drain(q) == ["a"]


def test_fired_entry_is_deduplicated_by_the_dirty_set(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add("a")
    q.add_after("a", 1)
    clock.step(1)
    assert len(q) == 1
    assert drain(q) == ["a"]


def test_new_entry_after_firing(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 1)
    clock.step(1)
    assert drain(q) == ["a"]
    q.add_after("a", 5)  # a fresh entry, not deduplicated against the fired one
    clock.step(4)
    assert drain(q) == []
    clock.step(1)
    assert drain(q) == ["a"]


def test_one_big_step_releases_everything_due(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    for i in range(200):
        q.add_after(i, 0.01 * (i + 1))
    clock.step(1.0)
    assert len(q) == 100
    clock.step(60)  # far past the 10 s heartbeat as well
    assert drain(q) == list(range(200))


def test_heartbeat_keeps_a_timer_pending(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    assert clock.has_waiters()  # client-go's 10 s heartbeat ticker
    clock.step(10)
    clock.step(10)
    assert clock.has_waiters()
    q.add_after("a", 25)
    clock.step(10)
    clock.step(10)
    assert drain(q) == []
    clock.step(5)
    assert drain(q) == ["a"]


def test_shutdown_drops_pending_items_and_stops_the_loop(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 1)
    q.add("b")
    q.shut_down()
    assert q.pending() == 0
    assert not clock.has_waiters()  # waiting loop gone
    clock.step(5)
    q.add_after("c", 0)
    q.add_after("d", 1)
    assert q.pending() == 0
    assert q.get() == ("b", False)
    assert q.get() == (None, True)


def test_shutdown_with_drain_stops_the_loop_too(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add("a")
    assert q.get() == ("a", False)
    q.add_after("b", 1)
    drainer, _ = run_in_thread(q.shut_down_with_drain, "drainer")
    q.done("a")
    drainer.join(5)
    assert not drainer.is_alive()
    clock.step(1)
    assert q.get() == (None, True)


def test_real_clock_delivers_after_the_delay(make: Make) -> None:
    q = make(DelayingQueue, clock=RealClock())
    start = RealClock().now()
    q.add_after("a", 0.02)
    worker, got = run_in_thread(q.get, "worker")
    worker.join(5)
    assert got == [("a", False)]
    assert RealClock().now() - start >= 0.02


def test_bad_delay_is_a_clear_error(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    with pytest.raises(ValueError, match="not a number"):
        q.add_after("a", float("nan"))
    with pytest.raises(TypeError):
        q.add_after("a", "5s")
    assert q.pending() == 0 and len(q) == 0


def test_idle_counts_an_entry_waiting_for_its_ready_time(make: Make, clock: FakeClock) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 5.0)
    assert len(q) == 0 and not q.idle()
    clock.step(5.0)
    assert drain(q) == ["a"]
    assert q.idle()


def test_idle_now_counts_due_and_in_flight_work_not_a_later_entry(
    make: Make, clock: FakeClock
) -> None:
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 5.0)
    assert q.idle_now() and not q.idle()  # due later: nothing owed now
    clock.step(5.0)
    assert not q.idle_now()  # due: waiting or already moved into the queue, never neither
    item, _ = q.get()
    assert item == "a" and len(q) == 0 and not q.idle_now()  # held by a worker
    q.done("a")
    assert q.idle_now() and q.idle()
