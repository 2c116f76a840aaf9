"""`workloads.quiet`, the e2e tests' "the controller has acted on everything it was told": an
item a worker holds is work still owed, though it is no longer in the queue's length. The
interleaving is forced: the handler blocks until the test releases it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.runtime.worker import start_workers
from controller.testing.wait import WaitTimeout
from tests.e2e.helpers import wait_for
from tests.e2e.workloads import quiet

pytestmark = pytest.mark.e2e


@dataclass
class Pods:
    def pending_deletes(self) -> dict[str, object]:
        return {}


@dataclass
class Ctl:
    """The two things `quiet` reads of a `Controller`: its queues and the deferred deletes."""

    queues: list[RateLimitingQueue[str]] = field(default_factory=list)
    pod_controller: Pods = field(default_factory=Pods)

    def work_queues(self) -> tuple[RateLimitingQueue[str], ...]:
        return tuple(self.queues)


def test_quiet_waits_for_the_item_a_worker_is_handling() -> None:
    queue = RateLimitingQueue[str](default_controller_rate_limiter(), name=None)
    ctl = Ctl([queue])
    release = threading.Event()
    handled: list[str] = []
    handler_entered = threading.Event()

    def handler(key: str) -> None:
        handler_entered.set()
        assert release.wait(30), "the test never released the handler"
        handled.append(key)

    stop = threading.Event()
    threads = start_workers([(queue, handler, 1)], stop)
    try:
        queue.add("default/p")
        wait_for(handler_entered.is_set, message="the worker holds the item")
        # what a length-only check concluded here: nothing queued, so done; the handler is not
        assert all(len(q) == 0 for q in ctl.work_queues()) and handled == []
        with pytest.raises(WaitTimeout):
            quiet(ctl, timeout=0.3)  # type: ignore[arg-type]  # a stand-in for the Controller
        release.set()
        quiet(ctl)  # type: ignore[arg-type]  # a stand-in for the Controller
        assert handled == ["default/p"]
    finally:
        release.set()
        stop.set()
        queue.shut_down()
        for thread in threads:
            thread.join(5)
