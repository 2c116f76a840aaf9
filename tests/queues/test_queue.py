"""Queue: client-go util/workqueue/queue.go semantics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.queues import Queue
from controller.testing.wait import wait_for
from tests.queues.helpers import run_in_thread

Make = Callable[..., Any]


def test_fifo_order_and_dedup(make: Make) -> None:
    q = make(Queue)
    for item in ["a", "b", "a", "c", "b"]:
        q.add(item)
    assert len(q) == 3
    assert [q.get() for _ in range(3)] == [("a", False), ("b", False), ("c", False)]
    assert len(q) == 0


def test_add_while_processing_is_requeued_by_done_not_handed_out(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    item, shutdown = q.get()
    assert (item, shutdown) == ("a", False)
    q.add("a")
    q.add("a")  # collapses with the first re-add
    assert len(q) == 0  # dirty while processing: not queued, not counted
    # A second worker must block rather than get "a": prove it with a shutdown that ends its get.
    q.add("b")
    assert q.get() == ("b", False)
    q.done("a")
    assert len(q) == 1
    assert q.get() == ("a", False)
    q.done("a")
    q.done("b")
    assert len(q) == 0


def test_second_worker_does_not_get_an_item_being_processed(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    assert q.get() == ("a", False)
    q.add("a")
    waiter, got = run_in_thread(q.get, "second-worker")
    waiter.join(0.05)  # give a broken queue the chance to hand "a" out twice
    assert waiter.is_alive() and got == []
    q.done("a")
    waiter.join(5)
    assert got == [("a", False)]


def test_done_of_unknown_item_is_harmless(make: Make) -> None:
    q = make(Queue)
    q.done("never-added")
    q.add("a")
    assert q.get() == ("a", False)


def test_add_after_shutdown_is_dropped_even_for_processing_items(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    assert q.get() == ("a", False)
    q.shut_down()
    assert q.shutting_down()
    q.add("a")
    q.add("b")
    q.done("a")
    assert len(q) == 0
    assert q.get() == (None, True)


def test_get_drains_queued_items_after_shutdown(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    q.add("b")
    q.shut_down()
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    assert q.get() == (None, True)
    assert q.get() == (None, True)


def test_done_requeues_dirty_item_after_shutdown(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    assert q.get() == ("a", False)
    q.add("a")
    q.shut_down()
    q.done("a")
    assert len(q) == 1
    assert q.get() == ("a", False)
    q.done("a")
    assert q.get() == (None, True)


def test_shutdown_wakes_blocked_getters(make: Make) -> None:
    q = make(Queue)
    workers = [run_in_thread(q.get, f"worker-{i}") for i in range(3)]
    q.shut_down()
    for thread, result in workers:
        thread.join(5)
        assert result == [(None, True)]


def test_shutdown_is_idempotent(make: Make) -> None:
    q = make(Queue)
    q.shut_down()
    q.shut_down()
    q.shut_down_with_drain()
    assert q.get() == (None, True)


def test_shutdown_with_drain_waits_for_processing_items_only(make: Make) -> None:
    q = make(Queue)
    for item in "abc":
        q.add(item)
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    drainer, finished = run_in_thread(q.shut_down_with_drain, "drainer")
    assert wait_for(q.shutting_down)
    drainer.join(0.05)
    assert drainer.is_alive()
    q.done("a")
    drainer.join(0.05)
    assert drainer.is_alive()  # "b" still processing
    q.done("b")
    drainer.join(5)
    assert not drainer.is_alive() and finished == [None]
    # "c" was queued, never processing: not waited for, still handed out after the drain.
    assert q.get() == ("c", False)
    q.done("c")
    assert q.get() == (None, True)


def test_shutdown_releases_a_blocked_drain(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    assert q.get() == ("a", False)
    drainer, _ = run_in_thread(q.shut_down_with_drain, "drainer")
    assert wait_for(q.shutting_down)
    q.shut_down()
    drainer.join(5)
    assert not drainer.is_alive()
    q.done("a")


def test_drain_waits_for_a_dirty_item_to_be_reprocessed(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    assert q.get() == ("a", False)
    q.add("a")
    drainer, _ = run_in_thread(q.shut_down_with_drain, "drainer")
    assert wait_for(q.shutting_down)
    q.done("a")  # re-queued although shutting down
    assert q.get() == ("a", False)
    drainer.join(0.05)
    assert drainer.is_alive()  # "a" is processing again
    q.done("a")
    drainer.join(5)
    assert not drainer.is_alive()
    assert q.get() == (None, True)


def test_len_counts_only_queued_items(make: Make) -> None:
    q = make(Queue)
    q.add("a")
    q.add("b")
    assert len(q) == 2
    q.get()
    assert len(q) == 1


def test_items_of_any_hashable_type(make: Make) -> None:
    q: Queue[tuple[str, int]] = make(Queue)
    q.add(("ns/pod", 1))
    q.add(("ns/pod", 1))
    assert len(q) == 1
    with pytest.raises(TypeError):
        q.add(["unhashable"])  # type: ignore[arg-type]  # on purpose


def test_bad_name_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="name"):
        Queue(name=42)  # type: ignore[arg-type]  # a wrong type on purpose


def test_none_item_is_rejected(make: Make) -> None:
    q = make(Queue)
    with pytest.raises(ValueError, match="None"):
        q.add(None)
    assert len(q) == 0


def test_idle_counts_queued_and_processing_items(make: Make) -> None:
    q = make(Queue)
    assert q.idle()
    q.add("a")
    assert not q.idle()
    item, _ = q.get()
    assert len(q) == 0 and not q.idle()  # taken by a worker: not in len(), still busy
    q.done(item)
    assert q.idle()
