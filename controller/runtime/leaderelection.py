"""Lease-based leader election, following client-go `tools/leaderelection`.

Replicas race for one `coordination.k8s.io/v1` Lease. The holder renews it every `retry_period`;
the others poll it every `retry_period·[1, 2.2)` and take it over once it has not changed for
`leaseDurationSeconds` (as recorded in the Lease by its holder) of *their own* monotonic time —
timestamps inside the Lease are never compared with the local clock, so clock skew between nodes
does not matter. Writes use the Lease's resourceVersion (optimistic concurrency): of two racing
candidates one gets 409 Conflict and retries later.

Contract of `LeaderElector.run(stop)`:

* blocks acquiring; on success calls `on_started_leading(lost)` on a new thread, where `lost` is
  an Event set as soon as leadership ends (or `stop` is set), then keeps renewing;
* leadership ends when a renewal has not succeeded within `renew_deadline` or when `stop` is set;
  with `release_on_cancel` the Lease is then handed back (empty holder, 1 s duration) so a
  successor takes over at once;
* `on_stopped_leading()` is always called when `run` returns, even if it never led;
* `on_new_leader(identity)` runs on a new thread whenever the observed holder changes.

`is_leader()` is true only while this elector is in its leading phase, the last observed record
names it, and the *hold* since the start of its last successful write has not run out by the
local clock. The hold is `min(retry_period + renew_deadline, lease_duration, max_hold)`: as long
as client-go's leader goes on after its last renewal, but never longer than another candidate
waits. Candidates of older client-go (v0.20 in kube-ovn v1.8.18, v0.27 in v1.12) judge expiry by
their *own* configured lease duration, not the record's, so `max_hold` is set from the shortest
of theirs (controller.wiring). A watchdog ends the leadership when the hold runs out even while a
renewal request hangs: `lost` is set and `on_stopped_leading()` called then, not when the request
returns, so the process stops its workers before another candidate can acquire. A write that
succeeds after that never revives the leadership.

Defaults are client-go's and kube-ovn v1.8.18's (pkg/controller/election.go): 15 s lease, 10 s
renew deadline, 2 s retry, a 12 s hold. The `kubernetes` package's own elector is not used: it
cannot be cancelled, never releases the lease and times everything by the wall clock.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from controller.core.errors import ControllerError
from controller.core.object_fields import parse_time
from controller.queues.clock import REAL_CLOCK, Clock, WallClock, utcnow

LOG = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
MICROTIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class LockError(ControllerError):
    """The lock could not be read or written."""


class LockNotFoundError(LockError):
    """The Lease does not exist yet."""


class LockConflictError(LockError):
    """Somebody else wrote the Lease since we read it (HTTP 409)."""


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The election state, stored as a Lease spec."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    leader_transitions: int = 0
    strategy: str = ""
    preferred_holder: str = ""

    def to_lease_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": _format_time(self.acquire_time),
            "renewTime": _format_time(self.renew_time),
            "leaseTransitions": self.leader_transitions,
        }
        if self.strategy:
            spec["strategy"] = self.strategy
        if self.preferred_holder:
            spec["preferredHolder"] = self.preferred_holder
        return spec

    @classmethod
    def from_lease_spec(cls, spec: Mapping[str, Any] | None) -> LeaderElectionRecord:
        spec = spec or {}
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=lock_record_time(spec.get("acquireTime")),
            renew_time=lock_record_time(spec.get("renewTime")),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
            strategy=str(spec.get("strategy") or ""),
            preferred_holder=str(spec.get("preferredHolder") or ""),
        )

    def raw(self) -> bytes:
        """A canonical encoding, compared to notice that the record changed."""
        return json.dumps(self.to_lease_spec(), sort_keys=True).encode()


def _format_time(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime(MICROTIME_FORMAT) if t is not None else None


def lock_record_time(value: Any) -> datetime | None:
    """An RFC 3339 time of a lock record (seconds or microseconds); None when absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    parsed = parse_time(value)
    if parsed is None:
        LOG.warning("unparseable lock record time %r ignored", value)
    return parsed


class ResourceLock(Protocol):
    """client-go `resourcelock.Interface`, for one candidate."""

    @property
    def identity(self) -> str: ...

    def describe(self) -> str: ...

    def get(self) -> LeaderElectionRecord:
        """Read the record (and cache the underlying object for `update`)."""
        ...

    def create(self, record: LeaderElectionRecord) -> None: ...

    def update(self, record: LeaderElectionRecord) -> None:
        """Write with the cached object's resourceVersion; LockConflictError on a race."""
        ...


