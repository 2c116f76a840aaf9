"""The time source the informer stack and the leader elector wait on.

`Clock` is the minimal surface they need: a monotonic `now()` and an interruptible
`wait(stop, seconds)`, which returns early (and True) when `stop` is set. `RealClock` uses
`time.monotonic` and `Event.wait`. Tests inject a fake whose `wait` blocks until the test steps
virtual time past the deadline (see tests/cache/fakes.py), so backoff, jitter, resync and lease
timing are exercised without real sleeps.

NOTE: the workqueue branch defines its own clock in controller/queues/clock.py; the two should be
unified once both have landed (this protocol is deliberately a subset of k8s.io/utils/clock).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time plus an interruptible sleep."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences are meaningful)."""
        ...

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Sleep up to `seconds`; return True as soon as `stop` is set, else False."""
        ...


class RealClock:
    """`time.monotonic` and `threading.Event.wait`."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        if seconds <= 0:
            return stop.is_set()
        return stop.wait(seconds)


REAL_CLOCK = RealClock()
