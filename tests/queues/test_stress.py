"""Several producers and consumers on one queue: an item is never processed by two workers at
once, and no add made before shut_down_with_drain is lost (client-go doc.go: "Stingy")."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest

from controller.queues import (
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    Queue,
    RateLimitingQueue,
)
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.testing.clock import FakeClock

Make = Callable[..., Any]

PRODUCERS = 4
CONSUMERS = 4
ADDS_PER_PRODUCER = 3000
KEYS = 64


@pytest.mark.parametrize("kind", ["queue", "rate_limiting"])
def test_no_concurrent_processing_and_no_lost_adds(
    kind: str, make: Make, clock: FakeClock, provider: PrometheusMetricsProvider
) -> None:
    q: Queue[str]
    if kind == "queue":
        q = make(Queue, name="stress", clock=clock, metrics_provider=provider)
    else:
        limiter = ItemExponentialFailureRateLimiter(0.001, 0.01)
        q = make(RateLimitingQueue, limiter, name="stress", clock=clock, metrics_provider=provider)

    ticket = itertools.count()  # global order of events (next() is atomic under the GIL)
    lock = threading.Lock()
    active: set[str] = set()
    violations: list[str] = []
    last_add: dict[str, int] = {}
    last_start: dict[str, int] = {}
    processed = [0] * CONSUMERS

    def produce(p: int) -> None:
        for i in range(ADDS_PER_PRODUCER):
            key = f"key-{(i * 7 + p) % KEYS}"
            with lock:
                last_add[key] = next(ticket)
            q.add(key)

    def consume(c: int) -> None:
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            assert key is not None
            with lock:
                if key in active:
                    violations.append(key)
                active.add(key)
                last_start[key] = next(ticket)
            try:
                processed[c] += 1
                if processed[c] % 5 == 0:
                    q.add(key)  # re-add while processing: must come back via done()
                if isinstance(q, RateLimitingQueue) and processed[c] % 11 == 0:
                    q.forget(key)
            finally:
                with lock:
                    active.discard(key)
                q.done(key)

    consumers = [
        threading.Thread(target=consume, args=(c,), name=f"consumer-{c}") for c in range(CONSUMERS)
    ]
    producers = [
        threading.Thread(target=produce, args=(p,), name=f"producer-{p}") for p in range(PRODUCERS)
    ]
    for thread in consumers + producers:
        thread.start()
    for thread in producers:
        thread.join(60)
    q.shut_down_with_drain()
    for thread in consumers:
        thread.join(60)
    assert not any(t.is_alive() for t in consumers + producers)

    assert violations == []
    assert set(last_add) == {f"key-{k}" for k in range(KEYS)}
    # Every key's last processing started after its last add: nothing was lost.
    lost = [key for key, added in last_add.items() if last_start.get(key, -1) < added]
    assert lost == []
    assert sum(processed) >= KEYS
    assert len(q) == 0


def test_concurrent_add_after_on_the_real_clock_delivers_every_key(make: Make) -> None:
    q: DelayingQueue[str] = make(DelayingQueue, name=None)
    keys = [f"key-{i}" for i in range(2000)]
    counts: dict[str, int] = {}
    lock = threading.Lock()
    all_seen = threading.Event()

    def produce(offset: int) -> None:
        # Each key gets two delays from two threads: the earlier one must win, none is lost.
        for i, key in enumerate(keys):
            q.add_after(key, ((i * 7 + offset) % 5) / 1000)

    def consume() -> None:
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            assert key is not None
            with lock:
                counts[key] = counts.get(key, 0) + 1
                if len(counts) == len(keys):
                    all_seen.set()
            q.done(key)

    threads = [threading.Thread(target=produce, args=(k,)) for k in (0, 3)]
    threads += [threading.Thread(target=consume) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert all_seen.wait(30)
    q.shut_down()
    for thread in threads:
        thread.join(30)
    assert set(counts) == set(keys)
    # A key fires once, or twice if the second add_after came after the first entry fired.
    assert all(1 <= n <= 2 for n in counts.values())
