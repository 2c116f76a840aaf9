from __future__ import annotations

import threading
from typing import Any

import pytest

from controller.cache import DeletedFinalStateUnknown, Delta, DeltaType, FIFOClosedError, RealFIFO
from tests.cache.fakes import make_pod


def _drain(fifo: RealFIFO) -> list[tuple[DeltaType, bool]]:
    seen: list[tuple[DeltaType, bool]] = []
    while len(fifo):
        fifo.pop(lambda d, initial: seen.append((d.type, initial)))
    return seen


def test_events_keep_global_order_without_coalescing() -> None:
    fifo = RealFIFO()
    a, b = make_pod("a"), make_pod("b")
    fifo.add(a)
    fifo.update(b)
    fifo.update(a)
    fifo.delete(a)
    fifo.delete(a)  # no dedup of deletes
    popped: list[Delta] = []
    while len(fifo):
        popped.append(fifo.pop(lambda d, i: None))
    assert [(d.type, d.obj["metadata"]["name"]) for d in popped] == [
        (DeltaType.ADDED, "a"),
        (DeltaType.UPDATED, "b"),
        (DeltaType.UPDATED, "a"),
        (DeltaType.DELETED, "a"),
        (DeltaType.DELETED, "a"),
    ]


def test_replace_is_one_atomic_delta_and_sync_waits_for_processing() -> None:
    fifo = RealFIFO()
    fifo.replace([make_pod("a"), make_pod("b")], "10")
    fifo.add(make_pod("c"))
    assert not fifo.has_synced()
    synced_during_processing: list[bool] = []

    def process(d: Delta, initial: bool) -> None:
        synced_during_processing.append(fifo.has_synced())

    first = fifo.pop(process)
    assert first.type == DeltaType.REPLACED_ALL
    assert first.obj.resource_version == "10" and len(first.obj.objects) == 2
    assert synced_during_processing == [False]
    assert fifo.has_synced()
    assert _drain(fifo) == [(DeltaType.ADDED, False)]


def test_initial_list_flag_and_sticky_sync() -> None:
    fifo = RealFIFO()
    fifo.replace([make_pod("a")], "1")
    fifo.add(make_pod("b"))
    assert _drain(fifo) == [(DeltaType.REPLACED_ALL, True), (DeltaType.ADDED, False)]
    fifo.replace([], "2")
    assert fifo.has_synced()


def test_an_add_before_any_replace_counts_as_populated() -> None:
    # client-go: populated with nothing pending at the first Add, so synced at once.
    fifo = RealFIFO()
    fifo.add(make_pod("early"))
    assert fifo.has_synced()
    fifo.replace([], "1")
    assert _drain(fifo) == [(DeltaType.ADDED, False), (DeltaType.REPLACED_ALL, False)]


def test_transformer_skips_tombstones() -> None:
    calls: list[Any] = []

    def transformer(obj: Any) -> Any:
        calls.append(obj)
        return obj

    fifo = RealFIFO(transformer=transformer)
    fifo.add(make_pod("a"))
    fifo.delete(DeletedFinalStateUnknown("default/a", None))
    fifo.resync()
    assert len(calls) == 1


def test_close_wakes_blocked_pop_but_queued_items_drain_first() -> None:
    fifo = RealFIFO()
    fifo.add(make_pod("a"))
    fifo.close()
    assert fifo.pop(lambda d, i: None).type == DeltaType.ADDED
    with pytest.raises(FIFOClosedError):
        fifo.pop(lambda d, i: None)

    fifo2 = RealFIFO()
    errors: list[BaseException] = []

    def consumer() -> None:
        try:
            fifo2.pop(lambda d, i: None)
        except FIFOClosedError as exc:
            errors.append(exc)

    t = threading.Thread(target=consumer)
    t.start()
    fifo2.close()
    t.join(5)
    assert not t.is_alive() and len(errors) == 1


def test_process_error_still_counts_toward_sync() -> None:
    fifo = RealFIFO()
    fifo.replace([make_pod("a")], "1")

    def boom(d: Delta, i: bool) -> None:
        raise RuntimeError("handler bug")

    with pytest.raises(RuntimeError):
        fifo.pop(boom)
    assert fifo.has_synced()
