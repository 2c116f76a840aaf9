"""The routing backstop check of the e2e and fault tiers: once a test is over, the routing
garbage collector of every controller it ran has found nothing to remove.

The routing reconciler keeps the router policies, address sets and NAT rules converged from
the events alone; gc's routing pass (`RoutingReconciler.backstop`) diffs every key again and
counts what it has to remove in `kube_ovn_controller_gc_deleted_total` (`router_policy`,
`address_set_entry`, `address_set`), logging it as `routing gc found drift`. In a test that
does not corrupt routing rows on purpose, that count is zero.

* `launch_controller` (tests/e2e/conftest.py) records every in-process controller (`record`).
  `start_controller` judges its controllers before it stops them (`check_controllers`); an
  autouse fixture judges, after each test, every recorded controller not judged yet
  (`check_launched`: one a test stopped itself, or a module-scoped one, judged after each
  test of its module).
* `check_controller(ctl)`: what its periodic routing gc passes removed since the last check
  must be zero; and when `ctl` still leads, its work queues are waited on until idle (a
  deadline, not a sleep) and one more routing gc pass runs, which must remove nothing.
* The start-up pass is not judged: it is the reconciler's first full pass, and what it
  removes is what changed while no controller ran or what a stopped (or killed) one left
  queued, which no event can tell a new leader. Its count is taken as the baseline the moment
  the controller's workers start (the start-up gc has run by then, the first periodic pass
  comes one `--gc-interval` later).
* `check_process`: a child process (`controller_process`, tests/faults/conftest.py, gives each
  its own metrics port) cannot be asked for a pass: its counters (every pass it ran, the
  start-up one included: the tests start children on a fresh NB) are read from `/metrics`
  before it is killed.
* A test that corrupts routing rows itself (a fault, a drift scenario) carries
  `@pytest.mark.routing_drift_expected("why")`: its controllers are not judged (their counts
  become the baseline of the next test).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from controller.app import Controller
from controller.ovn.api import OvnError
from controller.testing import wait as waiting
from tests.e2e.helpers import http_get

MARKER = "routing_drift_expected"
METRIC = "kube_ovn_controller_gc_deleted_total"
RESOURCES = ("router_policy", "address_set_entry", "address_set")
#: How long the work queues may take to go idle before the teardown pass runs anyway.
SETTLE_TIMEOUT = 15.0
DRIFT_LOGGER = "controller.routing.reconciler"
DRIFT_MESSAGE = "routing gc found drift"


class _DriftLog(logging.Handler):
    """Keeps the `routing gc found drift` warnings of the in-process controllers (to say what
    was found, not only how much)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a log call's bad arguments are not this check's business
            return
        if message.startswith(DRIFT_MESSAGE):
            self.lines.append(f"[{record.threadName}] {message}")

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


DRIFT_LOG = _DriftLog()
logging.getLogger(DRIFT_LOGGER).addHandler(DRIFT_LOG)


@dataclass
class Tracker:
    """The controllers launched in-process, and what was judged of each one's counters."""

    launched: list[Controller] = field(default_factory=list)
    judged: weakref.WeakKeyDictionary[Controller, float] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # the count once the workers started (the start-up pass's removals are not judged)
    started: weakref.WeakKeyDictionary[Controller, float] = field(
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
            TRACKER.started[c] = routing_deleted(c.registry)

    threading.Thread(target=baseline, name="routing-backstop-baseline", daemon=True).start()
    return ctl


def routing_deleted(registry: CollectorRegistry) -> float:
    """What routing gc removed so far (policies + set entries + sets)."""
    return sum(registry.get_sample_value(METRIC, {"resource": r}) or 0.0 for r in RESOURCES)


def routing_deleted_text(metrics: str) -> float:
    """`routing_deleted` from a `/metrics` exposition."""
    total = 0.0
    for line in metrics.splitlines():
        if not line.startswith(METRIC + "{"):
            continue
        labels, _, value = line.rpartition(" ")
        if any(f'resource="{r}"' in labels for r in RESOURCES):
            total += float(value)
    return total


def _idle(ctl: Controller) -> bool:
    return all(q.idle() for q in ctl._queues)


def settle(ctl: Controller, timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait until every work queue of `ctl` is idle twice in a row; False at the deadline."""
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
    removed since the last check, one line per finding (empty: nothing)."""
    base = max(TRACKER.judged.get(ctl, 0.0), TRACKER.started.get(ctl, 0.0))
    during = routing_deleted(ctl.registry) - base
    problems: list[str] = []
    if judge and during:
        problems.append(f"routing gc passes removed {during:g} row(s) during the test")
    if judge and _leads(ctl):
        settled = settle(ctl)
        before = routing_deleted(ctl.registry)
        try:
            found = ctl.gc.gc_routing()
        except OvnError as exc:  # the test took the NB away: nothing to judge by
            found = []
            logging.getLogger(__name__).info("teardown routing gc pass not run: %s", exc)
        removed = routing_deleted(ctl.registry) - before
        if removed:
            busy = "" if settled else " (its work queues were still busy)"
            problems.append(
                f"the teardown routing gc pass removed {removed:g} row(s){busy}: "
                + "; ".join(found)
            )
    TRACKER.judged[ctl] = routing_deleted(ctl.registry)
    return problems


def check_process(identity: str, url: str, *, judge: bool) -> list[str]:
    """What routing gc removed in a child process so far, read from its `/metrics`."""
    try:
        status, body = http_get(url)
    except OSError:
        return []  # killed or stopped by the test: nothing to read
    removed = routing_deleted_text(body) if status == 200 else 0.0
    if judge and removed:
        return [f"process {identity}: routing gc passes removed {removed:g} row(s) ({url})"]
    return []


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
