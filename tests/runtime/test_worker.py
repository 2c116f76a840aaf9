"""The worker's error policy: forget on success and on permanent errors, backoff otherwise."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from controller.core.errors import InvalidPodNetworkError, RetryableError
from controller.ovn.api import OvnTimeoutError
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.runtime.worker import process_next_work_item, run_worker
from controller.testing.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> Iterator[RateLimitingQueue[str]]:
    q = RateLimitingQueue[str](default_controller_rate_limiter(clock), name="T", clock=clock)
    yield q
    q.shut_down()


class Flaky:
    """Fails with the given errors in turn, then succeeds; records what it saw."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.seen: list[str] = []

    def __call__(self, key: str) -> None:
        self.seen.append(key)
        if self.errors:
            raise self.errors.pop(0)


def test_success_forgets(queue: RateLimitingQueue[str]) -> None:
    handler = Flaky()
    queue.add("a")
    assert process_next_work_item(queue, handler, name="T")
    assert handler.seen == ["a"] and queue.num_requeues("a") == 0
    assert len(queue) == 0 and queue.pending() == 0


def test_transient_error_backs_off_then_success_forgets(
    queue: RateLimitingQueue[str], clock: FakeClock
) -> None:
    handler = Flaky(OvnTimeoutError("nb down"), OvnTimeoutError("nb down"))
    failures: list[tuple[str, str]] = []
    queue.add("a")
    process_next_work_item(
        queue, handler, name="T", on_error=lambda k, e: failures.append((k, str(e)))
    )
    assert queue.num_requeues("a") == 1 and len(queue) == 0 and queue.pending() == 1
    clock.step(0.005)  # 5 ms: first backoff
    assert len(queue) == 1
    process_next_work_item(queue, handler, name="T")
    assert queue.num_requeues("a") == 2
    clock.step(0.009)
    assert len(queue) == 0  # second backoff is 10 ms
    clock.step(0.001)
    process_next_work_item(queue, handler, name="T")
    assert handler.seen == ["a", "a", "a"]
    assert queue.num_requeues("a") == 0
    assert failures == [("a", "nb down")]


def test_permanent_error_is_forgotten(queue: RateLimitingQueue[str]) -> None:
    handler = Flaky(InvalidPodNetworkError("bad annotation"))
    queue.add("a")
    process_next_work_item(queue, handler, name="T")
    assert queue.num_requeues("a") == 0 and queue.pending() == 0 and len(queue) == 0


def test_retryable_error_with_delay(queue: RateLimitingQueue[str], clock: FakeClock) -> None:
    handler = Flaky(RetryableError("later", delay=7))
    queue.add("a")
    process_next_work_item(queue, handler, name="T")
    clock.step(6.9)
    assert len(queue) == 0
    clock.step(0.1)
    assert len(queue) == 1


def test_a_bug_is_requeued_and_logged_with_traceback(
    queue: RateLimitingQueue[str], caplog: pytest.LogCaptureFixture
) -> None:
    handler = Flaky(KeyError("oops"))
    queue.add("a")
    with caplog.at_level(logging.INFO, logger="controller.runtime.worker"):
        process_next_work_item(queue, handler, name="AddPod")
    assert queue.num_requeues("a") == 1
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None
    assert any("take" in r.getMessage() and "AddPod a" in r.getMessage() for r in caplog.records)


def test_run_worker_returns_on_shutdown(queue: RateLimitingQueue[str]) -> None:
    handler = Flaky()
    stop = threading.Event()
    queue.add("a")
    queue.add("b")
    queue.shut_down_with_drain()  # the items already queued are still processed
    run_worker(queue, handler, name="T", stop=stop)
    assert handler.seen == ["a", "b"]


def test_shutdown_returns_false(queue: RateLimitingQueue[str]) -> None:
    queue.shut_down()
    assert not process_next_work_item(queue, Flaky(), name="T")


def test_a_handled_item_is_logged_at_the_level_asked(
    queue: RateLimitingQueue[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controller.runtime.worker")
    queue.add("a")
    process_next_work_item(queue, lambda _: None, name="q", done_level=logging.DEBUG)
    assert not [r for r in caplog.records if "take" in r.getMessage()]
    queue.add("b")
    process_next_work_item(queue, lambda _: None, name="q")
    assert [r.levelno for r in caplog.records if "take" in r.getMessage()] == [logging.INFO]
