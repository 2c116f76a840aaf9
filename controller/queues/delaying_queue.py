"""The delaying work queue (mirror of client-go util/workqueue/delaying_queue.go).

`DelayingQueue` is a `Queue` plus `add_after(item, seconds)`:

* `seconds <= 0` adds the item at once; otherwise it becomes ready at `clock.now() + seconds`.
* One pending entry per item: a second `add_after` keeps the *earlier* ready time (a shorter delay
  advances the entry, a longer one is ignored). A plain `add()` does not cancel a pending entry:
  it still fires later and adds the item again (deduplicated by the dirty set as usual).
* Pending entries are invisible to `len()` and are dropped when the queue shuts down; `idle()`
  counts every pending entry, `idle_now()` only the ones already due.
* Every `add_after` before shutdown counts one retry (`workqueue_retries_total`), zero delays
  included.

One background thread (client-go's `waitingLoop`) owns the min-heap of ready times and moves due
items into the queue. It waits on the injected clock until the earliest ready time, at most
`MAX_WAIT` (client-go's 10 s heartbeat), and is woken when an entry becomes the new earliest or
the queue shuts down.

Deliberate difference from Go: `add_after` inserts into the heap itself, under the loop's lock,
instead of sending on a 1000-slot channel, so it never blocks (kube-ovn spawns goroutines around
AddAfter only to dodge that blocking).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from typing import Generic

from controller.queues.clock import Clock, join_clock_loop, start_clock_loop
from controller.queues.metrics import CounterMetric, MetricsProvider, metrics_enabled
from controller.queues.queue import Queue, T

LOG = logging.getLogger(__name__)

# client-go: maxWait, the heartbeat that bounds every wait of the waiting loop.
MAX_WAIT = 10.0


class _Entry(Generic[T]):
    """A heap entry; superseded entries are invalidated in place (lazy deletion)."""

    __slots__ = ("item", "ready_at", "seq", "valid")

    def __init__(self, item: T, ready_at: float, seq: int) -> None:
        self.item = item
        self.ready_at = ready_at
        self.seq = seq
        self.valid = True

    def __lt__(self, other: _Entry[T]) -> bool:
        # Equal ready times fire in insertion order.
        return (self.ready_at, self.seq) < (other.ready_at, other.seq)


class DelayingQueue(Queue[T]):
    """client-go's `TypedDelayingInterface[T]`: a `Queue` with `add_after`."""

    def __init__(
        self,
        name: str | None = None,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name=name, clock=clock, metrics_provider=metrics_provider)
        self._retries: CounterMetric | None = None
        if metrics_enabled(name, metrics_provider):
            assert metrics_provider is not None
            self._retries = metrics_provider.new_retries_metric(self._name)
        # Guards the heap, the entry map and _loop_stopped. Lock order: _waiting_cond, then the
        # queue's own lock (the loop calls add() holding it); never the other way round.
        self._waiting_cond = threading.Condition(threading.Lock())
        self._heap: list[_Entry[T]] = []
        self._entries: dict[T, _Entry[T]] = {}
        self._seq = itertools.count()
        self._loop_stopped = False
        self._waiting_loop_thread = start_clock_loop(
            f"workqueue-{self._name or 'unnamed'}-waiting", self._waiting_loop, self._waiting_cond
        )

    def add_after(self, item: T, seconds: float) -> None:
        """Add `item` once `seconds` have passed on the queue's clock (see module docstring)."""
        if math.isnan(seconds):  # NaN would corrupt the heap order
            raise ValueError(f"add_after: delay is not a number: {seconds!r}")
        if self.shutting_down():
            return
        if self._retries is not None:
            self._retries.inc()
        if seconds <= 0:
            self.add(item)
            return
        ready_at = self._clock.now() + seconds
        with self._waiting_cond:
            if self._loop_stopped:
                return
            current = self._entries.get(item)
            if current is not None:
                if ready_at >= current.ready_at:
                    return
                current.valid = False
            entry = _Entry(item, ready_at, next(self._seq))
            self._entries[item] = entry
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:
                # The loop sleeps until the previous head; only a new head changes its deadline.
                self._clock.notify(self._waiting_cond)

    def pending(self) -> int:
        """Entries waiting for their ready time (not part of `len()`); for tests and debugging."""
        with self._waiting_cond:
            return len(self._entries)

    def waiting(self) -> list[T]:
        """The items of the entries waiting for their ready time, earliest first; a snapshot,
        for tests and debugging (what keeps `idle()` false once nothing is queued)."""
        with self._waiting_cond:
            return [e.item for e in sorted(self._entries.values())]

    def idle(self) -> bool:
        """`Queue.idle` and no entry waiting for its ready time (a retry scheduled with backoff
        is work still to do)."""
        return super().idle() and self.pending() == 0

    def idle_now(self) -> bool:
        """`Queue.idle` and no waiting entry whose ready time has come; an entry due later (a
        retry's backoff, a deferred delete) is work the queue was told to do later, not work it
        owes now. One snapshot: the waiting loop moves due entries into the queue holding the
        same lock, so an entry in transit is never missed by both halves of the check."""
        with self._waiting_cond:
            now = self._clock.now()
            if any(entry.ready_at <= now for entry in self._entries.values()):
                return False
            return super().idle()

    def _stop_background(self) -> None:
        with self._waiting_cond:
            self._loop_stopped = True
            self._heap.clear()
            self._entries.clear()
            self._clock.notify(self._waiting_cond)
        join_clock_loop(self._waiting_loop_thread)
        super()._stop_background()

    def _waiting_loop(self) -> None:
        # Runs holding _waiting_cond, released only while waiting on the clock.
        heap = self._heap
        while not self._loop_stopped:
            if self.shutting_down():
                return
            now = self._clock.now()
            while heap and (not heap[0].valid or heap[0].ready_at <= now):
                entry = heapq.heappop(heap)
                if entry.valid:
                    del self._entries[entry.item]
                    self.add(entry.item)
            deadline = now + MAX_WAIT
            if heap and heap[0].ready_at < deadline:
                deadline = heap[0].ready_at
            self._clock.wait(self._waiting_cond, deadline)
