"""Injectable time for the work queues (mirror of k8s.io/utils/clock and clock/testing).

Contract:

* `Clock.now()` is a monotonic reading in float seconds; only differences are meaningful.
* `Clock.wait(cond, deadline)` is the one waiting primitive of the background loops (the delaying
  queue's waiting loop, the queue's unfinished-work ticker). The caller holds `cond`'s lock; the
  call releases it while blocked and returns, holding it again, once `Clock.notify(cond)` was
  called or the clock reached `deadline` (None: no deadline). Spurious returns are allowed, so
  callers re-check their state in a loop, exactly as with `threading.Condition.wait`.
* `Clock.notify(cond)` wakes every thread blocked in `wait(cond, ...)`; the caller holds `cond`'s
  lock. Loops that wait on a clock must be woken through the clock, never with a bare
  `cond.notify()`, so that `FakeClock` knows they are running.

`RealClock` maps these onto `time.monotonic` and `Condition.wait(timeout)`.

`FakeClock` is virtual time for tests. Time moves only through `step(seconds)`, which, like
client-go's FakeClock, wakes every waiter whose deadline is not after the new time; unlike Go's,
it then *settles*: it returns only once every loop thread it (or `notify`) woke has gone back to
waiting on the clock or has exited. So after `step()` the due items are in the queue and the
gauges are updated: tests never sleep and never poll. `has_waiters()` is true while any thread
waits with a deadline. A thread woken by the clock must therefore wait on the clock again or exit
(the queue loops do); otherwise `step()` raises `ClockSettleTimeout` after `settle_timeout`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

LOG = logging.getLogger(__name__)

# How often a settling step() re-checks whether a woken thread has exited; only used when a loop
# exits instead of waiting again (queue shutdown), never in the steady state.
_EXIT_POLL = 0.005


class Clock(Protocol):
    """Monotonic time plus the waiting primitive the queue loops use (see module docstring)."""

    def now(self) -> float: ...

    def wait(self, cond: threading.Condition, deadline: float | None) -> None: ...

    def notify(self, cond: threading.Condition) -> None: ...


class RealClock:
    """Wall-independent real time: `time.monotonic()` and timed condition waits."""

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


class ClockSettleTimeout(RuntimeError):
    """A thread woken by FakeClock neither waited on the clock again nor exited in time."""


class _Waiter:
    __slots__ = ("cond", "deadline", "thread")

    def __init__(
        self, cond: threading.Condition, deadline: float | None, thread: threading.Thread
    ) -> None:
        self.cond = cond
        self.deadline = deadline
        self.thread = thread


class FakeClock:
    """Virtual time that moves only on `step()`; see the module docstring for the guarantees."""

    def __init__(self, start: float = 0.0, settle_timeout: float = 10.0) -> None:
        self._now = float(start)
        self._settle_timeout = settle_timeout
        # Guards _now, _waiters and _busy; also signalled whenever a thread goes back to waiting.
        self._lock = threading.Condition()
        self._waiters: dict[int, _Waiter] = {}  # keyed by id(waiter record)
        # Threads the clock woke (step/notify) or that returned from wait() and have not yet
        # blocked again: the set step() settles on.
        self._busy: set[threading.Thread] = set()

    def now(self) -> float:
        with self._lock:
            return self._now

    def has_waiters(self) -> bool:
        """True while any thread waits with a deadline (Go: a timer or ticker is pending)."""
        with self._lock:
            return any(w.deadline is not None for w in self._waiters.values())

    def waiter_count(self) -> int:
        """Threads currently blocked in `wait()` (with or without a deadline)."""
        with self._lock:
            return len(self._waiters)

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        me = threading.current_thread()
        with self._lock:
            if deadline is not None and deadline <= self._now:
                # Already due: return at once, the thread stays "busy" until it blocks again.
                self._busy.add(me)
                return
            waiter = _Waiter(cond, deadline, me)
            key = id(waiter)
            self._waiters[key] = waiter
            self._busy.discard(me)
            self._lock.notify_all()
        try:
            cond.wait()
        finally:
            with self._lock:
                # Woken by anything else than the clock (or spuriously): still running now.
                self._waiters.pop(key, None)
                self._busy.add(me)

    def notify(self, cond: threading.Condition) -> None:
        with self._lock:
            self._mark_busy([k for k, w in self._waiters.items() if w.cond is cond])
        cond.notify_all()

    def step(self, seconds: float) -> None:
        """Advance time by `seconds`, wake the due waiters and wait until they settle."""
        if seconds < 0:
            raise ValueError(f"FakeClock.step: negative duration {seconds!r}")
        with self._lock:
            self._now += seconds
            due = [
                key
                for key, w in self._waiters.items()
                if w.deadline is not None and w.deadline <= self._now
            ]
            conds = {id(self._waiters[k].cond): self._waiters[k].cond for k in due}
            self._mark_busy(due)
        # Lock order is always cond -> clock (wait() registers while holding cond), so the clock
        # lock is released before any cond is taken.
        for cond in conds.values():
            with cond:
                cond.notify_all()
        self.settle()

    def settle(self, timeout: float | None = None) -> None:
        """Block until no thread woken by this clock is still running (see module docstring)."""
        limit = self._settle_timeout if timeout is None else timeout
        end = time.monotonic() + limit
        me = threading.current_thread()
        with self._lock:
            while True:
                # A thread cannot wait for itself (e.g. a test thread that once used wait()).
                self._busy = {t for t in self._busy if t.is_alive() and t is not me}
                if not self._busy:
                    return
                remaining = end - time.monotonic()
                if remaining <= 0:
                    names = sorted(t.name for t in self._busy)
                    raise ClockSettleTimeout(f"FakeClock: threads still running: {names}")
                self._lock.wait(min(remaining, _EXIT_POLL))

    def _mark_busy(self, keys: list[int]) -> None:
        for key in keys:
            waiter = self._waiters.pop(key)
            self._busy.add(waiter.thread)


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
