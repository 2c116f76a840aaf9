"""The routing backstop check of the e2e and fault tiers: once a test is over, the routing
garbage collector of every controller it ran has found nothing to remove and nothing to add.

The routing reconciler keeps the router policies, address sets and NAT rules converged from
the events alone; gc's routing pass (`RoutingReconciler.backstop`) diffs every key again and
counts what it has to remove in `kube_ovn_controller_gc_deleted_total` (`router_policy`,
`address_set_entry`, `address_set`), logging it as `routing gc found drift`, and what it has
to write in `kube_ovn_controller_gc_added_total` (`router_policy`, `address_set_entry`,
`nat_rule`), logging it as `routing gc wrote missing rows`. In a test that does not corrupt
routing rows on purpose, both counts are zero.

* `launch_controller` (tests/e2e/conftest.py) records every in-process controller (`record`).
  `start_controller` judges its controllers before it stops them (`check_controllers`); an
  autouse fixture judges, after each test, every recorded controller not judged yet
  (`check_launched`: one a test stopped itself, or a module-scoped one, judged after each
  test of its module).
* `check_controller(ctl)`: what its periodic routing gc passes removed or added since the last
  check must be zero; and when `ctl` still leads, its work queues are waited on until idle (a
  deadline, not a sleep; neither the retries of a key that keeps failing nor the delayed
  wake-up of a pod delete already done are waited for) and one more routing gc pass runs,
  which must remove and add nothing.
* The start-up pass is not judged: it is the reconciler's first full pass, and what it
  changes is what changed while no controller ran or what a stopped (or killed) one left
  queued, which no event can tell a new leader. Its removals are taken as the baseline the
  moment the controller's workers start (the start-up gc has run by then, the first periodic
  pass comes one `--gc-interval` later); its additions are not counted by the controller.
* `check_process`: a child process (`controller_process`, tests/faults/conftest.py, gives each
  its own metrics port) cannot be asked for a pass: its counters (every pass it ran: the tests
  start children on a fresh NB, so the start-up pass removes nothing) are read from `/metrics`
  before it is killed.
* A test that corrupts routing rows itself (a fault, a drift scenario) carries
  `@pytest.mark.routing_drift_expected("why")`: its controllers are not judged (their counts
  become the baseline of the next test).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from controller.app import Controller
from controller.ovn.api import OvnError
from controller.queues import Queue, RateLimitingQueue
from controller.testing import wait as waiting
from tests.e2e.helpers import http_get

MARKER = "routing_drift_expected"
METRIC = "kube_ovn_controller_gc_deleted_total"
RESOURCES = ("router_policy", "address_set_entry", "address_set")
ADDED_METRIC = "kube_ovn_controller_gc_added_total"
ADDED_RESOURCES = ("router_policy", "address_set_entry", "nat_rule")
#: How long the work queues may take to go idle before the teardown pass runs anyway.
SETTLE_TIMEOUT = 15.0
#: Failures in a row after which a key's pending retry no longer counts as work to wait for:
#: with the controllers' exponential backoff (5 ms, doubling) that is over 0.6 s of failing,
#: and the next retry is at least 0.64 s away when the 8th failure is counted.
PERSISTENT_FAILURES = 8
DRIFT_LOGGER = "controller.routing.reconciler"
DRIFT_MESSAGE = "routing gc found drift"
ADDED_MESSAGE = "routing gc wrote missing rows"


class _DriftLog(logging.Handler):
    """Keeps the `routing gc found drift` warnings and `routing gc wrote missing rows` lines
    of the in-process controllers (to say what was found, not only how much)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a log call's bad arguments are not this check's business
            return
        if message.startswith((DRIFT_MESSAGE, ADDED_MESSAGE)):
            self.lines.append(f"[{record.threadName}] {message}")

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


DRIFT_LOG = _DriftLog()
_drift_logger = logging.getLogger(DRIFT_LOGGER)
_drift_logger.addHandler(DRIFT_LOG)
if _drift_logger.getEffectiveLevel() > logging.INFO:
    _drift_logger.setLevel(logging.INFO)  # the "wrote missing rows" lines are INFO


