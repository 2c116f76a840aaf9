"""kube-ovn v1.8's ConfigMap lock record, and the pair of locks the controller campaigns on."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    LockConflictError,
    LockError,
    ResourceLock,
)
from controller.runtime.locks import BothLocks, record_from_annotation, record_to_annotation
from tests.runtime.lease_fakes import FakeLock, LeaseServer

T0 = datetime(2026, 12, 1, 8, 0, 11, 987654, tzinfo=UTC)


def _elector(lock: ResourceLock, lease: float = 30.0) -> LeaderElector:
    return LeaderElector(
        LeaderElectionConfig(
            lock=lock,
            callbacks=LeaderCallbacks(lambda lost: None, lambda: None),
            lease_duration=lease,
            renew_deadline=lease * 2 / 3,
            retry_period=lease / 6,
        )
    )


def test_annotation_is_client_gos_record_json() -> None:
    record = LeaderElectionRecord("a", 15, T0, T0, 2)
    doc = json.loads(record_to_annotation(record))
    assert doc == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-12-01T08:00:11Z",
        "renewTime": "2026-12-01T08:00:11Z",
        "leaderTransitions": 2,
    }
    back = record_from_annotation(record_to_annotation(record))
    assert (back.holder_identity, back.lease_duration_seconds, back.leader_transitions) == (
        "a",
        15,
        2,
    )
    assert back.renew_time == T0.replace(microsecond=0)


@pytest.mark.parametrize("text", ["{", "[]", '{"leaseDurationSeconds": "x"}'])
def test_an_unreadable_annotation_is_never_taken_over(text: str) -> None:
    with pytest.raises(LockError, match="unreadable"):
        record_from_annotation(text)


class Pair:
    def __init__(self) -> None:
        self.lease, self.configmap = LeaseServer(), LeaseServer()

    def ours(self, identity: str = "ours") -> BothLocks:
        return BothLocks(FakeLock(self.lease, identity), FakeLock(self.configmap, identity))


@pytest.mark.parametrize("held", ["lease", "configmap"])
def test_a_holder_of_either_lock_keeps_ours_out(held: str) -> None:
    pair = Pair()
    other = _elector(FakeLock(getattr(pair, held), "kube-ovn-old"), lease=15)
    assert other.try_acquire_or_renew()
    ours = _elector(pair.ours())
    for _ in range(3):
        assert other.try_acquire_or_renew()
        assert not ours.try_acquire_or_renew()
    assert ours.get_leader() == "kube-ovn-old"
    free = pair.configmap if held == "lease" else pair.lease
    assert free.writes == []  # ours wrote nothing, not even the lock nobody held


def test_ours_takes_both_and_keeps_either_generation_out() -> None:
    pair = Pair()
    ours = _elector(pair.ours())
    assert ours.try_acquire_or_renew()
    assert pair.lease.record is not None and pair.configmap.record is not None
    assert pair.lease.record.holder_identity == pair.configmap.record.holder_identity == "ours"
    for server in (pair.lease, pair.configmap):
        assert not _elector(FakeLock(server, "kube-ovn-old"), lease=15).try_acquire_or_renew()
    assert ours.try_acquire_or_renew()  # renews both
    assert len(pair.lease.writes) == len(pair.configmap.writes) == 2


def test_release_empties_both() -> None:
    pair = Pair()
    ours = _elector(pair.ours())
    assert ours.try_acquire_or_renew()
    assert ours.release()
    assert pair.lease.record is not None and pair.configmap.record is not None
    assert pair.lease.record.holder_identity == pair.configmap.record.holder_identity == ""
    assert _elector(FakeLock(pair.configmap, "kube-ovn-old"), lease=15).try_acquire_or_renew()


def test_a_renewal_that_fails_on_one_lock_fails() -> None:
    pair = Pair()
    locks = pair.ours()
    ours = _elector(locks)
    assert ours.try_acquire_or_renew()
    # somebody rewrote the ConfigMap behind our back: our cached version is stale
    stored = pair.configmap.read()
    pair.configmap.update(LeaderElectionRecord("intruder", 15, T0, T0), stored.resource_version)
    with pytest.raises(LockConflictError):
        locks.update(LeaderElectionRecord("ours", 30, T0, T0))
    assert not ours.try_acquire_or_renew()  # the intruder's record is valid: no leadership
    assert not ours.is_leader()


def test_two_controllers_under_different_lease_names_still_exclude_each_other() -> None:
    configmap = LeaseServer()
    a = _elector(BothLocks(FakeLock(LeaseServer(), "a"), FakeLock(configmap, "a")))
    b = _elector(BothLocks(FakeLock(LeaseServer(), "b"), FakeLock(configmap, "b")))
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.try_acquire_or_renew()
