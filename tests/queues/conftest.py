"""Fixtures for the work queue tests: a fake clock and queues that are always shut down."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.queues import Queue
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.testing.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def provider(registry: CollectorRegistry) -> PrometheusMetricsProvider:
    return PrometheusMetricsProvider(registry)


@pytest.fixture
def make() -> Iterator[Callable[..., Any]]:
    """`make(QueueClass, *args, **kwargs)`; every queue built is shut down after the test."""
    built: list[Queue[Any]] = []

    def factory(cls: type[Queue[Any]], *args: Any, **kwargs: Any) -> Any:
        q = cls(*args, **kwargs)
        built.append(q)
        return q

    yield factory
    for q in built:
        q.shut_down()
