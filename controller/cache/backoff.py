"""The reflector's retry timing (apimachinery `wait.Backoff`, client-go `retryWithDeadline`).

`Backoff.step` yields jittered, doubling delays up to a cap; `DelayWithReset` restarts that
sequence every `reset_interval` (apimachinery's backoff manager); `RetryWithDeadline` says
whether a watch InternalError may be retried at once. Time comes from the injected `Clock`,
randomness from the injected `random.Random`.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass

from controller.cache.errors import is_internal_error
from controller.queues.clock import Clock

BACKOFF_RESET_INTERVAL = 120.0
INTERNAL_ERROR_RESET_PERIOD = 60.0


@dataclass
class Backoff:
    """apimachinery `wait.Backoff`: `step()` returns the next jittered delay."""

    duration: float = 0.8
    factor: float = 2.0
    jitter: float = 1.0
    steps: int = math.ceil(30.0 / 0.8)
    cap: float = 30.0

    def step(self, rng: random.Random) -> float:
        if self.steps < 1:
            return self._jittered(self.duration, rng)
        self.steps -= 1
        current = self.duration
        nxt = current * self.factor
        if self.cap > 0 and nxt > self.cap:
            nxt = self.cap
            self.steps = 0
        self.duration = nxt
        return self._jittered(current, rng)

    def _jittered(self, d: float, rng: random.Random) -> float:
        return d + rng.random() * self.jitter * d if self.jitter > 0 else d


class DelayWithReset:
    """`Backoff.DelayWithReset`: the backoff restarts from scratch every `reset_interval`."""

    def __init__(
        self,
        initial: Backoff,
        clock: Clock,
        rng: random.Random,
        reset_interval: float = BACKOFF_RESET_INTERVAL,
    ) -> None:
        self._initial = initial
        self._clock = clock
        self._rng = rng
        self._reset_interval = reset_interval
        self._lock = threading.Lock()
        self._backoff = Backoff(**vars(initial))
        self._last_start = clock.now()

    def __call__(self) -> float:
        with self._lock:
            now = self._clock.now()
            # NOTE: the reset clock only moves on reset, so the sequence restarts every
            # reset_interval of time, failures or not (apimachinery backoffManager).
            if now - self._last_start > self._reset_interval:
                self._backoff = Backoff(**vars(self._initial))
                self._last_start = now
            return self._backoff.step(self._rng)


class RetryWithDeadline:
    """client-go `retryWithDeadline` for watch InternalErrors."""

    def __init__(self, max_duration: float, reset_period: float, clock: Clock) -> None:
        self._max = max_duration
        self._reset = reset_period
        self._clock = clock
        self._first: float | None = None
        self._last: float | None = None

    def after(self, err: BaseException) -> None:
        if not is_internal_error(err):
            return
        now = self._clock.now()
        if self._last is not None and now - self._last >= self._reset:
            self._first = None
        if self._first is None:
            self._first = now
        self._last = now

    def should_retry(self) -> bool:
        if self._max <= 0 or self._first is None:
            return False
        if self._clock.now() - self._first <= self._max:
            return True
        self._first = self._last = None
        return False
