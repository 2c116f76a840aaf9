"""No instant with two leaders beside kube-ovn-controller v1.8 and v1.12+ candidates.

A deterministic simulation on one fake clock: this controller's real `LeaderElector` on the real
`BothLocks` (Lease + kube-ovn v1.8's ConfigMap), driven at the times its renewal loop tries, against
models of client-go's acquire/renew as each generation runs it:

* kube-ovn v1.8.18 (pkg/controller/election.go, client-go v0.20.4): ConfigMap lock, 15 s lease,
  10 s renew deadline, 2 s retry; a record is expired once it has not changed for the
  candidate's *configured* 15 s (observed by its own clock), whatever leaseDurationSeconds says;
* kube-ovn v1.12.0 (cmd/controller/controller.go, client-go v0.27.4): Lease lock, 30/20/6, the
  same rule with its 30 s;
* newer client-go (isLeaseValid): the Lease, the record's own leaseDurationSeconds.

Each candidate polls at its retry period from every phase tried, and also every 0.1 s (the
worst case: it sees each change, and each expiry, at once). Our renewals fail in every pattern
enumerated: the Lease write, the ConfigMap write or both, refused or applied with the answer
lost, starting at several rounds, for one to several rounds or for good, with requests that take
up to 1.5 s. At no 0.1 s tick do ours (`is_leader()`, which the watchdog turns into `lost` at the
same instant) and any candidate lead together (kube-ovn's generations among themselves share no
lock, so they are not checked against each other).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    LockError,
    LockNotFoundError,
)
from controller.runtime.locks import BothLocks, max_hold, record_to_annotation
from controller.testing.clock import FakeClock
from tests.runtime.lease_fakes import FakeLock, LeaseServer

TICK = 0.1
EPOCH = datetime(2026, 12, 1, tzinfo=UTC)
Fault = Callable[[str, float], str]  # (lock, now) -> "" | "refused" | "lost"


class FaultyLock(FakeLock):
    """Our side of one lock: a write is refused (nothing applied) or lost (applied, answer an
    error) when `fault(kind, now)` says so."""

    def __init__(
        self, server: LeaseServer, kind: str, clock: FakeClock, fault: Fault, identity: str
    ) -> None:
        super().__init__(server, identity)
        self.kind, self._clock, self._fault = kind, clock, fault

    def _write(self, op: Callable[[LeaderElectionRecord], None], rec: LeaderElectionRecord) -> None:
        mode = self._fault(self.kind, self._clock.now())
        if mode == "refused":
            raise LockError(f"{self.kind}: connection refused")
        op(rec)
        if mode == "lost":
            raise LockError(f"{self.kind}: answer lost")

    def create(self, record: LeaderElectionRecord) -> None:
        self._write(super().create, record)

    def update(self, record: LeaderElectionRecord) -> None:
        self._write(super().update, record)


@dataclass
class ClientGo:
    """client-go's tryAcquireOrRenew/acquire/renew for one candidate that never fails itself."""

    name: str
    server: LeaseServer
    lease: float  # its configured LeaseDuration
    retry: float
    phase: float
    raw: Callable[[LeaderElectionRecord], str]  # the lock's stored form of a record
    record_duration: bool = False  # newer client-go: validity from the record's duration
    leading: bool = False
    next_try: float = 0.0
    _observed: str = ""
    _observed_record: LeaderElectionRecord = field(default_factory=LeaderElectionRecord)
    _observed_time: float = float("-inf")
    _rv: int = 0

    def start(self, now: float) -> None:
        self.next_try = now + self.phase

    def step(self, now: float) -> None:
        if now + 1e-9 < self.next_try:
            return
        self.next_try = now + self.retry
        if self.leading:
            return  # renewals of an unfaulted candidate succeed; it keeps leading
        try:
            stored = self.server.read()
        except LockNotFoundError:
            return  # the lock object is always created first by ours in these runs
        record, raw = stored.record, self.raw(stored.record)
        if raw != self._observed:
            self._observed, self._observed_record, self._observed_time = raw, record, now
        duration = record.lease_duration_seconds if self.record_duration else self.lease
        if record.holder_identity and self._observed_time + duration > now:
            return
        mine = LeaderElectionRecord(
            holder_identity=self.name,
            lease_duration_seconds=int(self.lease),
            acquire_time=EPOCH + timedelta(seconds=now),
            renew_time=EPOCH + timedelta(seconds=now),
            leader_transitions=record.leader_transitions + 1,
        )
        self.server.update(mine, stored.resource_version)
        self.leading = True


def lease_raw(record: LeaderElectionRecord) -> str:
    return record.raw().decode()


@dataclass(frozen=True)
class Scenario:
    failing: str  # "lease", "configmap", "both"
    mode: str  # "refused", "lost"
    start: float  # seconds after we took the locks
    rounds: int | None  # how many of our tries fail (None: all from `start` on)
    latency: float  # how long each of our requests takes


