"""The basic work queue (mirror of client-go util/workqueue/queue.go, `Typed[T]`).

Guarantees (client-go doc.go):

* Fair: items are handed out in the order they were added.
* Stingy: an item is never handed to two workers at once, and an item added many times before
  it is processed is processed once. An item added while it is being processed is marked dirty
  and re-queued by `done()`, not given to a second worker.
* Multiple producers and consumers; `get()` blocks until an item is available or the queue shuts
  down.
* Shutdown: after `shut_down()` adds are dropped, `get()` keeps returning the items still queued
  (shutdown flag False) and then `(None, True)`; `done()` still re-queues dirty items.
  `shut_down_with_drain()` additionally waits for the items being processed (not the queued
  ones) to be `done()`; a later `shut_down()` releases it.

State (one lock and condition per queue; every operation is O(1)): `_queue`, a FIFO of items each
of which is in `_dirty` and not in `_processing`; `_dirty`, the items that need processing;
`_processing`, the items handed out by `get()` and not yet `done()`.

Metrics exist only for named queues with a real provider (see metrics.py); such a queue runs one
background thread that refreshes the unfinished-work gauges every 500 ms of its clock.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from controller.queues.clock import Clock, RealClock, join_clock_loop, start_clock_loop
from controller.queues.metrics import MetricsProvider, QueueMetrics, metrics_enabled

LOG = logging.getLogger(__name__)

T = TypeVar("T", bound=Hashable)

# client-go: defaultUnfinishedWorkUpdatePeriod.
UNFINISHED_WORK_UPDATE_PERIOD = 0.5


class Queue(Generic[T]):
    """client-go's `TypedInterface[T]`: add/get/done with dirty and processing sets.

    Items are hashable and not None. A named queue with metrics owns a ticker thread, and
    every `DelayingQueue` a waiting thread: call `shut_down()` (or the drain variant) to stop
    them, as client-go's queues leak their goroutines otherwise.
    """

    def __init__(
        self,
        name: str | None = None,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"queue name must be a str or None, not {type(name).__name__}")
        self._name = name or ""
        self._clock: Clock = clock if clock is not None else RealClock()
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        self._metrics: QueueMetrics | None = None
        # The ticker thread waits on _stop_cond (never on _cond) through the clock.
        self._stop_cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._ticker: threading.Thread | None = None
        if metrics_enabled(name, metrics_provider):
            assert metrics_provider is not None  # narrowed by metrics_enabled
            self._metrics = QueueMetrics(self._name, metrics_provider, self._clock)
            self._ticker = start_clock_loop(
                f"workqueue-{self._name}-unfinished-work",
                self._update_unfinished_work_loop,
                self._stop_cond,
            )

    @property
    def name(self) -> str:
        return self._name

    def add(self, item: T) -> None:
        """Mark `item` as needing processing (dropped after shutdown). `None` is rejected: it
        is what `get()` returns on shutdown."""
        if item is None:
            raise ValueError("a work queue item cannot be None")
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            if self._metrics is not None:
                self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                # done() re-queues it; a second worker must not get it meanwhile.
                return
            self._queue.append(item)
            self._cond.notify()

    def __len__(self) -> int:
        """Items waiting in the FIFO: neither processing nor delayed items count."""
        with self._cond:
            return len(self._queue)

    def idle(self) -> bool:
        """True when nothing is queued and no worker holds an item (a delaying queue also
        needs no entry waiting for its ready time): the state in which a test may conclude that
        the controller has acted on everything it was told."""
        with self._cond:
            return not self._queue and not self._processing

    def get(self) -> tuple[T | None, bool]:
        """Block until an item is available; returns `(item, False)` or `(None, True)`.

        The caller must call `done(item)` when it has finished processing the item.
        """
        with self._cond:
            while not self._queue and not self._shutting_down:
                self._cond.wait()
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            if self._metrics is not None:
                self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: T) -> None:
        """Mark `item` processed; re-queue it if it was added again meanwhile (even after
        shutdown, as client-go does)."""
        with self._cond:
            if self._metrics is not None:
                self._metrics.done(item)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
            elif self._drain and not self._processing:
                # Go signals here unconditionally; only a draining shut_down waits for it (no
                # get() ever blocks once shutting down, so the drainer is the only waiter).
                self._cond.notify_all()

    def shut_down(self) -> None:
        """Stop accepting adds and wake every blocked `get()`; does not wait. Idempotent."""
        with self._cond:
            self._drain = False
            self._shutting_down = True
            self._cond.notify_all()
        self._stop_background()

    def shut_down_with_drain(self) -> None:
        """Like `shut_down()`, then block until every item handed out by `get()` is `done()`.

        Items still queued are not waited for. A concurrent `shut_down()` releases the wait.
        """
        with self._cond:
            self._drain = True
            self._shutting_down = True
            self._cond.notify_all()
        self._stop_background()
        with self._cond:
            while self._processing and self._drain:
                self._cond.wait()

    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def _stop_background(self) -> None:
        """Stop the queue's background threads (subclasses add theirs). Idempotent."""
        with self._stop_cond:
            self._stopped = True
            self._clock.notify(self._stop_cond)
        join_clock_loop(self._ticker)

    def _update_unfinished_work_loop(self) -> None:
        # Runs holding _stop_cond, released only while waiting on the clock. Like a Go ticker it
        # fires at most once per wake-up, then skips the periods that already passed.
        next_tick = self._clock.now() + UNFINISHED_WORK_UPDATE_PERIOD
        while True:
            # _stopped only changes while this thread waits (it holds _stop_cond otherwise).
            self._clock.wait(self._stop_cond, next_tick)
            if self._stopped:
                return
            now = self._clock.now()
            if now < next_tick:
                continue
            while next_tick <= now:
                next_tick += UNFINISHED_WORK_UPDATE_PERIOD
            with self._cond:
                if not self._shutting_down and self._metrics is not None:
                    self._metrics.update_unfinished_work()
