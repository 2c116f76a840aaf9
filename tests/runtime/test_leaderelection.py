from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
)
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock
from tests.runtime.lease_fakes import FakeLock, LeaseServer


class Candidate:
    def __init__(
        self,
        server: LeaseServer,
        identity: str,
        clock: FakeClock,
        seed: int,
        *,
        lock: FakeLock | None = None,
        **config: Any,
    ) -> None:
        self.lock = lock if lock is not None else FakeLock(server, identity)
        self.started = threading.Event()
        self.lost: threading.Event | None = None
        self.stopped = threading.Event()
        self.new_leaders: list[str] = []
        self.stop = threading.Event()

        def on_started(lost: threading.Event) -> None:
            self.lost = lost
            self.started.set()

        self.elector = LeaderElector(
            LeaderElectionConfig(
                lock=self.lock,
                callbacks=LeaderCallbacks(on_started, self.stopped.set, self.new_leaders.append),
                **config,
            ),
            clock=clock,
            rng=random.Random(seed),
        )
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)

    def kill(self) -> None:
        """The process dies: no more API calls, no release."""
        self.lock.partitioned = True
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server() -> LeaseServer:
    return LeaseServer()


# kube-ovn v1.12+'s timings (the generic behaviour is the same for v1.8's 15/10/2, the default)
KUBE_OVN_V112: dict[str, Any] = {
    "lease_duration": 30.0,
    "renew_deadline": 20.0,
    "retry_period": 6.0,
}


@pytest.fixture
def candidates(server: LeaseServer, clock: FakeClock) -> Iterator[list[Candidate]]:
    made = [
        Candidate(server, name, clock, seed, **KUBE_OVN_V112)
        for seed, name in enumerate(["a", "b"])
    ]
    yield made
    for c in made:
        c.stop.set()
    for c in made:
        if c.thread.is_alive():
            c.thread.join(5)


def settle(clock: FakeClock, parked: int) -> None:
    """Wait until `parked` sleeps are blocked on the clock (nothing else in flight)."""
    wait_for(lambda: clock.waiters() == parked, message=f"{parked} loops parked")


def sleepers(*cands: Candidate) -> int:
    """The sleeps the running candidates park on the clock: a leader's renewal loop and its
    watchdog, a follower's acquire loop."""
    return sum(
        (2 if c.started.is_set() and not c.stopped.is_set() else 1)
        for c in cands
        if c.thread.is_alive()
    )


def run_for(
    clock: FakeClock, seconds: float, parked: int, step: float = 0.5, check: Any = None
) -> None:
    t = 0.0
    while t < seconds:
        clock.step(step)
        t += step
        settle(clock, parked)
        if check is not None:
            check()


def a_leads_then_b_follows(a: Candidate, b: Candidate, clock: FakeClock) -> None:
    """Start `a` until it leads, then `b`, until both loops are parked on the clock."""
    a.thread.start()
    assert a.started.wait(5)
    b.thread.start()
    settle(clock, 3)


