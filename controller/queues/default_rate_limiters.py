"""Rate limiters for the rate-limiting queue (mirror of client-go default_rate_limiters.go).

A `RateLimiter` answers `when(item)`: how many seconds the item must wait before it is retried.
`when` has side effects (it records a failure, or consumes a token); `forget(item)` clears what
the limiter remembers about the item; `num_requeues(item)` reports the failures it remembers.
All limiters are thread-safe (one lock each) and may be shared between queues.

* `ItemExponentialFailureRateLimiter(base, max)`: `base * 2**failures`, failures counted before
  the increment (first delay = base), capped at `max`. Huge failure counts return `max` (Go's
  int64-nanosecond overflow rule) instead of raising OverflowError.
* `ItemFastSlowRateLimiter(fast, slow, n)`: `fast` for the first n failures, then `slow`.
* `BucketRateLimiter(qps, burst)`: one token bucket for all items, golang.org/x/time/rate
  reservation semantics: starts full, every `when` reserves a token and returns the time until
  it is available (0 while the burst lasts, then 1/qps spacing). It reads the injected clock.
* `MaxOfRateLimiter(*limiters)`: calls every limiter (all side effects happen) and returns the
  largest delay; `num_requeues` is the largest count; `forget` goes to all.
* `WithMaxWaitRateLimiter(limiter, max)`: caps another limiter's delay.
* `default_controller_rate_limiter()`: max of exponential 5 ms..1000 s and a 10 qps / burst 100
  bucket, the limiter behind every kube-ovn controller queue.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Hashable
from typing import Protocol

from controller.queues.clock import Clock, RealClock

LOG = logging.getLogger(__name__)

# Go computes the backoff in float64 nanoseconds and returns the cap once it exceeds MaxInt64;
# from 2**63 on that holds for any base of at least 1 ns, and Python's float power would raise
# OverflowError past 2**1023, so the exponent is checked first.
_MAX_INT64 = float(2**63 - 1)
_OVERFLOW_EXP = 63


class RateLimiter(Protocol):
    """client-go's `TypedRateLimiter`: per-item retry delays in seconds."""

    def when(self, item: Hashable) -> float: ...

    def forget(self, item: Hashable) -> None: ...

    def num_requeues(self, item: Hashable) -> int: ...


def _seconds(what: str, value: float) -> float:
    """Validate a duration argument (seconds): a finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


class _PerItemFailures:
    """The failure count per item that the per-item limiters base their delay on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def _record_failure(self, item: Hashable) -> int:
        """Count one more failure of `item`; returns how many it had before this one."""
        with self._lock:
            before = self._failures.get(item, 0)
            self._failures[item] = before + 1
        return before

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)


class ItemExponentialFailureRateLimiter(_PerItemFailures):
    """Per-item exponential backoff: base, 2*base, 4*base, ... capped at max_delay."""

    def __init__(self, base_delay: float, max_delay: float) -> None:
        self._base = _seconds("base_delay", base_delay)
        self._max = _seconds("max_delay", max_delay)
        self._base_ns = self._base * 1e9
        super().__init__()

    def when(self, item: Hashable) -> float:
        exp = self._record_failure(item)
        if self._base_ns == 0:
            return 0.0
        if exp >= _OVERFLOW_EXP or self._base_ns * 2.0**exp > _MAX_INT64:
            return self._max
        return min(self._base * 2.0**exp, self._max)


class ItemFastSlowRateLimiter(_PerItemFailures):
    """Per-item: `fast_delay` for the first `max_fast_attempts` failures, `slow_delay` after."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self._fast = _seconds("fast_delay", fast_delay)
        self._slow = _seconds("slow_delay", slow_delay)
        if isinstance(max_fast_attempts, bool) or not isinstance(max_fast_attempts, int):
            raise TypeError("max_fast_attempts must be an int")
        if max_fast_attempts < 0:
            raise ValueError(f"max_fast_attempts must be >= 0, got {max_fast_attempts}")
        self._max_fast_attempts = max_fast_attempts
        super().__init__()

    def when(self, item: Hashable) -> float:
        failures = self._record_failure(item) + 1
        return self._fast if failures <= self._max_fast_attempts else self._slow


class BucketRateLimiter:
    """One token bucket for all items (golang.org/x/time/rate `Limiter.Reserve().Delay()`).

    The bucket holds at most `burst` tokens, starts full and refills at `qps` tokens per second
    of the injected clock. Each `when` takes one token, going into debt if none is left, and
    returns how long until that debt is paid: a reservation, so consecutive calls space out by
    1/qps even though nobody waits in between.
    """

    def __init__(self, qps: float, burst: int, clock: Clock | None = None) -> None:
        if isinstance(qps, bool) or not isinstance(qps, int | float):
            raise TypeError(f"qps must be a number, not {type(qps).__name__}")
        if not math.isfinite(qps) or qps <= 0:
            raise ValueError(f"qps must be a finite number > 0, got {qps!r}")
        if isinstance(burst, bool) or not isinstance(burst, int):
            raise TypeError(f"burst must be an int, not {type(burst).__name__}")
        if burst < 1:
            # x/time/rate would answer "never" (InfDuration) to every reservation.
            raise ValueError(f"burst must be >= 1, got {burst}")
        self._qps = float(qps)
        self._burst = burst
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: Hashable) -> float:
        with self._lock:
            now = self._clock.now()
            last = self._last
            if last is None or now < last:
                # First use (the Go limiter's zero "last" refills it to the brim), or time went
                # backwards (Go then treats the elapsed time as zero).
                last = now
            tokens = min(float(self._burst), self._tokens + (now - last) * self._qps) - 1.0
            self._tokens = tokens
            self._last = now
        if tokens >= 0:
            return 0.0
        return -tokens / self._qps

    def num_requeues(self, item: Hashable) -> int:
        return 0

    def forget(self, item: Hashable) -> None:
        pass


class MaxOfRateLimiter:
    """The largest delay of several limiters; every limiter sees every call."""

    def __init__(self, *limiters: RateLimiter) -> None:
        for limiter in limiters:
            if not callable(getattr(limiter, "when", None)):
                raise TypeError(f"not a RateLimiter: {type(limiter).__name__}")
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        longest = 0.0
        for limiter in self._limiters:
            # NOTE: no short-circuit: the bucket must consume its token even when the
            # exponential backoff dominates (client-go MaxOfRateLimiter).
            longest = max(longest, limiter.when(item))
        return longest

    def num_requeues(self, item: Hashable) -> int:
        return max((limiter.num_requeues(item) for limiter in self._limiters), default=0)

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)


class WithMaxWaitRateLimiter:
    """Another limiter's delay, capped at `max_delay`."""

    def __init__(self, limiter: RateLimiter, max_delay: float) -> None:
        self._limiter = limiter
        self._max = _seconds("max_delay", max_delay)

    def when(self, item: Hashable) -> float:
        return min(self._limiter.when(item), self._max)

    def num_requeues(self, item: Hashable) -> int:
        return self._limiter.num_requeues(item)

    def forget(self, item: Hashable) -> None:
        self._limiter.forget(item)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go `DefaultControllerRateLimiter`: exp(5 ms .. 1000 s) max bucket(10 qps, 100)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10, 100, clock=clock),
    )


def default_item_based_rate_limiter() -> ItemExponentialFailureRateLimiter:
    """client-go `DefaultItemBasedRateLimiter`: exponential from 1 ms to 1000 s."""
    return ItemExponentialFailureRateLimiter(0.001, 1000.0)