def simulate(
    scenario: Scenario, candidates: Callable[[LeaseServer, LeaseServer], list[ClientGo]]
) -> tuple[float, float | None]:
    """Run 60 s; return (when ours stopped leading, when a candidate took over)."""
    clock = FakeClock()
    lease_server, cm_server = LeaseServer(), LeaseServer()
    failed_tries: list[float] = []

    def fault(kind: str, now: float) -> str:
        if now < t0 + scenario.start or scenario.failing not in (kind, "both"):
            return ""
        done = scenario.rounds is not None and len(set(failed_tries)) >= scenario.rounds
        if done and now not in failed_tries:
            return ""
        failed_tries.append(now)
        return scenario.mode

    t0 = clock.now()
    lock = BothLocks(
        FaultyLock(lease_server, "lease", clock, fault, "ours"),
        FaultyLock(cm_server, "configmap", clock, fault, "ours"),
    )
    config = LeaderElectionConfig(
        lock=lock,
        callbacks=LeaderCallbacks(lambda lost: None, lambda: None),
        max_hold=max_hold(15.0),
    )
    ours = LeaderElector(
        config, clock=clock, wall_clock=lambda: EPOCH + timedelta(seconds=clock.now() - t0)
    )
    assert ours.try_acquire_or_renew()
    with ours._state:  # the run loop's leading phase, driven by hand here
        ours._leading = True
    others = candidates(lease_server, cm_server)
    for c in others:
        c.start(clock.now())
    next_renewal = clock.now() + config.retry_period
    stopped_at: float | None = None
    taken_at: float | None = None
    for _ in range(int(60 / TICK)):
        clock.step(TICK)
        now = clock.now()
        if stopped_at is None and not ours.is_leader():
            stopped_at = now - t0
        if stopped_at is None and now + 1e-9 >= next_renewal:
            # one try of the renewal loop, its request taking `latency`: the write lands at
            # the start, the answer (and the elector's bookkeeping of it) counts from there
            ours.try_acquire_or_renew()
            next_renewal = now + max(config.retry_period, scenario.latency)
        for c in others:
            c.step(now)
            if c.leading and taken_at is None:
                taken_at = now - t0
        # (kube-ovn's own generations do not share a lock: only ours against each is checked)
        theirs = [c.name for c in others if c.leading]
        assert not (ours.is_leader() and theirs), (
            f"{scenario}: ours and {theirs} at {now - t0:.1f}s"
        )
    return (stopped_at if stopped_at is not None else 60.0), taken_at


def v18(phase: float, retry: float = 2.0) -> Callable[[LeaseServer, LeaseServer], list[ClientGo]]:
    def make(lease: LeaseServer, cm: LeaseServer) -> list[ClientGo]:
        return [ClientGo("kube-ovn-v1.8", cm, 15.0, retry, phase, record_to_annotation)]

    return make


def v112(phase: float, retry: float = 6.0) -> Callable[[LeaseServer, LeaseServer], list[ClientGo]]:
    def make(lease: LeaseServer, cm: LeaseServer) -> list[ClientGo]:
        return [ClientGo("kube-ovn-v1.12", lease, 30.0, retry, phase, lease_raw)]

    return make


def newer(phase: float) -> Callable[[LeaseServer, LeaseServer], list[ClientGo]]:
    def make(lease: LeaseServer, cm: LeaseServer) -> list[ClientGo]:
        return [
            ClientGo("client-go-new", lease, 30.0, TICK, phase, lease_raw, record_duration=True)
        ]

    return make


def all_three(lease: LeaseServer, cm: LeaseServer) -> list[ClientGo]:
    return [
        *v18(0.0, TICK)(lease, cm),
        *v112(0.0, TICK)(lease, cm),
        *newer(0.0)(lease, cm),
    ]


SCENARIOS = [
    Scenario(failing, mode, start, rounds, latency)
    for failing, mode, start, rounds, latency in itertools.product(
        ("lease", "configmap", "both"),
        ("refused", "lost"),
        (2.0, 4.0, 7.0),
        (1, 2, 4, 5, None),
        (0.0, 1.5),
    )
]
CANDIDATES = {
    **{f"v1.8-phase{p}": v18(p) for p in (0.0, 0.5, 1.0, 1.5)},
    "v1.8-every-tick": v18(0.0, TICK),
    **{f"v1.12-phase{p}": v112(p) for p in (0.0, 2.0, 4.0)},
    "v1.12-every-tick": v112(0.0, TICK),
    "newer-client-go-every-tick": newer(0.0),
    "all-three-every-tick": all_three,
}


@pytest.mark.parametrize("who", list(CANDIDATES))
def test_no_two_leaders_whichever_renewal_fails(who: str) -> None:
    for scenario in SCENARIOS:
        stopped, taken = simulate(scenario, CANDIDATES[who])
        if taken is not None:
            assert stopped <= taken, f"{scenario}: taken at {taken}, ours until {stopped}"
        if scenario.rounds is None:
            # failing for good: we step down within the hold, and someone takes over
            assert stopped <= scenario.start + 12.0 + 2 * TICK, scenario
            assert taken is not None, f"{scenario}: {who} never took over"


def test_a_short_failure_within_the_hold_keeps_the_leadership() -> None:
    stopped, taken = simulate(Scenario("configmap", "refused", 2.0, 2, 0.0), v18(0.0, TICK))
    assert (stopped, taken) == (60.0, None)


def test_the_lock_timing_table() -> None:
    # the hold never reaches the shortest wait of any candidate on either lock
    config = LeaderElectionConfig(
        lock=FakeLock(LeaseServer(), "x"),
        callbacks=LeaderCallbacks(lambda lost: None, lambda: None),
        max_hold=max_hold(15.0),
    )
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)
    # v1.8 waits 15 s on the ConfigMap, v1.12 30 s on the Lease, newer client-go the record's 15
    assert config.hold == 12.0
    assert max_hold(30.0) == 12.0  # a longer configured lease never stretches past v1.8's 15 s
