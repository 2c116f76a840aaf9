"""The rate-limiting work queue (mirror of client-go util/workqueue/rate_limiting_queue.go).

`RateLimitingQueue` is a `DelayingQueue` whose `add_rate_limited(item)` asks the rate limiter how
long the item must wait and calls `add_after` with it. The limiter is consulted first, so its
failure count grows even when the queue is shutting down (as in Go). `forget(item)` only resets
the limiter's memory of the item; it never touches the queue, the dirty set or a pending delayed
entry. Workers still call `done(item)` after either.

The limiter object may be shared by several queues; it then shares its per-item failure counts
and its token bucket across them, exactly as kube-ovn's shared rate limiters do.
"""

from __future__ import annotations

import logging

from controller.queues.clock import Clock
from controller.queues.default_rate_limiters import RateLimiter
from controller.queues.delaying_queue import DelayingQueue
from controller.queues.metrics import MetricsProvider
from controller.queues.queue import T

LOG = logging.getLogger(__name__)


class RateLimitingQueue(DelayingQueue[T]):
    """client-go's `TypedRateLimitingInterface[T]`."""

    def __init__(
        self,
        rate_limiter: RateLimiter,
        name: str | None = None,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        if not callable(getattr(rate_limiter, "when", None)):
            kind = type(rate_limiter).__name__
            raise TypeError(f"rate_limiter must be a RateLimiter, not {kind}")
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider)
        self._rate_limiter = rate_limiter

    def add_rate_limited(self, item: T) -> None:
        """Add `item` after the delay the rate limiter assigns it (counts as a retry)."""
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Tell the rate limiter the item succeeded: its backoff starts over."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times the rate limiter has seen `item` fail since it was last forgotten."""
        return self._rate_limiter.num_requeues(item)
