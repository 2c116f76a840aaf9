"""The injectable time source of every background loop (after k8s.io/utils/clock).

Layering: `controller.queues` is the lowest package that may run threads (`controller.core` may
not), so the one `Clock` protocol and `RealClock` live here and the informers
(`controller.cache`), the leader elector and the GC loop (`controller.runtime`,
`controller.controllers`) import them from here. The one virtual clock for tests is
`controller.testing.clock.FakeClock`.

Contract:

* `Clock.now()` is a monotonic reading in float seconds; only differences are meaningful.
* `Clock.wait(cond, deadline)` is the waiting primitive of the loops that sleep on a condition
  (the delaying queue's waiting loop, the queue's unfinished-work ticker). The caller holds
  `cond`'s lock; the call releases it while blocked and returns, holding it again, once
  `Clock.notify(cond)` was called or the clock reached `deadline` (None: no deadline). Spurious
  returns are allowed, so callers re-check their state in a loop, exactly as with
  `threading.Condition.wait`.
* `Clock.notify(cond)` wakes every thread blocked in `wait(cond, ...)`; the caller holds `cond`'s
  lock. Loops that wait on a clock must be woken through the clock, never with a bare
  `cond.notify()`, so that a fake clock knows they are running.
* `Clock.sleep(seconds, stop)` is the interruptible sleep of the loops that block elsewhere
  between sleeps (a reflector in its HTTP watch, the leader elector in its Lease calls): it
  returns True as soon as `stop` is set, or False once `seconds` have passed.

`RealClock` maps these onto `time.monotonic`, `Condition.wait(timeout)` and `Event.wait`;
`REAL_CLOCK` is the shared instance (it keeps no state).

Wall time (timestamps written to the API, ages compared with API timestamps) has one spelling
too: a `WallClock` is a function returning an aware UTC `datetime`, `utcnow` the real one.
Components that need it take it as `wall_clock: WallClock = utcnow`; monotonic time is always
a `clock: Clock` object.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

LOG = logging.getLogger(__name__)


class Clock(Protocol):
    """Monotonic time plus the two waiting primitives of the loops (see module docstring)."""

    def now(self) -> float: ...

    def wait(self, cond: threading.Condition, deadline: float | None) -> None: ...

    def notify(self, cond: threading.Condition) -> None: ...

    def sleep(self, seconds: float, stop: threading.Event) -> bool: ...


class RealClock:
    """Wall-independent real time: `time.monotonic()`, timed condition and event waits."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        if deadline is None:
            cond.wait()
            return
        timeout = deadline - time.monotonic()
        if timeout > 0:
            cond.wait(timeout)

    def notify(self, cond: threading.Condition) -> None:
        cond.notify_all()

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        if seconds <= 0:
            return stop.is_set()
        return stop.wait(seconds)


REAL_CLOCK = RealClock()

WallClock = Callable[[], datetime]


def utcnow() -> datetime:
    """The real wall clock: now, as an aware UTC datetime."""
    return datetime.now(UTC)


def start_clock_loop(
    name: str, body: Callable[[], None], cond: threading.Condition
) -> threading.Thread:
    """Start a daemon thread running `body()` while holding `cond`, and return once it waits.

    The handshake (the thread takes `cond` before signalling, and releases it only inside its
    first clock wait) makes the loop visible to a FakeClock before the constructor returns, so a
    test's first `step()` can never race the thread's start-up.
    """
    started = threading.Event()

    def run() -> None:
        with cond:
            started.set()
            try:
                body()
            except Exception:
                LOG.exception("work queue loop %s crashed", name)
                raise

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    started.wait()
    with cond:
        pass
    return thread


def join_clock_loop(thread: threading.Thread | None) -> None:
    """Wait for a loop started by `start_clock_loop` to exit (no-op from the loop itself)."""
    if thread is not None and thread is not threading.current_thread():
        thread.join()
