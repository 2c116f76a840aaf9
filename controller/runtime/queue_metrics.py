"""client-go's workqueue metrics on Prometheus (the `MetricsProvider` of controller.queues).

`PrometheusMetricsProvider` exposes client-go's component-base names with the single label `name`
on an injected `prometheus_client.CollectorRegistry` (or, on request, the controller-runtime label
set kube-ovn serves). It lives here, not in controller.queues, so that the queues stay free of
client libraries.

The hot path is cheap on purpose: the queues call depth, adds, latency and work duration on every
add/get/done with their own lock held, and prometheus_client's metric children take a lock of their
own per call (a histogram observation costs several microseconds). So every `new_*_metric` call
returns a fresh plain-Python child owned by that one queue and mutated only under that queue's
lock; one registered collector per family sums, at scrape time, the children made for the same
label set. The exposition is what prometheus_client's Counter, Gauge and Histogram would print
(same names, types, help texts, bucket bounds and `*_created` series unless the process disabled
them), and the values are exact: every observation is counted, none is sampled or deferred.
Retries are counted outside any queue lock (`add_after`), so their child takes a lock.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator

import prometheus_client.metrics
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from controller.queues.metrics import (
    CONTROLLER_RUNTIME_DURATION_BUCKETS,
    DURATION_BUCKETS,
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    SettableGaugeMetric,
)

COMPONENT_BASE = "component-base"
CONTROLLER_RUNTIME = "controller-runtime"

_UNFINISHED_HELP = (
    "How many seconds of work has {verb} in progress and hasn't been observed by work_duration. "
    "Large values indicate stuck threads. One can deduce the number of stuck threads by "
    "observing the rate at which this increases."
)

_INF = float("inf")


def _created_enabled() -> bool:
    # prometheus_client.disable_created_metrics() flips this module flag; honour it like its own
    # Counter and Histogram do.
    return bool(getattr(prometheus_client.metrics, "_use_created", True))


class _Value:
    """A counter or an up/down gauge; mutated only under its queue's lock."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self) -> None:
        self.value += 1.0

    def dec(self) -> None:
        self.value -= 1.0


class _Settable:
    """A settable gauge; `set` is one attribute store, atomic under the GIL."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = float(value)


class _LockedCounter:
    """A counter incremented from threads that hold no common lock."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0.0

    def inc(self) -> None:
        with self._lock:
            self.value += 1.0


class _Histogram:
    """Per-bucket (non-cumulative) counts and the sum; mutated only under its queue's lock.

    `bounds` ends with +Inf, so `bisect_left` (the first bound >= value, i.e. `value <= le`, the
    Prometheus rule) always lands on a bucket.
    """

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value


class _Family:
    """The children of one metric family, grouped by label values, and its exposition."""

    def __init__(self, name: str, documentation: str, kind: str, labelnames: tuple[str, ...]):
        self.name = name
        self.documentation = documentation
        self.kind = kind  # "counter", "gauge" or "histogram"
        self.labelnames = labelnames
        self._lock = threading.Lock()  # guards the dicts, not the children's values
        self._children: dict[tuple[str, ...], list[object]] = {}
        self._created: dict[tuple[str, ...], float] = {}

    def add_child(self, labels: tuple[str, ...], child: object) -> None:
        with self._lock:
            self._children.setdefault(labels, []).append(child)
            self._created.setdefault(labels, time.time())

    def shared_child(self, labels: tuple[str, ...], make: type[_Settable]) -> _Settable:
        """One child per label set (settable gauges: the last `set` wins, as in Go)."""
        with self._lock:
            children = self._children.get(labels)
            if children:
                child = children[0]
                assert isinstance(child, _Settable)
                return child
            made = make()
            self._children[labels] = [made]
            self._created.setdefault(labels, time.time())
            return made

    def _snapshot(self) -> list[tuple[tuple[str, ...], list[object], float]]:
        with self._lock:
            return [(k, list(v), self._created[k]) for k, v in self._children.items()]

    def empty(self) -> Metric:
        return self._family()

    def _family(self) -> Metric:
        if self.kind == "counter":
            return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        if self.kind == "gauge":
            return GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self, bounds: tuple[str, ...]) -> Metric:
        family = self._family()
        created = _created_enabled()
        for labels, children, created_at in self._snapshot():
            if isinstance(family, HistogramMetricFamily):
                counts = [0] * len(bounds)
                total = 0.0
                for child in children:
                    assert isinstance(child, _Histogram)
                    for i, n in enumerate(child.counts):
                        counts[i] += n
                    total += child.sum
                cumulative = 0.0
                buckets: list[tuple[str, float]] = []
                for bound, n in zip(bounds, counts, strict=True):
                    cumulative += n
                    buckets.append((bound, cumulative))
                family.add_metric(labels, buckets, total)
                if created:
                    family.samples.append(
                        family.samples[-1]._replace(name=f"{self.name}_created", value=created_at)
                    )
                continue
            value = sum(
                child.value
                for child in children
                if isinstance(child, _Value | _Settable | _LockedCounter)
            )
            if isinstance(family, CounterMetricFamily):
                family.add_metric(labels, value, created=created_at if created else None)
            else:
                assert isinstance(family, GaugeMetricFamily)
                family.add_metric(labels, value)
        return family


