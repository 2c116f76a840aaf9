"""What /readyz and /healthz report beyond leader election: the NB link and stuck workers.

* `OutageTracker(connected)` samples a connection's state (`connected()`) and remembers since
  when it has been down; `down_for()` is 0.0 while it is up. Every probe samples it, so the
  duration is exact to one probe period.
* `stuck_worker(registry, queues)` is the longest time any worker of the named queues has spent
  on its current item, read from the `workqueue_longest_running_processor_seconds` gauge the
  queues keep up to date, with the queue's name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry

from controller.queues.clock import REAL_CLOCK, Clock

LONGEST_RUNNING = "workqueue_longest_running_processor_seconds"


class OutageTracker:
    """Since when a connection has been down (see the module docstring)."""

    def __init__(self, connected: Callable[[], bool], clock: Clock = REAL_CLOCK) -> None:
        self._connected = connected
        self._clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None

    def sample(self) -> bool:
        """True when connected now; records the start of an outage."""
        try:
            up = bool(self._connected())
        except Exception:
            up = False
        with self._lock:
            if up:
                self._down_since = None
            elif self._down_since is None:
                self._down_since = self._clock.now()
        return up

    def down_for(self) -> float:
        self.sample()
        with self._lock:
            return 0.0 if self._down_since is None else self._clock.now() - self._down_since


def stuck_worker(registry: CollectorRegistry, queues: Iterable[str]) -> tuple[str, float]:
    """(queue name, seconds) of the longest-running item among `queues`; ("", 0.0) if none."""
    wanted = set(queues)
    worst, seconds = "", 0.0
    for metric in registry.collect():
        if metric.name != LONGEST_RUNNING:
            continue
        for sample in metric.samples:
            name = sample.labels.get("name", "")
            if name in wanted and sample.value > seconds:
                worst, seconds = name, float(sample.value)
    return worst, seconds
