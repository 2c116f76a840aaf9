"""Queue metrics: client-go util/workqueue/metrics.go semantics read back from a
prometheus CollectorRegistry, in both expositions (component-base and controller-runtime)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.queues import (
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    NoopMetricsProvider,
    Queue,
    RateLimitingQueue,
)
from controller.queues.metrics import DURATION_BUCKETS
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.testing.clock import FakeClock

Make = Callable[..., Any]
ROOT = Path(__file__).resolve().parents[2]


class Reader:
    """Reads one queue's samples from the registry."""

    def __init__(self, registry: CollectorRegistry, name: str) -> None:
        self.registry = registry
        self.name = name

    def __call__(self, metric: str) -> float | None:
        return self.registry.get_sample_value(metric, {"name": self.name})

    @property
    def depth(self) -> float | None:
        return self("workqueue_depth")

    @property
    def adds(self) -> float | None:
        return self("workqueue_adds_total")


def queue_duration_bounds(registry: CollectorRegistry) -> list[float]:
    """The bucket bounds ("le") of the queue-duration histogram, in order."""
    return [
        float(s.labels["le"])
        for metric in registry.collect()
        if metric.name == "workqueue_queue_duration_seconds"
        for s in metric.samples
        if s.name.endswith("_bucket")
    ]


