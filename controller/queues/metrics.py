"""Work queue metrics (mirror of client-go util/workqueue/metrics.go).

Contract:

* A `MetricsProvider` makes, per queue name, the seven client-go metrics: depth (gauge, inc/dec),
  adds (counter), queue latency and work duration (histograms, seconds), unfinished work and
  longest running processor (settable gauges, seconds) and retries (counter, made by the delaying
  queue).
* `NoopMetricsProvider` is the default. A queue gets metrics only when it has a non-empty name and
  a provider that is not the no-op one; otherwise it records nothing and starts no ticker thread.
* `QueueMetrics` is client-go's `defaultQueueMetrics`: the queue calls it with its lock held;
  `add` is called only when an item becomes dirty, latency runs from that first add to `get`,
  work duration from `get` to `done`, and `update_unfinished_work` recomputes the two settable
  gauges from the per-item start times (the queue ticks it every 500 ms of its clock).
* The Prometheus implementation lives above this package
  (`controller.runtime.queue_metrics.PrometheusMetricsProvider`), so the queues never import
  prometheus_client.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Protocol

from controller.queues.clock import Clock

LOG = logging.getLogger(__name__)


def _exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    buckets = []
    bound = start
    for _ in range(count):
        buckets.append(bound)
        bound *= factor
    return tuple(buckets)


# component-base: prometheus.ExponentialBuckets(10e-9, 10, 10), built by repeated multiplication so
# the `le` bounds are the very floats Go produces (1e-08 ... 9.999999999999999e-06 ... 10).
DURATION_BUCKETS: tuple[float, ...] = _exponential_buckets(10e-9, 10, 10)
# controller-runtime: ExponentialBuckets(10e-9, 10, 12), the above plus 100 and 1000.
CONTROLLER_RUNTIME_DURATION_BUCKETS: tuple[float, ...] = _exponential_buckets(10e-9, 10, 12)


class GaugeMetric(Protocol):
    """A gauge moved up and down (workqueue_depth)."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...


class SettableGaugeMetric(Protocol):
    """A gauge set to an absolute value (unfinished work, longest running processor)."""

    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    """A monotonically increasing counter (adds, retries)."""

    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    """An observation sink in seconds (queue latency, work duration)."""

    def observe(self, value: float) -> None: ...


class MetricsProvider(Protocol):
    """Makes the metrics of one named queue; client-go's `MetricsProvider`."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...

    def new_adds_metric(self, name: str) -> CounterMetric: ...

    def new_latency_metric(self, name: str) -> HistogramMetric: ...

    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_retries_metric(self, name: str) -> CounterMetric: ...


class _NoopMetric:
    __slots__ = ()

    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP = _NoopMetric()


class NoopMetricsProvider:
    """Records nothing; queues built with it behave as unnamed queues."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NOOP


def metrics_enabled(name: str | None, provider: MetricsProvider | None) -> bool:
    """client-go: metrics exist only for a named queue with a non-no-op provider."""
    return bool(name) and provider is not None and not isinstance(provider, NoopMetricsProvider)


class QueueMetrics:
    """Per-queue bookkeeping behind the metrics (client-go `defaultQueueMetrics`).

    Not thread-safe by itself: every method is called with the owning queue's lock held.
    """

    __slots__ = (
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_latency",
        "_longest_running",
        "_processing_start_times",
        "_unfinished_work",
        "_work_duration",
    )

    def __init__(self, name: str, provider: MetricsProvider, clock: Clock) -> None:
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished_work = provider.new_unfinished_work_seconds_metric(name)
        self._longest_running = provider.new_longest_running_processor_seconds_metric(name)
        self._add_times: dict[Hashable, float] = {}
        self._processing_start_times: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        # NOTE: only the first add of a dirty period starts the latency clock (client-go).
        if item not in self._add_times:
            self._add_times[item] = self._clock.now()

    def get(self, item: Hashable) -> None:
        self._depth.dec()
        now = self._clock.now()
        self._processing_start_times[item] = now
        start = self._add_times.pop(item, None)
        if start is not None:
            self._latency.observe(now - start)

    def done(self, item: Hashable) -> None:
        start = self._processing_start_times.pop(item, None)
        if start is not None:
            self._work_duration.observe(self._clock.now() - start)

    def update_unfinished_work(self) -> None:
        now = self._clock.now()
        total = 0.0
        oldest = 0.0
        for start in self._processing_start_times.values():
            age = now - start
            total += age
            oldest = max(oldest, age)
        self._unfinished_work.set(total)
        self._longest_running.set(oldest)