@dataclass(frozen=True)
class Counts:
    """What routing gc removed and added so far (rows)."""

    removed: float = 0.0
    added: float = 0.0

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.removed - other.removed, self.added - other.added)

    def at_least(self, other: Counts) -> Counts:
        return Counts(max(self.removed, other.removed), max(self.added, other.added))


@dataclass
class Tracker:
    """The controllers launched in-process, and what was judged of each one's counters."""

    launched: list[Controller] = field(default_factory=list)
    judged: weakref.WeakKeyDictionary[Controller, Counts] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # the counts once the workers started (the start-up pass's removals are not judged)
    started: weakref.WeakKeyDictionary[Controller, Counts] = field(
        default_factory=weakref.WeakKeyDictionary
    )


TRACKER = Tracker()


def record(ctl: Controller) -> Controller:
    """Track `ctl`; its start-up pass's count becomes its baseline when its workers start."""
    TRACKER.launched.append(ctl)
    ref = weakref.ref(ctl)
    started = ctl.workers_started

    def baseline() -> None:
        while not started.wait(0.5):
            c = ref()
            if c is None or c.exit_code is not None:
                return
        c = ref()
        if c is not None:
            TRACKER.started[c] = routing_counts(c.registry)

    threading.Thread(target=baseline, name="routing-backstop-baseline", daemon=True).start()
    return ctl


def routing_counts(registry: CollectorRegistry) -> Counts:
    """What routing gc removed (policies + set entries + sets) and added (policies + set
    entries + NAT rules) so far."""

    def total(metric: str, resources: Iterable[str]) -> float:
        return sum(registry.get_sample_value(metric, {"resource": r}) or 0.0 for r in resources)

    return Counts(total(METRIC, RESOURCES), total(ADDED_METRIC, ADDED_RESOURCES))


def routing_counts_text(metrics: str) -> Counts:
    """`routing_counts` from a `/metrics` exposition."""

    def total(metric: str, resources: Iterable[str]) -> float:
        out = 0.0
        for line in metrics.splitlines():
            if not line.startswith(metric + "{"):
                continue
            labels, _, value = line.rpartition(" ")
            if any(f'resource="{r}"' in labels for r in resources):
                out += float(value)
        return out

    return Counts(total(METRIC, RESOURCES), total(ADDED_METRIC, ADDED_RESOURCES))


def _rows(what: str, counts: Counts) -> list[str]:
    """ "<what> removed N row(s)" / "<what> added N row(s)", for the counts that are not 0."""
    out = []
    if counts.removed:
        out.append(f"{what} removed {counts.removed:g} row(s)")
    if counts.added:
        out.append(f"{what} added {counts.added:g} row(s)")
    return out


def _quiet(queue: RateLimitingQueue[str], stale: Callable[[list[str]], set[str]]) -> bool:
    """Nothing queued or in a worker's hands, and every entry that waits for its ready time
    waits for nothing: the retry of a key that failed `PERSISTENT_FAILURES` times in a row, or
    one of the `stale(waiting)` keys (a wake-up whose work is already done). A key that keeps
    failing (a pod the controller refuses, a subnet it cannot build) is retried forever with a
    backoff that grows towards minutes, so its queue is never idle: waiting for that ends only at
    the deadline, and the teardown pass then meets the same pending entry anyway. Work scheduled
    for later (a grace period still running, a status refresh) and the first retries of a
    transient failure are still waited for."""
    if queue.idle():
        return True
    if not Queue.idle(queue):  # the base check: no item queued, none being processed
        return False
    waiting = queue.waiting()
    done = stale(waiting)
    return all(k in done or queue.num_requeues(k) >= PERSISTENT_FAILURES for k in waiting)