def test_adds_and_depth_follow_dirty_items(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    q = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    m = Reader(registry, "pods")
    assert (m.adds, m.depth) == (0.0, 0.0)
    q.add("a")
    q.add("a")  # already dirty: not counted
    q.add("b")
    assert (m.adds, m.depth) == (2.0, 2.0)
    assert q.get() == ("a", False)
    assert m.depth == 1.0
    q.add("a")  # dirty while processing: counted in depth although len() excludes it
    assert (m.adds, m.depth, len(q)) == (3.0, 2.0, 1)
    q.done("a")
    assert m.depth == 2.0
    q.shut_down()
    q.add("c")  # dropped: not counted
    assert m.adds == 3.0


def test_queue_latency_runs_from_the_first_add(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    q = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    m = Reader(registry, "pods")
    q.add("a")
    clock.step(2.0)
    q.add("a")  # a re-add does not restart the latency clock
    clock.step(1.0)
    assert q.get() == ("a", False)
    assert m("workqueue_queue_duration_seconds_count") == 1.0
    assert m("workqueue_queue_duration_seconds_sum") == 3.0
    # Re-added while processing: latency runs from that re-add to the next get.
    q.add("a")
    clock.step(0.25)
    q.done("a")
    clock.step(0.5)
    assert q.get() == ("a", False)
    assert m("workqueue_queue_duration_seconds_count") == 2.0
    assert m("workqueue_queue_duration_seconds_sum") == 3.75


def test_work_duration_runs_from_get_to_done(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    q = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    m = Reader(registry, "pods")
    q.add("a")
    q.get()
    clock.step(0.004)
    q.done("a")
    q.done("a")  # not processing any more: not observed twice
    assert m("workqueue_work_duration_seconds_count") == 1.0
    assert m("workqueue_work_duration_seconds_sum") == pytest.approx(0.004)
    bucket = registry.get_sample_value(
        "workqueue_work_duration_seconds_bucket", {"name": "pods", "le": "0.01"}
    )
    assert bucket == 1.0
    below = registry.get_sample_value(
        "workqueue_work_duration_seconds_bucket", {"name": "pods", "le": "0.001"}
    )
    assert below == 0.0


def test_unfinished_and_longest_gauges_tick_every_500ms(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    q = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    m = Reader(registry, "pods")
    q.add("a")
    q.add("b")
    q.get()  # "a" starts at t0
    clock.step(0.3)
    assert m("workqueue_unfinished_work_seconds") == 0.0  # no tick yet
    q.get()  # "b" starts at t0 + 0.3
    clock.step(0.2)  # first tick at t0 + 0.5
    assert m("workqueue_unfinished_work_seconds") == pytest.approx(0.5 + 0.2)
    assert m("workqueue_longest_running_processor_seconds") == pytest.approx(0.5)
    q.done("a")
    clock.step(0.4)
    assert m("workqueue_longest_running_processor_seconds") == pytest.approx(0.5)  # stale
    clock.step(0.1)  # tick at t0 + 1.0
    assert m("workqueue_unfinished_work_seconds") == pytest.approx(0.7)
    assert m("workqueue_longest_running_processor_seconds") == pytest.approx(0.7)
    q.done("b")
    clock.step(0.5)
    assert m("workqueue_unfinished_work_seconds") == 0.0
    assert m("workqueue_longest_running_processor_seconds") == 0.0
    q.add("c")
    q.get()
    q.shut_down()
    clock.step(5)  # ticker stopped with the queue: gauges keep their last value
    assert m("workqueue_unfinished_work_seconds") == 0.0


def test_retries_count_every_add_after_before_shutdown(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    q = make(
        RateLimitingQueue,
        ItemExponentialFailureRateLimiter(0.001, 1),
        name="pods",
        clock=clock,
        metrics_provider=provider,
    )
    m = Reader(registry, "pods")
    q.add_after("a", 0)  # zero delay counts too
    q.add_after("b", 1)
    q.add_rate_limited("c")
    assert m("workqueue_retries_total") == 3.0
    assert m.adds == 1.0  # delayed items count as adds only when they fire
    clock.step(1)
    assert m.adds == 3.0
    q.shut_down()
    q.add_after("d", 0)
    q.add_rate_limited("d")
    assert m("workqueue_retries_total") == 3.0


def test_unnamed_queues_emit_nothing_and_run_no_ticker(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    q = make(Queue, clock=clock, metrics_provider=provider)
    assert clock.waiter_count() == 0
    d = make(DelayingQueue, name="", clock=clock, metrics_provider=provider)
    assert clock.waiter_count() == 1  # only the waiting loop
    q.add("a")
    d.add_after("b", 0)
    samples = [s for metric in registry.collect() for s in metric.samples]
    assert samples == []


def test_noop_provider_runs_no_ticker(make: Make, clock: FakeClock) -> None:
    make(Queue, name="pods", clock=clock, metrics_provider=NoopMetricsProvider())
    make(Queue, name="pods", clock=clock)
    assert clock.waiter_count() == 0


def test_named_queue_runs_one_ticker_until_shutdown(
    make: Make, clock: FakeClock, provider: PrometheusMetricsProvider
) -> None:
    q = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    assert clock.waiter_count() == 1
    q.shut_down()
    assert clock.waiter_count() == 0


def test_queues_with_the_same_name_share_series(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    first = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    second = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    other = make(Queue, name="nodes", clock=clock, metrics_provider=provider)
    first.add("a")
    second.add("a")
    other.add("a")
    assert Reader(registry, "pods").adds == 2.0
    assert Reader(registry, "nodes").adds == 1.0


def test_histogram_buckets_are_component_base_exponential(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    assert DURATION_BUCKETS == (
        1e-08, 1e-07, 1e-06, 9.999999999999999e-06, 9.999999999999999e-05,
        0.001, 0.01, 0.1, 1, 10,
    )  # fmt: skip
    q = make(Queue, name="pods", clock=clock, metrics_provider=provider)
    q.add("a")
    q.get()
    bounds = queue_duration_bounds(registry)
    assert bounds == [*DURATION_BUCKETS, float("inf")]


def test_metric_names_and_types(
    make: Make, clock: FakeClock, registry: CollectorRegistry, provider: PrometheusMetricsProvider
) -> None:
    make(DelayingQueue, name="pods", clock=clock, metrics_provider=provider)
    types = {metric.name: metric.type for metric in registry.collect()}
    assert types == {
        "workqueue_depth": "gauge",
        "workqueue_adds": "counter",
        "workqueue_queue_duration_seconds": "histogram",
        "workqueue_work_duration_seconds": "histogram",
        "workqueue_unfinished_work_seconds": "gauge",
        "workqueue_longest_running_processor_seconds": "gauge",
        "workqueue_retries": "counter",
    }


class RecordingProvider:
    """A MetricsProvider that is not Prometheus: the protocol alone is enough."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, float | None]] = []

    def _metric(self, kind: str, name: str) -> Any:
        events = self.events

        class Metric:
            def inc(self) -> None:
                events.append((kind, name, None))

            def dec(self) -> None:
                events.append((kind + "-dec", name, None))

            def set(self, value: float) -> None:
                events.append((kind, name, value))

            def observe(self, value: float) -> None:
                events.append((kind, name, value))

        return Metric()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("new_") and attr.endswith("_metric"):
            kind = attr[len("new_") : -len("_metric")]
            return lambda name: self._metric(kind, name)
        raise AttributeError(attr)


def test_custom_provider(make: Make, clock: FakeClock) -> None:
    recorder = RecordingProvider()
    q = make(Queue, name="q", clock=clock, metrics_provider=recorder)
    q.add("a")
    q.get()
    clock.step(0.5)
    q.done("a")
    assert recorder.events == [
        ("adds", "q", None),
        ("depth", "q", None),
        ("depth-dec", "q", None),
        ("latency", "q", 0.0),
        ("unfinished_work_seconds", "q", 0.5),
        ("longest_running_processor_seconds", "q", 0.5),
        ("work_duration", "q", 0.5),
    ]


def test_queue_modules_do_not_import_prometheus_client() -> None:
    code = (
        "import sys\n"
        "import controller.queues\n"
        "from controller.queues import RateLimitingQueue, default_controller_rate_limiter\n"
        "q = RateLimitingQueue(default_controller_rate_limiter(), name='x')\n"
        "q.add('a'); q.shut_down()\n"
        "assert 'prometheus_client' not in sys.modules, 'prometheus_client imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_controller_runtime_flavour_labels_and_buckets(make: Make, clock: FakeClock) -> None:
    registry = CollectorRegistry()
    provider = PrometheusMetricsProvider(registry, flavour="controller-runtime")
    q = make(DelayingQueue, name="pods", clock=clock, metrics_provider=provider)
    q.add("a")
    q.add_after("b", 0)
    labels = {"name": "pods", "controller": "pods"}
    assert registry.get_sample_value("workqueue_depth", {**labels, "priority": ""}) == 2.0
    assert registry.get_sample_value("workqueue_adds_total", labels) == 2.0
    assert registry.get_sample_value("workqueue_retries_total", labels) == 1.0
    q.get()
    bounds = queue_duration_bounds(registry)
    assert bounds == [*DURATION_BUCKETS, 100.0, 1000.0, float("inf")]


def test_unknown_flavour_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="flavour"):
        PrometheusMetricsProvider(CollectorRegistry(), flavour="go")
