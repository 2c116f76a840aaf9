"""The one virtual clock for tests: `FakeClock` implements `controller.queues.clock.Clock`.

Time moves only through `step(seconds)`. It serves both kinds of loop the `Clock` protocol has:

* Condition waits (`wait(cond, deadline)` / `notify(cond)`, the work queues' loops). Like
  client-go's FakeClock, `step()` wakes every waiter whose deadline is not after the new time;
  unlike Go's, it then *settles*: it returns only once every loop thread it (or `notify`) woke has
  gone back to waiting on the clock or has exited. So after `step()` the due items are in the
  queue and the gauges are updated: tests never sleep and never poll. `has_waiters()` is true while
  any thread waits with a deadline, `waiter_count()` counts the threads blocked in `wait()`. A
  thread woken by the clock must therefore wait on the clock again or exit (the queue loops do);
  otherwise `step()` raises `ClockSettleTimeout` after `settle_timeout`.
* Interruptible sleeps (`sleep(seconds, stop)`, the reflectors, the leader elector, the GC loop).
  A sleep returns once a `step()` has moved time to its deadline, or at once when `stop` is set,
  like k8s.io/utils' FakeClock timers. `step()` does not settle on sleepers: they go on to block in
  HTTP calls, not on the clock; tests wait for them with `waiters()` instead, the number of sleeps
  still blocked on a future deadline. `waits` records every requested duration, so backoff and
  resync delays can be asserted exactly.
"""

from __future__ import annotations

import threading
import time

# How often a settling step() re-checks whether a woken thread has exited; only used when a loop
# exits instead of waiting again (queue shutdown), never in the steady state.
_EXIT_POLL = 0.005
# How often a sleep re-checks its stop event: an Event cannot notify the clock's condition.
_STOP_POLL = 0.002


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
        # Guards every field; signalled whenever a thread goes back to waiting or time moves.
        self._lock = threading.Condition()
        self._waiters: dict[int, _Waiter] = {}  # keyed by id(waiter record)
        # Threads the clock woke (step/notify) or that returned from wait() and have not yet
        # blocked again: the set step() settles on.
        self._busy: set[threading.Thread] = set()
        self._sleepers: dict[int, float] = {}  # sleep id -> deadline
        self._next_sleeper = 0
        #: Every duration passed to `sleep()`, in call order.
        self.waits: list[float] = []

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

    def waiters(self) -> int:
        """Sleeps still blocked on a future deadline (due ones are about to return)."""
        with self._lock:
            return sum(1 for deadline in self._sleepers.values() if deadline > self._now)

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        with self._lock:
            deadline = self._now + seconds
            self.waits.append(seconds)
            key = self._next_sleeper
            self._next_sleeper += 1
            self._sleepers[key] = deadline
            try:
                while self._now < deadline:
                    if stop.is_set():
                        return True
                    self._lock.wait(_STOP_POLL)
                return stop.is_set()
            finally:
                del self._sleepers[key]

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
        """Advance time by `seconds`, wake the due waiters and sleepers, settle the waiters."""
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
            self._lock.notify_all()  # the sleepers re-check their deadline
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
