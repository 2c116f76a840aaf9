"""Start-up backoff with human messages, the NB outage tracker and the stuck-worker reading."""

from __future__ import annotations

import logging
import threading

import pytest
from prometheus_client import CollectorRegistry

from controller.apiclient.errors import ForbiddenError, KubeUnavailableError
from controller.ovn.api import OvnError
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.runtime.health import OutageTracker, stuck_worker
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.runtime.startup import StartupError, human_reason, wait_until_reachable
from controller.testing.clock import FakeClock
from controller.testing.wait import wait_for

MAX_RETRY = KubeUnavailableError(
    0,
    "MaxRetryError",
    "HTTPSConnectionPool(host='10.96.0.1', port=443): Max retries exceeded with url: /apis "
    "(Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: "
    "Failed to establish a new connection: [Errno 111] Connection refused'))",
)


class StepClock:
    """A clock that advances only when the waiter sleeps; stops it after `stop_after` sleeps."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []
        self._stop_after = stop_after

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        self.sleeps.append(seconds)
        self.t += seconds
        return self._stop_after is not None and len(self.sleeps) >= self._stop_after

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        if deadline is not None:  # nothing else runs on this clock: the deadline is reached
            self.t = max(self.t, deadline)

    def notify(self, cond: threading.Condition) -> None:
        pass


def test_human_reason_never_shows_urllib3() -> None:
    assert human_reason(MAX_RETRY) == "connection refused"
    assert human_reason(OvnError("cannot fetch OVN NB schema: Connection refused")) == (
        "connection refused"
    )
    assert human_reason(TimeoutError("read timed out")) == "timed out"


def test_backoff_until_reachable(caplog: pytest.LogCaptureFixture) -> None:
    clock = StepClock()
    failures = [MAX_RETRY, MAX_RETRY, OvnError("Connection refused")]

    def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "up"

    with caplog.at_level(logging.INFO, logger="controller.runtime.startup"):
        got = wait_until_reachable(
            "the API server", attempt, timeout=60, stop=threading.Event(), clock=clock
        )
    assert got == "up"
    assert clock.sleeps == [0.5, 1.0, 2.0]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == (
        "waiting for the API server: connection refused; retrying in 0.5s, giving up after 60s"
    )
    assert messages[-1] == "the API server is reachable"
    assert not any("MaxRetryError" in m or "urllib3" in m for m in messages)


def test_gives_up_after_the_timeout_with_one_sentence() -> None:
    clock = StepClock()

    def attempt() -> None:
        raise MAX_RETRY

    with pytest.raises(StartupError) as err:
        wait_until_reachable(
            "the API server", attempt, timeout=20, stop=threading.Event(), clock=clock
        )
    assert str(err.value) == (
        "the API server was unreachable for 20s (connection refused); check that it runs and "
        "that this address is right, or raise --ovn-timeout"
    )
    assert sum(clock.sleeps) == pytest.approx(20)
    assert max(clock.sleeps) <= 10.0


def test_other_errors_propagate_and_stop_returns_none() -> None:
    clock = StepClock()

    def forbidden() -> None:
        raise ForbiddenError(403, "Forbidden", "no")

    with pytest.raises(ForbiddenError):
        wait_until_reachable("x", forbidden, timeout=60, stop=threading.Event(), clock=clock)

    def down() -> None:
        raise OSError("[Errno 111] Connection refused")

    clock = StepClock(stop_after=2)
    assert wait_until_reachable("x", down, timeout=60, stop=threading.Event(), clock=clock) is None


def test_outage_tracker_measures_from_the_first_down_sample() -> None:
    clock = FakeClock(start=100.0)
    up = [True]
    tracker = OutageTracker(lambda: up[0], clock=clock)
    assert tracker.down_for() == 0.0
    up[0] = False
    assert tracker.sample() is False
    clock.step(42)
    assert tracker.down_for() == 42.0
    up[0] = True
    assert tracker.down_for() == 0.0


def test_stuck_worker_reads_the_longest_running_processor() -> None:
    registry = CollectorRegistry()
    clock = FakeClock()
    provider = PrometheusMetricsProvider(registry)
    queue = RateLimitingQueue[str](
        default_controller_rate_limiter(clock),
        name="AddPod",
        metrics_provider=provider,
        clock=clock,
    )
    other = RateLimitingQueue[str](
        default_controller_rate_limiter(clock),
        name="AddNode",
        metrics_provider=provider,
        clock=clock,
    )
    try:
        queue.add("ns/p")
        item, _ = queue.get()
        assert item is not None
        clock.step(400)
        # the queue's own loop (a thread) refreshes the gauge after the step
        wait_for(
            lambda: stuck_worker(registry, ["AddPod", "AddNode"])[1] >= 400,
            message="the unfinished-work gauge refreshed",
        )
        name, seconds = stuck_worker(registry, ["AddPod", "AddNode"])
        assert name == "AddPod"
        assert seconds == pytest.approx(400, abs=1)
        assert stuck_worker(registry, ["AddNode"]) == ("", 0.0)
        queue.done(item)
    finally:
        queue.shut_down()
        other.shut_down()