class _Collector:
    """Registered once per provider: yields the seven workqueue families."""

    def __init__(self, families: list[_Family], bounds: tuple[float, ...]) -> None:
        self._families = families
        # The `le` labels as prometheus_client prints them ("1.0", "+Inf"), resolved once.
        self._bounds: tuple[str, ...] = tuple(
            floatToGoString(bound)  # type: ignore[no-untyped-call]
            for bound in bounds
        )

    def describe(self) -> Iterable[Metric]:
        return [family.empty() for family in self._families]

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            yield family.collect(self._bounds)


class PrometheusMetricsProvider:
    """client-go's workqueue metrics on an injected CollectorRegistry.

    `flavour` picks the exposition:

    * "component-base" (default): k8s.io/component-base names, help texts and the 10 duration
      buckets 1e-08 .. 10 s, single label `name`;
    * "controller-runtime": what kube-ovn actually serves: labels `name` and `controller` (both
      the queue name), plus `priority=""` on the depth gauge, and 12 buckets up to 1000 s; use it
      for drop-in compatibility with kube-ovn's dashboards.

    Two queues with the same name share the labelled series, so their values add up (as in Go;
    the settable gauges show the last value set). The series also carry `*_created` samples
    unless the process disabled them.
    """

    def __init__(self, registry: CollectorRegistry, flavour: str = COMPONENT_BASE) -> None:
        if flavour not in (COMPONENT_BASE, CONTROLLER_RUNTIME):
            raise ValueError(
                f"unknown metrics flavour {flavour!r}: use {COMPONENT_BASE!r} "
                f"or {CONTROLLER_RUNTIME!r}"
            )
        self._runtime = flavour == CONTROLLER_RUNTIME
        labels: tuple[str, ...] = ("name", "controller") if self._runtime else ("name",)
        buckets = CONTROLLER_RUNTIME_DURATION_BUCKETS if self._runtime else DURATION_BUCKETS
        self._bounds: tuple[float, ...] = (*(float(b) for b in buckets), _INF)
        self._depth = _Family(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority"
            if self._runtime
            else "Current depth of workqueue",
            "gauge",
            (*labels, "priority") if self._runtime else labels,
        )
        self._adds = _Family(
            "workqueue_adds", "Total number of adds handled by workqueue", "counter", labels
        )
        self._latency = _Family(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            "histogram",
            labels,
        )
        self._work_duration = _Family(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            "histogram",
            labels,
        )
        self._unfinished = _Family(
            "workqueue_unfinished_work_seconds",
            _UNFINISHED_HELP.format(verb="been done that is" if self._runtime else "done that is"),
            "gauge",
            labels,
        )
        self._longest = _Family(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            "gauge",
            labels,
        )
        self._retries = _Family(
            "workqueue_retries", "Total number of retries handled by workqueue", "counter", labels
        )
        registry.register(
            _Collector(
                [
                    self._depth,
                    self._adds,
                    self._latency,
                    self._work_duration,
                    self._unfinished,
                    self._longest,
                    self._retries,
                ],
                self._bounds,
            )
        )

    def _labels(self, name: str) -> tuple[str, ...]:
        return (name, name) if self._runtime else (name,)

    def new_depth_metric(self, name: str) -> GaugeMetric:
        child = _Value()
        self._depth.add_child((*self._labels(name), "") if self._runtime else (name,), child)
        return child

    def new_adds_metric(self, name: str) -> CounterMetric:
        child = _Value()
        self._adds.add_child(self._labels(name), child)
        return child

    def new_latency_metric(self, name: str) -> HistogramMetric:
        child = _Histogram(self._bounds)
        self._latency.add_child(self._labels(name), child)
        return child

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        child = _Histogram(self._bounds)
        self._work_duration.add_child(self._labels(name), child)
        return child

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._unfinished.shared_child(self._labels(name), _Settable)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._longest.shared_child(self._labels(name), _Settable)

    def new_retries_metric(self, name: str) -> CounterMetric:
        child = _LockedCounter()
        self._retries.add_child(self._labels(name), child)
        return child
