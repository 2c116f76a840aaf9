"""Leader election over real HTTP against the API server emulator, on the real clock.

Short timings (lease 2 s, renew deadline 1.5 s, retry 0.2 s) keep each scenario to a few
seconds; every wait is a condition with a deadline. What took how long is read from the Lease the
electors wrote (its renew and acquire times), never from a stopwatch in the test: a hand-over
that must not wait out the lease runs with a lease far longer than the test's deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    lock_record_time,
)
from controller.runtime.locks import LeaseLock
from controller.sandbox.apiserver.server import ApiServer
from controller.testing.wait import wait_for

LEASE, RENEW, RETRY = 2.0, 1.5, 0.2
LONG_LEASE = 60.0  # a hand-over within a few seconds did not wait this out


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer() as srv:
        yield srv


class Replica:
    def __init__(
        self, server: ApiServer, identity: str, *, release: bool = True, lease: float = LEASE
    ) -> None:
        self.api = server.api_client()
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.stop = threading.Event()
        self.elector = LeaderElector(
            LeaderElectionConfig(
                lock=LeaseLock(
                    self.api,
                    "kube-system",
                    "kube-ovn-controller",
                    identity,
                    request_timeout=RENEW / 2,
                ),
                callbacks=LeaderCallbacks(lambda lost: self.started.set(), self.stopped.set),
                lease_duration=lease,
                renew_deadline=RENEW,
                retry_period=RETRY,
                release_on_cancel=release,
                name="kube-ovn-controller",
            )
        )
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.api.close()


def lease_spec(server: ApiServer) -> dict[str, Any]:
    spec: dict[str, Any] = server.store.get("leases", "kube-system", "kube-ovn-controller")["spec"]
    return spec


class Monitor:
    """Samples both replicas' is_leader() continuously; records any overlap."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self.overlaps = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if sum(r.elector.is_leader() for r in self.replicas) > 1:
                self.overlaps += 1
            self.samples += 1
            self._stop.wait(0.005)  # sampling pace; returns at once on close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def a_leads_then_b_follows(a: Replica, b: Replica) -> None:
    """Start `a` until it leads, then `b` until it has seen `a` as the leader."""
    a.thread.start()
    assert a.started.wait(5)
    b.thread.start()
    wait_for(lambda: b.elector.get_leader() == "a")


def test_one_leader_and_release_hands_over_at_once(server: ApiServer) -> None:
    a = Replica(server, "a", lease=LONG_LEASE)
    b = Replica(server, "b", lease=LONG_LEASE)
    monitor = Monitor([a, b])
    try:
        a_leads_then_b_follows(a, b)
        spec = lease_spec(server)
        assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == LONG_LEASE
        assert spec["renewTime"].endswith("Z") and len(spec["renewTime"]) == 27
        a.stop.set()
        # b takes the released lease on its next poll: it cannot have waited out a 60 s lease
        assert b.started.wait(5)
        assert a.stopped.is_set() and b.elector.is_leader()
        assert lease_spec(server)["leaseTransitions"] == 1
    finally:
        monitor.close()
        a.close()
        b.close()
    assert monitor.overlaps == 0 and monitor.samples > 10


def test_killed_leader_is_replaced_within_the_lease_duration(server: ApiServer) -> None:
    a, b = Replica(server, "a", release=False), Replica(server, "b")
    monitor = Monitor([a, b])
    try:
        a_leads_then_b_follows(a, b)
        a.stop.set()  # dies without releasing
        a.thread.join(5)
        last = lease_spec(server)
        assert last["holderIdentity"] == "a"
        assert b.started.wait(LEASE + 2.2 * RETRY + 2)
        taken = lease_spec(server)
        assert taken["holderIdentity"] == "b"
        # b waited the lease out from a's last renewal (as the Lease records them) before taking it
        renewed, acquired = (
            lock_record_time(last["renewTime"]),
            lock_record_time(taken["acquireTime"]),
        )
        assert renewed is not None and acquired is not None
        assert (acquired - renewed).total_seconds() >= LEASE
    finally:
        monitor.close()
        a.close()
        b.close()
    assert monitor.overlaps == 0


def test_leader_losing_the_api_server_steps_down(server: ApiServer) -> None:
    a = Replica(server, "a")
    try:
        a.thread.start()
        assert a.started.wait(5)
        server.faults.fail_next(None, 500, resource="leases")
        assert a.stopped.wait(RENEW + 2)
        assert not a.elector.is_leader()
    finally:
        server.faults.clear()
        a.close()
