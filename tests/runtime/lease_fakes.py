"""An in-memory Lease with optimistic concurrency, and per-candidate locks on it."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from controller.runtime.leaderelection import (
    LeaderElectionRecord,
    LockConflictError,
    LockError,
    LockNotFoundError,
)


@dataclass
class _Stored:
    record: LeaderElectionRecord
    resource_version: int


class LeaseServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stored: _Stored | None = None
        self._rv = 0
        self.writes: list[LeaderElectionRecord] = []

    def read(self) -> _Stored:
        with self._lock:
            if self._stored is None:
                raise LockNotFoundError('leases.coordination.k8s.io "lock" not found')
            return _Stored(self._stored.record, self._stored.resource_version)

    def create(self, record: LeaderElectionRecord) -> int:
        with self._lock:
            if self._stored is not None:
                raise LockConflictError("already exists")
            self._rv += 1
            self._stored = _Stored(record, self._rv)
            self.writes.append(record)
            return self._rv

    def update(self, record: LeaderElectionRecord, resource_version: int) -> int:
        with self._lock:
            if self._stored is None:
                raise LockNotFoundError("gone")
            if self._stored.resource_version != resource_version:
                raise LockConflictError("the object has been modified")
            self._rv += 1
            self._stored = _Stored(record, self._rv)
            self.writes.append(record)
            return self._rv

    @property
    def record(self) -> LeaderElectionRecord | None:
        with self._lock:
            return self._stored.record if self._stored else None


class FakeLock:
    """One candidate's view; `partitioned` makes every call fail like an unreachable server."""

    def __init__(self, server: LeaseServer, identity: str) -> None:
        self._server = server
        self._identity = identity
        self._rv: int | None = None
        self.partitioned = False

    @property
    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return "kube-system/kube-ovn-controller"

    def _check(self) -> None:
        if self.partitioned:
            raise LockError("connection refused")

    def get(self) -> LeaderElectionRecord:
        self._check()
        stored = self._server.read()
        self._rv = stored.resource_version
        return stored.record

    def create(self, record: LeaderElectionRecord) -> None:
        self._check()
        self._rv = self._server.create(record)

    def update(self, record: LeaderElectionRecord) -> None:
        self._check()
        if self._rv is None:
            raise LockError("lease not initialized, call get or create first")
        self._rv = self._server.update(record, self._rv)
