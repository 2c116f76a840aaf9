"""RateLimitingQueue: add_rate_limited / forget / num_requeues (client-go
util/workqueue/rate_limiting_queue.go)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.queues import (
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)
from controller.testing.clock import FakeClock

Make = Callable[..., Any]


def test_add_rate_limited_waits_for_the_limiter_delay(make: Make, clock: FakeClock) -> None:
    q = make(RateLimitingQueue, ItemExponentialFailureRateLimiter(0.001, 1.0), clock=clock)
    q.add_rate_limited("one")
    q.add_rate_limited("one")  # 2 ms: the earlier 1 ms entry wins
    assert q.num_requeues("one") == 2
    assert len(q) == 0 and q.pending() == 1
    clock.step(0.001)
    assert len(q) == 1
    assert q.get() == ("one", False)
    q.done("one")
    q.add_rate_limited("one")  # third failure: 4 ms
    clock.step(0.003)
    assert len(q) == 0
    clock.step(0.001)
    assert len(q) == 1


def test_forget_resets_the_limiter_only(make: Make, clock: FakeClock) -> None:
    q = make(RateLimitingQueue, ItemExponentialFailureRateLimiter(0.001, 1.0), clock=clock)
    q.add("a")
    q.add_rate_limited("b")
    q.forget("a")
    q.forget("b")
    assert q.num_requeues("b") == 0
    assert len(q) == 1  # "a" still queued
    assert q.pending() == 1  # "b" still scheduled
    clock.step(0.001)
    assert len(q) == 2


def test_add_rate_limited_after_shutdown_still_counts_a_failure(
    make: Make, clock: FakeClock
) -> None:
    q = make(RateLimitingQueue, ItemExponentialFailureRateLimiter(0.001, 1.0), clock=clock)
    q.shut_down()
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1  # When() runs before the shutdown check, as in Go
    assert q.get() == (None, True)


def test_worker_idiom_with_the_default_limiter(make: Make, clock: FakeClock) -> None:
    q = make(RateLimitingQueue, default_controller_rate_limiter(clock=clock), clock=clock)
    q.add("ns/pod")
    attempts = 0
    for _ in range(4):  # fails three times, then succeeds
        clock.step(1)
        item, shutdown = q.get()
        assert (item, shutdown) == ("ns/pod", False)
        attempts += 1
        try:
            if attempts < 4:
                q.add_rate_limited(item)
            else:
                q.forget(item)
        finally:
            q.done(item)
    assert attempts == 4
    assert q.num_requeues("ns/pod") == 0
    assert len(q) == 0 and q.pending() == 0


def test_shared_limiter_shares_failure_counts(make: Make, clock: FakeClock) -> None:
    limiter = ItemExponentialFailureRateLimiter(0.001, 1.0)
    first = make(RateLimitingQueue, limiter, name=None, clock=clock)
    second = make(RateLimitingQueue, limiter, clock=clock)
    first.add_rate_limited("a")
    second.add_rate_limited("a")
    assert first.num_requeues("a") == second.num_requeues("a") == 2


def test_rejects_a_non_limiter() -> None:
    with pytest.raises(TypeError, match="RateLimiter"):
        RateLimitingQueue(object())  # type: ignore[arg-type]  # a wrong type on purpose
