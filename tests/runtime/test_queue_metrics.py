"""The Prometheus work-queue provider prints what prometheus_client's own metrics would print.

The provider keeps plain per-queue children and sums them at scrape time; these tests compare
its exposition with prometheus_client's Counter/Gauge/Histogram fed the same observations.
"""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from controller.queues.metrics import DURATION_BUCKETS
from controller.runtime.queue_metrics import PrometheusMetricsProvider

_CREATED = re.compile(r"^(\S+_created\{[^}]*\}) \S+$", re.M)


def _text(registry: CollectorRegistry) -> str:
    # Creation timestamps differ between the two registries: compare the series, not their value.
    return _CREATED.sub(r"\1 T", generate_latest(registry).decode())


def test_exposition_matches_prometheus_client() -> None:
    ours_registry = CollectorRegistry()
    ours = PrometheusMetricsProvider(ours_registry)
    ref_registry = CollectorRegistry()
    depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=ref_registry)
    adds = Counter(
        "workqueue_adds",
        "Total number of adds handled by workqueue",
        ["name"],
        registry=ref_registry,
    )
    latency = Histogram(
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested.",
        ["name"],
        registry=ref_registry,
        buckets=DURATION_BUCKETS,
    )
    work = Histogram(
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes.",
        ["name"],
        registry=ref_registry,
        buckets=DURATION_BUCKETS,
    )
    unfinished = Gauge(
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has done that is in progress and hasn't been observed by "
        "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
        "threads by observing the rate at which this increases.",
        ["name"],
        registry=ref_registry,
    )
    longest = Gauge(
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running.",
        ["name"],
        registry=ref_registry,
    )
    retries = Counter(
        "workqueue_retries",
        "Total number of retries handled by workqueue",
        ["name"],
        registry=ref_registry,
    )

    observations = [0.0, 1e-08, 5e-06, 1e-3, 0.0015, 1.0, 10.0, 11.0, 1e6]
    # Two queues named "pods" (their series add up) and one named "nodes".
    for name, copies in (("pods", 2), ("nodes", 1)):
        for _ in range(copies):
            d = ours.new_depth_metric(name)
            a = ours.new_adds_metric(name)
            lat = ours.new_latency_metric(name)
            wd = ours.new_work_duration_metric(name)
            uw = ours.new_unfinished_work_seconds_metric(name)
            lr = ours.new_longest_running_processor_seconds_metric(name)
            rt = ours.new_retries_metric(name)
            for value in observations:
                d.inc()
                a.inc()
                lat.observe(value)
                wd.observe(value * 2)
                rt.inc()
                depth.labels(name=name).inc()
                adds.labels(name=name).inc()
                latency.labels(name=name).observe(value)
                work.labels(name=name).observe(value * 2)
                retries.labels(name=name).inc()
            d.dec()
            depth.labels(name=name).dec()
            uw.set(0.25)
            lr.set(0.5)
            unfinished.labels(name=name).set(0.25)
            longest.labels(name=name).set(0.5)
    assert _text(ours_registry) == _text(ref_registry)


def test_a_second_provider_on_one_registry_is_refused() -> None:
    registry = CollectorRegistry()
    PrometheusMetricsProvider(registry)
    with pytest.raises(ValueError, match="workqueue"):
        PrometheusMetricsProvider(registry)
