"""client-go's workqueue metrics on Prometheus (the `MetricsProvider` of controller.queues).

`PrometheusMetricsProvider` exposes client-go's component-base names with the single label `name`
on an injected `prometheus_client.CollectorRegistry` (or, on request, the controller-runtime label
set kube-ovn serves). It lives here, not in controller.queues, so that the queues stay free of
client libraries.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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


class PrometheusMetricsProvider:
    """client-go's workqueue metrics on an injected CollectorRegistry.

    `flavour` picks the exposition:

    * "component-base" (default): k8s.io/component-base names, help texts and the 10 duration
      buckets 1e-08 .. 10 s, single label `name`;
    * "controller-runtime": what kube-ovn actually serves: labels `name` and `controller` (both
      the queue name), plus `priority=""` on the depth gauge, and 12 buckets up to 1000 s; use it
      for drop-in compatibility with kube-ovn's dashboards.

    Two queues with the same name share the labelled children, so their values add up (as in
    Go). prometheus_client also emits `*_created` series unless the process disabled them.
    """

    def __init__(self, registry: CollectorRegistry, flavour: str = COMPONENT_BASE) -> None:
        if flavour not in (COMPONENT_BASE, CONTROLLER_RUNTIME):
            raise ValueError(
                f"unknown metrics flavour {flavour!r}: use {COMPONENT_BASE!r} "
                f"or {CONTROLLER_RUNTIME!r}"
            )
        self._flavour = flavour
        runtime = flavour == CONTROLLER_RUNTIME
        labels: tuple[str, ...] = ("name", "controller") if runtime else ("name",)
        buckets = CONTROLLER_RUNTIME_DURATION_BUCKETS if runtime else DURATION_BUCKETS
        self._depth = Gauge(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority"
            if runtime
            else "Current depth of workqueue",
            (*labels, "priority") if runtime else labels,
            registry=registry,
        )
        self._adds = Counter(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            labels,
            registry=registry,
        )
        self._latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            labels,
            registry=registry,
            buckets=buckets,
        )
        self._work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels,
            registry=registry,
            buckets=buckets,
        )
        self._unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            _UNFINISHED_HELP.format(verb="been done that is" if runtime else "done that is"),
            labels,
            registry=registry,
        )
        self._longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels,
            registry=registry,
        )
        self._retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            labels,
            registry=registry,
        )

    def _labels(self, name: str) -> dict[str, str]:
        if self._flavour == CONTROLLER_RUNTIME:
            return {"name": name, "controller": name}
        return {"name": name}

    def new_depth_metric(self, name: str) -> GaugeMetric:
        if self._flavour == CONTROLLER_RUNTIME:
            return self._depth.labels(name=name, controller=name, priority="")
        return self._depth.labels(name=name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._adds.labels(**self._labels(name))

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._latency.labels(**self._labels(name))

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._work_duration.labels(**self._labels(name))

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._unfinished.labels(**self._labels(name))

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._longest.labels(**self._labels(name))

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._retries.labels(**self._labels(name))