@dataclass(frozen=True, slots=True)
class LeaderCallbacks:
    on_started_leading: Callable[[threading.Event], None]
    on_stopped_leading: Callable[[], None]
    on_new_leader: Callable[[str], None] | None = None


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Timings in seconds; validated like client-go's NewLeaderElector (same messages)."""

    lock: ResourceLock
    callbacks: LeaderCallbacks
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = True
    name: str = ""
    #: the longest leadership may outlast the start of the last successful write (None: no cap)
    max_hold: float | None = None

    @property
    def hold(self) -> float:
        """How long after the start of its last successful write this elector still leads."""
        hold = min(self.retry_period + self.renew_deadline, self.lease_duration)
        return hold if self.max_hold is None else min(hold, self.max_hold)

    def __post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.lease_duration <= 0:
            raise ValueError("leaseDuration must be greater than zero")
        if self.renew_deadline <= 0:
            raise ValueError("renewDeadline must be greater than zero")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if self.lease_duration < 1:
            # NOTE: the Lease stores whole seconds; a shorter lease would be recorded as 0.
            raise ValueError("leaseDuration must be at least one second")
        if self.callbacks.on_started_leading is None:
            raise ValueError("OnStartedLeading callback must not be nil")
        if self.callbacks.on_stopped_leading is None:
            raise ValueError("OnStoppedLeading callback must not be nil")
        if self.max_hold is not None and self.max_hold <= self.retry_period:
            raise ValueError("maxHold must be greater than retryPeriod")
        if self.lock is None:
            raise ValueError("Lock must not be nil.")
        if not self.lock.identity:
            raise ValueError("Lock identity is empty")