def _idle(ctl: Controller) -> bool:
    pods = ctl.pod_controller
    delete_queue = ctl.pod_queues.delete if pods is not None else None

    def nothing(_: list[str]) -> set[str]:
        return set()

    def cleaned_up(waiting: list[str]) -> set[str]:
        # read after `waiting`: a delete queued meanwhile is in the map, so it is waited for
        assert pods is not None
        deleting = pods.pending_deletes()
        # a delayed wake-up of a pod already cleaned up (removed within its grace period): the
        # delete handler returns at once for a key the deleting map no longer holds
        return {k for k in waiting if k not in deleting}

    return all(_quiet(q, cleaned_up if q is delete_queue else nothing) for q in ctl.work_queues())


def settle(ctl: Controller, timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait until every work queue of `ctl` is quiet (`_quiet`) twice in a row; False at the
    deadline."""
    streak = 0

    def idle_twice() -> bool:
        nonlocal streak
        streak = streak + 1 if _idle(ctl) else 0
        return streak >= 2

    try:
        waiting.wait_for(idle_twice, timeout, "the work queues idle", interval=0.05)
    except waiting.WaitTimeout:
        return False
    return True


def _leads(ctl: Controller) -> bool:
    return ctl.exit_code is None and ctl.is_leader() and ctl.workers_started.is_set()


def check_controller(ctl: Controller, *, judge: bool) -> list[str]:
    """Run the teardown pass of `ctl` (if it still leads) and return what its routing gc
    removed or added since the last check, one line per finding (empty: nothing)."""
    base = TRACKER.judged.get(ctl, Counts()).at_least(TRACKER.started.get(ctl, Counts()))
    during = routing_counts(ctl.registry) - base
    problems: list[str] = []
    if judge:
        problems += [f"{p} during the test" for p in _rows("routing gc passes", during)]
    if judge and _leads(ctl):
        settled = settle(ctl)
        before = routing_counts(ctl.registry)
        try:
            found = ctl.gc.gc_routing()
        except OvnError as exc:  # the test took the NB away: nothing to judge by
            found = []
            logging.getLogger(__name__).info("teardown routing gc pass not run: %s", exc)
        busy = "" if settled else " (its work queues were still busy)"
        problems += [
            f"{p}{busy}: " + "; ".join(found)
            for p in _rows("the teardown routing gc pass", routing_counts(ctl.registry) - before)
        ]
    TRACKER.judged[ctl] = routing_counts(ctl.registry)
    return problems


def check_process(identity: str, url: str, *, judge: bool) -> list[str]:
    """What routing gc removed or added in a child process so far, read from its `/metrics`."""
    try:
        status, body = http_get(url)
    except OSError:
        return []  # killed or stopped by the test: nothing to read
    counts = routing_counts_text(body) if status == 200 else Counts()
    if not judge:
        return []
    return [f"process {identity}: {p} ({url})" for p in _rows("routing gc passes", counts)]


def judged(request: pytest.FixtureRequest) -> bool:
    """False for a test marked `routing_drift_expected` (it corrupts routing rows itself)."""
    return request.node.get_closest_marker(MARKER) is None


def fail_on(problems: list[str]) -> None:
    """Fail the test with `problems` and the drift the controllers logged meanwhile."""
    drift = DRIFT_LOG.take()
    if problems:
        pytest.fail(
            "routing gc is a backstop that should find nothing once routing converged:\n  "
            + "\n  ".join(problems + drift),
            pytrace=False,
        )


def check_controllers(request: pytest.FixtureRequest, controllers: Iterable[Controller]) -> None:
    """Judge `controllers` for the test of `request`; fails the test with every finding."""
    judge = judged(request)
    problems: list[str] = []
    for ctl in controllers:
        name = ctl.config.pod_name or "controller"
        problems += [f"{name}: {p}" for p in check_controller(ctl, judge=judge)]
    fail_on(problems)


def check_launched(request: pytest.FixtureRequest) -> None:
    """Judge every controller launched and not yet judged for good, then forget those that no
    longer run (a module-scoped one is judged again after the next test)."""
    try:
        check_controllers(request, list(TRACKER.launched))
    finally:
        TRACKER.launched[:] = [c for c in TRACKER.launched if c.exit_code is None]