def test_config_validation_uses_client_go_messages(server: LeaseServer) -> None:
    cb = LeaderCallbacks(lambda e: None, lambda: None)
    lock = FakeLock(server, "a")
    with pytest.raises(ValueError, match="leaseDuration must be greater than renewDeadline"):
        LeaderElectionConfig(lock=lock, callbacks=cb, lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renewDeadline must be greater than retryPeriod"):
        LeaderElectionConfig(lock=lock, callbacks=cb, renew_deadline=7, retry_period=6)
    with pytest.raises(ValueError, match="Lock identity is empty"):
        LeaderElectionConfig(lock=FakeLock(server, ""), callbacks=cb)
    with pytest.raises(ValueError, match="maxHold must be greater than retryPeriod"):
        LeaderElectionConfig(lock=lock, callbacks=cb, max_hold=2)
    # kube-ovn v1.8.18's (client-go's) timings; the leader holds 2 + 10 s after its last write
    defaults = LeaderElectionConfig(lock=lock, callbacks=cb)
    assert (defaults.lease_duration, defaults.renew_deadline, defaults.retry_period) == (15, 10, 2)
    assert defaults.hold == 12
    assert LeaderElectionConfig(lock=lock, callbacks=cb, max_hold=11).hold == 11


def test_first_candidate_acquires_and_the_other_follows(
    candidates: list[Candidate], clock: FakeClock, server: LeaseServer
) -> None:
    a, b = candidates
    a.thread.start()
    assert a.started.wait(5)
    assert a.elector.is_leader()
    record = server.record
    assert record is not None and record.holder_identity == "a"
    assert record.lease_duration_seconds == 30 and record.leader_transitions == 0
    b.thread.start()
    settle(clock, 3)
    assert not b.elector.is_leader() and b.elector.get_leader() == "a"
    run_for(clock, 60, parked=3)
    assert a.elector.is_leader() and not b.started.is_set()
    wait_for(lambda: b.new_leaders == ["a"] and a.new_leaders == ["a"])


def test_release_on_stop_lets_the_follower_take_over_at_once(
    candidates: list[Candidate], clock: FakeClock, server: LeaseServer
) -> None:
    a, b = candidates
    a_leads_then_b_follows(a, b, clock)
    a.stop.set()
    a.thread.join(5)
    assert a.stopped.is_set() and a.lost is not None and a.lost.is_set()
    assert not a.elector.is_leader()
    assert server.record is not None and server.record.holder_identity == ""
    # b's next poll (at most 2.2 retry periods away) takes the released lease.
    t = 0.0
    while t < 13.5:
        clock.step(0.5)
        t += 0.5
        wait_for(lambda: clock.waiters() == sleepers(a, b), message="loops parked")
    wait_for(b.started.is_set)
    assert server.record.holder_identity == "b" and server.record.leader_transitions == 1


def test_killed_leader_is_replaced_after_the_lease_expires_never_both(
    candidates: list[Candidate], clock: FakeClock, server: LeaseServer
) -> None:
    a, b = candidates
    a_leads_then_b_follows(a, b, clock)
    run_for(clock, 10, parked=3)
    a.kill()
    killed_at = clock.now()
    assert a.stopped.is_set()
    assert server.record is not None and server.record.holder_identity == "a"

    def never_both() -> None:
        assert not (a.elector.is_leader() and b.elector.is_leader())

    while not b.started.is_set():
        clock.step(0.5)
        wait_for(lambda: clock.waiters() == 1 or b.started.is_set())
        never_both()
        assert clock.now() - killed_at <= 30 + 2.2 * 6, "not replaced in time"
    # b waited for the full lease: a's last renewal happened at most one retry period before.
    assert clock.now() - killed_at >= 30 - 6
    wait_for(b.elector.is_leader)
    assert server.record.holder_identity == "b" and server.record.leader_transitions == 1


def test_partitioned_leader_steps_down_before_anyone_else_leads(
    candidates: list[Candidate], clock: FakeClock, server: LeaseServer
) -> None:
    a, b = candidates
    a_leads_then_b_follows(a, b, clock)
    run_for(clock, 10, parked=3)
    a.lock.partitioned = True  # a keeps running but can no longer reach the API server

    def parked() -> bool:
        return clock.waiters() == sleepers(a, b)

    while not b.started.is_set():
        clock.step(0.25)
        wait_for(lambda: parked() or b.started.is_set())
        assert not (a.elector.is_leader() and b.elector.is_leader()), clock.now()
        assert clock.now() < 1000 + 120, "b never took over"
    assert a.stopped.is_set() and a.lost is not None and a.lost.is_set()
    wait_for(b.elector.is_leader)
    assert not a.elector.is_leader()


def test_leader_that_cannot_renew_steps_down_within_the_renew_deadline(
    candidates: list[Candidate], clock: FakeClock
) -> None:
    a, _ = candidates
    a.thread.start()
    assert a.started.wait(5)
    settle(clock, 2)
    a.lock.partitioned = True
    lost_at = None
    for _ in range(100):
        clock.step(0.5)
        wait_for(lambda: clock.waiters() == 2 or a.stopped.is_set())
        if a.stopped.is_set():
            lost_at = clock.now()
            break
    assert lost_at is not None
    assert a.lost is not None and a.lost.is_set()
    assert not a.elector.is_leader()
    # stepped down after renew_deadline (20 s) of failures, well before the lease (30 s) ends
    assert lost_at - 1000.0 <= 6 + 20 + 0.5


def test_conflicting_write_falls_back_to_the_slow_path(
    server: LeaseServer, clock: FakeClock
) -> None:
    c = Candidate(server, "a", clock, 0)
    assert c.elector.try_acquire_or_renew()
    other = FakeLock(server, "a")  # the same identity writing from elsewhere bumps the RV
    other.get()
    record = server.record
    assert record is not None
    other.update(record)
    assert c.elector.try_acquire_or_renew()  # 409 on the fast path, then get + update
    assert server.record is not None and server.record.holder_identity == "a"


def test_run_without_ever_leading_still_calls_on_stopped_leading(
    candidates: list[Candidate], clock: FakeClock
) -> None:
    a, b = candidates
    a_leads_then_b_follows(a, b, clock)
    b.stop.set()
    b.thread.join(5)
    assert b.stopped.is_set() and not b.started.is_set()


class HangingLock(FakeLock):
    """Its writes block while `hang` is set, like a request to a server that stopped answering."""

    def __init__(self, server: LeaseServer, identity: str) -> None:
        super().__init__(server, identity)
        self.hang = False
        self.hanging = threading.Event()
        self.release_writes = threading.Event()

    def update(self, record: Any) -> None:
        if self.hang:
            self.hanging.set()
            self.release_writes.wait(10)
        super().update(record)


def test_a_hanging_renewal_cannot_keep_the_leadership_past_the_hold(
    server: LeaseServer, clock: FakeClock
) -> None:
    # the hold ends the leadership on the clock, not when the hanging request returns
    lock = HangingLock(server, "a")
    c = Candidate(server, "a", clock, 0, lock=lock)  # kube-ovn v1.8's timings: a 12 s hold
    c.thread.start()
    assert c.started.wait(5)
    settle(clock, 2)  # the renewal loop and the watchdog
    took = clock.now()
    lock.hang = True
    clock.step(2.0)  # the next renewal starts and hangs
    assert lock.hanging.wait(5)
    while not c.stopped.is_set():
        clock.step(0.5)
        wait_for(lambda: clock.waiters() == 1 or c.stopped.is_set())
        assert clock.now() - took <= 12.0 + 0.5, "still leading after the hold"
    assert c.lost is not None and c.lost.is_set() and not c.elector.is_leader()
    lock.hang = False
    lock.release_writes.set()  # the hung write lands late: it never revives the leadership
    c.stop.set()
    c.thread.join(5)
    assert not c.elector.is_leader() and not c.thread.is_alive()