class LeaderElector:
    """Runs one candidate's election loop; see the module docstring."""

    def __init__(
        self,
        config: LeaderElectionConfig,
        *,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
        wall_clock: WallClock = utcnow,
    ) -> None:
        self.config = config
        self._lock = config.lock
        self._clock = clock
        self._rng = rng or random.Random()
        self._wall_clock = wall_clock
        self._state = threading.Lock()
        self._observed_record = LeaderElectionRecord()
        self._observed_raw = b""
        self._observed_time = float("-inf")
        self._reported_leader = ""
        self._leading = False
        self._held_since = float("-inf")  # start of our last successful write
        self._expired = threading.Event()  # the hold ran out while leading
        self._ended = False  # on_stopped_leading called
        self.name = config.name or config.lock.describe()

    # -- observation ----------------------------------------------------------------------

    def get_leader(self) -> str:
        """The holder identity last observed (empty when unknown or released)."""
        with self._state:
            return self._observed_record.holder_identity

    def is_leader(self) -> bool:
        with self._state:
            return (
                self._leading
                and self._observed_record.holder_identity == self._lock.identity
                and self._clock.now() < self._hold_until_locked()
            )

    def hold_until(self) -> float:
        """The clock time at which leadership ends unless a write succeeds before."""
        with self._state:
            return self._hold_until_locked()

    def _hold_until_locked(self) -> float:
        return self._held_since + self.config.hold

    def check(self, max_tolerable_expired_lease: float) -> str | None:
        """Health check: an error message if we lead but failed to renew for too long."""
        with self._state:
            if not self._leading or self._observed_record.holder_identity != self._lock.identity:
                return None
            late = self._clock.now() - self._observed_time
        if late > self.config.lease_duration + max_tolerable_expired_lease:
            return f"failed election to renew leadership on lease {self.name}"
        return None

    def _lease_valid_locked(self, now: float) -> bool:
        return self._observed_time + self._observed_record.lease_duration_seconds > now

    def _set_observed(self, record: LeaderElectionRecord, now: float) -> None:
        with self._state:
            self._set_observed_locked(record, record.raw(), now)

    def _wrote(self, record: LeaderElectionRecord, now: float) -> None:
        """Our write, started at `now`, succeeded: the hold counts from `now`, unless it already
        ran out (a late answer never revives a leadership that ended)."""
        with self._state:
            self._set_observed_locked(record, record.raw(), now)
            if not self._expired.is_set() and record.holder_identity == self._lock.identity:
                self._held_since = max(self._held_since, now)

    def _set_observed_locked(self, record: LeaderElectionRecord, raw: bytes, now: float) -> None:
        self._observed_record = record
        self._observed_raw = raw
        self._observed_time = now

    # -- the loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Acquire, lead and renew until leadership is lost or `stop` is set."""
        try:
            if not self._acquire(stop):
                return
            lost = threading.Event()
            with self._state:
                self._leading = True
            threading.Thread(
                target=self._started_leading,
                args=(lost,),
                name=f"{self.name}-leading",
                daemon=True,
            ).start()
            done = threading.Event()
            threading.Thread(
                target=self._watchdog,
                args=(lost, done, stop),
                name=f"{self.name}-watchdog",
                daemon=True,
            ).start()
            try:
                self._renew(stop)
            finally:
                done.set()
                self._end_leading(lost)
                if self.config.release_on_cancel:
                    self.release()
        finally:
            self._stopped()

    def _end_leading(self, lost: threading.Event) -> None:
        with self._state:
            self._leading = False
        lost.set()

    def _stopped(self) -> None:
        with self._state:
            if self._ended:
                return
            self._ended = True
        self.config.callbacks.on_stopped_leading()

    def _watchdog(
        self, lost: threading.Event, done: threading.Event, stop: threading.Event
    ) -> None:
        """End the leadership when the hold runs out, even while a renewal request hangs."""
        while not done.is_set() and not stop.is_set():
            left = self.hold_until() - self._clock.now()
            if left <= 0:
                self._expired.set()
                LOG.error("%s: lease not renewed within the hold, stepping down", self.name)
                self._end_leading(lost)
                self._stopped()
                return
            if self._clock.sleep(left, done):
                return

    def _started_leading(self, lost: threading.Event) -> None:
        try:
            self.config.callbacks.on_started_leading(lost)
        except Exception:
            LOG.exception("%s: on_started_leading failed", self.name)

    def _acquire(self, stop: threading.Event) -> bool:
        LOG.info("%s: attempting to acquire leader lease", self.name)
        while not stop.is_set():
            ok = self.try_acquire_or_renew()
            self._maybe_report_transition()
            if ok:
                LOG.info("%s: successfully acquired lease", self.name)
                return True
            period = self.config.retry_period
            if self._clock.sleep(period + self._rng.random() * JITTER_FACTOR * period, stop):
                return False
        return False

    def _renew(self, stop: threading.Event) -> None:
        period = self.config.retry_period
        while not stop.is_set() and not self._expired.is_set():
            deadline = min(self._clock.now() + self.config.renew_deadline, self.hold_until())
            renewed = False
            while not stop.is_set() and not self._expired.is_set():
                if self.try_acquire_or_renew() and not self._expired.is_set():
                    renewed = True
                    break
                remaining = deadline - self._clock.now()
                if remaining < period:
                    self._clock.sleep(max(remaining, 0.0), stop)
                    break
                if self._clock.sleep(period, stop):
                    break
            self._maybe_report_transition()
            if not renewed:
                if not stop.is_set():
                    LOG.error("%s: failed to renew lease", self.name)
                return
            if self._clock.sleep(period, stop):
                return

    def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go tryAcquireOrRenew); True if we hold the lease afterwards."""
        now = self._clock.now()
        wall = self._wall_clock()
        identity = self._lock.identity
        desired = LeaderElectionRecord(
            holder_identity=identity,
            lease_duration_seconds=int(self.config.lease_duration),
            acquire_time=wall,
            renew_time=wall,
        )
        with self._state:
            observed = self._observed_record
            fast_path = observed.holder_identity == identity and self._lease_valid_locked(now)
        if fast_path:
            record = replace(
                desired,
                acquire_time=observed.acquire_time,
                leader_transitions=observed.leader_transitions,
            )
            try:
                self._lock.update(record)
                self._wrote(record, now)
                return True
            except LockError as err:
                LOG.info(
                    "%s: failed to update lease optimistically (%s), falling back to the slow path",
                    self.name,
                    err,
                )
        try:
            current = self._lock.get()
        except LockNotFoundError:
            try:
                self._lock.create(desired)
            except LockError as err:
                LOG.error("%s: error initially creating lease lock: %s", self.name, err)
                return False
            self._wrote(desired, now)
            return True
        except LockError as err:
            LOG.error("%s: error retrieving lease lock: %s", self.name, err)
            return False
        current_raw = current.raw()
        with self._state:
            # The observed time moves only when the record changed: expiry is judged by how long
            # it has stayed the same on our clock, never by the timestamps inside it.
            if current_raw != self._observed_raw:
                self._set_observed_locked(current, current_raw, now)
            held_by_other = current.holder_identity not in ("", identity) and (
                self._lease_valid_locked(now)
            )
        if held_by_other:
            LOG.debug(
                "%s: lease is held by %s and has not yet expired",
                self.name,
                current.holder_identity,
            )
            return False
        if current.holder_identity == identity:
            record = replace(
                desired,
                acquire_time=current.acquire_time,
                leader_transitions=current.leader_transitions,
            )
        else:
            record = replace(desired, leader_transitions=current.leader_transitions + 1)
        try:
            self._lock.update(record)
        except LockError as err:
            LOG.info("%s: failed to update lease: %s", self.name, err)
            return False
        self._wrote(record, now)
        return True

    def release(self) -> bool:
        """Hand the lease back if we hold it (holder "", duration 1 s)."""
        try:
            current = self._lock.get()
        except LockError as err:
            LOG.info("%s: lease not released: %s", self.name, err)
            return False
        if current.holder_identity != self._lock.identity:
            return True
        wall = self._wall_clock()
        record = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=wall,
            renew_time=wall,
            leader_transitions=current.leader_transitions,
        )
        try:
            self._lock.update(record)
        except LockError as err:
            LOG.error("%s: failed to release lease: %s", self.name, err)
            return False
        self._set_observed(record, self._clock.now())
        LOG.info("%s: released lease", self.name)
        return True

    def _maybe_report_transition(self) -> None:
        with self._state:
            holder = self._observed_record.holder_identity
            if holder == self._reported_leader:
                return
            self._reported_leader = holder
        callback = self.config.callbacks.on_new_leader
        if callback is not None:
            threading.Thread(
                target=callback, args=(holder,), name=f"{self.name}-new-leader", daemon=True
            ).start()
