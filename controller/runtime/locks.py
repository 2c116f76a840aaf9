"""Leader-election locks: the Lease, kube-ovn v1.8's ConfigMap lock and the pair of both.

`LeaseLock` and `ConfigMapLock` are `ResourceLock`s (`controller.runtime.leaderelection`) on one
API object each, sharing `ApiObjectLock` (name, identity, the request path, errors as lock
errors).

kube-ovn v1.8 elects its leader on ConfigMap `ovn-config` in its namespace (client-go's
`ConfigMapLock`: the leader record as JSON in the annotation
`control-plane.alpha.kubernetes.io/leader`, whole-second RFC 3339 times, `leaderTransitions`);
kube-ovn v1.12+ on Lease `kube-ovn-controller`. A controller that holds only one of them lets a
kube-ovn-controller of the other generation allocate beside it. So this controller campaigns on
`BothLocks(lease, configmap)`:

* `get()` reads both. When either names a holder other than us, that record is returned (the
  Lease's first), so the elector sees the lock as held and waits until that record has stopped
  changing for its `leaseDurationSeconds`; a kube-ovn v1.8 holder of the ConfigMap alone is
  logged once, with what to do about it. Otherwise the Lease's record (ours or empty) is
  returned. `LockNotFoundError` only when neither object exists.
* `create()` / `update()` write the record to both (creating whichever does not exist yet);
  a conflict on either is a `LockConflictError`, so the elector retries, and while leading a
  renewal that fails on either lock counts as failed: leadership is never kept on one lock alone.
* `release()` (the elector's, through `update`) empties the holder of both.

`ConfigMapLock` alone is used by tests to play kube-ovn v1.8.

Timings (`max_hold`): a renewal counts only when both writes succeeded, and the elector leads at
most `max_hold` after the start of the last such renewal, so whichever lock's renewal failed,
leadership ends `STOP_MARGIN` before the earliest moment a kube-ovn v1.8 candidate (ConfigMap,
15 s of its own clock), a v1.12+ one (Lease, 30 s) or one of ours (the record's duration) could
take that lock.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.apiclient.errors import KubeApiError
from controller.apiclient.request import read_object, send
from controller.runtime.leaderelection import (
    LeaderElectionRecord,
    LockConflictError,
    LockError,
    LockNotFoundError,
    ResourceLock,
    lock_record_time,
)

LOG = logging.getLogger(__name__)

LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
#: kube-ovn v1.8's ConfigMap lock name (pkg/controller/election.go).
KUBE_OVN_V18_LOCK = "ovn-config"
#: How long other generations' candidates wait, by their own clock, after they last saw a lock
#: record change before they take it: their client-go (v0.20 in kube-ovn v1.8.18, v0.27 in v1.12)
#: judges expiry by its *configured* lease duration, whatever the record says. kube-ovn v1.8.18
#: pkg/controller/election.go: ConfigMap lock, 15 s lease / 10 s renew deadline / 2 s retry;
#: v1.12.0 cmd/controller/controller.go: Lease lock, 30 s / 20 s / 6 s. Newer client-go reads
#: the record's leaseDurationSeconds, which is ours.
KUBE_OVN_V18_LEASE_DURATION = 15.0
KUBE_OVN_V112_LEASE_DURATION = 30.0
#: What the process gets, after its leadership ended, to stop its workers before the first other
#: candidate could acquire either lock (a fifth of the shortest wait for very short test leases).
STOP_MARGIN = 3.0


def max_hold(lease_duration: float) -> float:
    """The longest this controller may lead after the start of its last successful write of both
    locks: the shortest wait of any candidate on either lock (ours included: they wait the
    record's `lease_duration`), less `STOP_MARGIN`."""
    shortest = min(KUBE_OVN_V18_LEASE_DURATION, KUBE_OVN_V112_LEASE_DURATION, lease_duration)
    return shortest - min(STOP_MARGIN, shortest / 5)


_SECONDS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _format_seconds(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime(_SECONDS_FORMAT) if t is not None else None


def record_to_annotation(record: LeaderElectionRecord) -> str:
    """client-go's JSON of a LeaderElectionRecord (metav1.Time: whole seconds)."""
    return json.dumps(
        {
            "holderIdentity": record.holder_identity,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "acquireTime": _format_seconds(record.acquire_time),
            "renewTime": _format_seconds(record.renew_time),
            "leaderTransitions": record.leader_transitions,
        },
        separators=(",", ":"),
    )


def record_from_annotation(text: str) -> LeaderElectionRecord:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise TypeError("not an object")
        return LeaderElectionRecord(
            holder_identity=str(doc.get("holderIdentity") or ""),
            lease_duration_seconds=int(doc.get("leaseDurationSeconds") or 0),
            acquire_time=lock_record_time(doc.get("acquireTime")),
            renew_time=lock_record_time(doc.get("renewTime")),
            leader_transitions=int(doc.get("leaderTransitions") or 0),
        )
    except (ValueError, TypeError) as exc:
        # Never take over a lock we cannot read: another controller may hold it.
        raise LockError(f"unreadable {LEADER_ANNOTATION} annotation {text[:80]!r}: {exc}") from None


def lock_request(
    api_client: Any, method: str, path: str, body: Any, timeout: Any
) -> dict[str, Any]:
    """One request of a lock object through the one request path, its errors as lock errors."""
    try:
        raw = send(api_client, method, path, body=body, timeout=timeout)
        result = read_object(raw)
    except KubeApiError as err:
        if err.status == 404:
            raise LockNotFoundError(str(err)) from err
        if err.status == 409:
            raise LockConflictError(str(err)) from err
        raise LockError(str(err)) from err
    if not result:
        raise LockError(f"unexpected response to {method} {path}")
    return result


class ApiObjectLock(ABC):
    """What every lock on one API object shares: its name, the holder identity, the request path,
    and get/create/update of the object; a subclass says where the record sits in it."""

    #: The object's kind as the errors name it ("lease", "configmap").
    kind = ""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        name: str,
        identity: str,
        collection: str,
        request_timeout: float,
    ) -> None:
        if not identity:
            raise ValueError("Lock identity is empty")
        self._api_client = api_client
        self.namespace = namespace
        self.name = name
        self._identity = identity
        self._timeout = max(1.0, request_timeout)
        self._collection = collection
        self._object: dict[str, Any] | None = None  # as last read or written

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def exists(self) -> bool:
        """Whether the last get/create/update saw the object."""
        return self._object is not None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def get(self) -> LeaderElectionRecord:
        try:
            obj = self._call("GET", f"{self._collection}/{self.name}")
        except LockNotFoundError:
            self._object = None
            raise
        self._object = obj
        return self._record_of(obj)

    def create(self, record: LeaderElectionRecord) -> None:
        self._object = self._call("POST", self._collection, self._new_object(record))

    def update(self, record: LeaderElectionRecord) -> None:
        if self._object is None:
            raise LockError(f"{self.kind} not initialized, call get or create first")
        body = self._with_record(dict(self._object), record)
        self._object = self._call("PUT", f"{self._collection}/{self.name}", body)

    @abstractmethod
    def _record_of(self, obj: dict[str, Any]) -> LeaderElectionRecord:
        """The leader record the object carries."""

    @abstractmethod
    def _new_object(self, record: LeaderElectionRecord) -> dict[str, Any]:
        """The object to create, carrying `record`."""

    @abstractmethod
    def _with_record(self, body: dict[str, Any], record: LeaderElectionRecord) -> dict[str, Any]:
        """`body` (a copy of the object as last seen) carrying `record`."""

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return lock_request(self._api_client, method, path, body, self._timeout)


class LeaseLock(ApiObjectLock):
    """A `ResourceLock` on a coordination.k8s.io/v1 Lease via a `kubernetes` ApiClient."""

    kind = "lease"

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        name: str,
        identity: str,
        *,
        request_timeout: float = 10.0,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            api_client,
            namespace,
            name,
            identity,
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            request_timeout,
        )
        self._labels = dict(labels or {})

    def _record_of(self, obj: dict[str, Any]) -> LeaderElectionRecord:
        return LeaderElectionRecord.from_lease_spec(obj.get("spec"))

    def _new_object(self, record: LeaderElectionRecord) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self._labels:
            meta["labels"] = self._labels
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": record.to_lease_spec(),
        }

    def _with_record(self, body: dict[str, Any], record: LeaderElectionRecord) -> dict[str, Any]:
        body["spec"] = record.to_lease_spec()
        return body


class ConfigMapLock(ApiObjectLock):
    """A `ResourceLock` on a ConfigMap's leader annotation (client-go `ConfigMapLock`)."""

    kind = "configmap"

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        name: str,
        identity: str,
        *,
        request_timeout: float = 10.0,
    ) -> None:
        super().__init__(
            api_client,
            namespace,
            name,
            identity,
            f"/api/v1/namespaces/{namespace}/configmaps",
            request_timeout,
        )

    def _record_of(self, obj: dict[str, Any]) -> LeaderElectionRecord:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(LEADER_ANNOTATION)
        # A ConfigMap without the annotation (kube-ovn's install may create it) is a free lock.
        return record_from_annotation(text) if text else LeaderElectionRecord()

    def _new_object(self, record: LeaderElectionRecord) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "annotations": {LEADER_ANNOTATION: record_to_annotation(record)},
            },
        }

    def _with_record(self, body: dict[str, Any], record: LeaderElectionRecord) -> dict[str, Any]:
        meta = dict(body.get("metadata") or {})
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            LEADER_ANNOTATION: record_to_annotation(record),
        }
        body["metadata"] = meta
        return body


class BothLocks:
    """The Lease and kube-ovn v1.8's ConfigMap as one lock (see the module docstring)."""

    def __init__(self, lease: ResourceLock, configmap: ResourceLock) -> None:
        if lease.identity != configmap.identity:
            raise ValueError("both locks need the same identity")
        self._lease = lease
        self._configmap = configmap
        self._found = {"lease": False, "configmap": False}
        self._warned_holder = ""

    @property
    def identity(self) -> str:
        return self._lease.identity

    def describe(self) -> str:
        return f"lease {self._lease.describe()} + configmap {self._configmap.describe()}"

    def _read(self, which: str, lock: ResourceLock) -> LeaderElectionRecord | None:
        try:
            record = lock.get()
        except LockNotFoundError:
            self._found[which] = False
            return None
        self._found[which] = True
        return record

    def get(self) -> LeaderElectionRecord:
        lease = self._read("lease", self._lease)
        configmap = self._read("configmap", self._configmap)
        if lease is None and configmap is None:
            raise LockNotFoundError(f"neither {self.describe()} exists")
        mine = ("", self.identity)
        if lease is not None and lease.holder_identity not in mine:
            return lease
        if configmap is not None and configmap.holder_identity not in mine:
            self._warn_v18_holder(configmap.holder_identity)
            return configmap
        if lease is not None and configmap is not None:
            # Both ours or free. A half-written pair (a renewal that reached one lock only)
            # reads as the free one: the next update writes both again.
            if lease.holder_identity != configmap.holder_identity:
                return lease if not lease.holder_identity else configmap
            return lease
        return lease if lease is not None else configmap  # type: ignore[return-value]

    def _warn_v18_holder(self, holder: str) -> None:
        if holder == self._warned_holder:
            return
        self._warned_holder = holder
        LOG.warning(
            "ConfigMap %s names %s as leader: a kube-ovn v1.8 kube-ovn-controller is running; "
            "standing by until it stops (remove kube-ovn's controller Deployment to let this "
            "controller allocate)",
            self._configmap.describe(),
            holder,
        )

    def create(self, record: LeaderElectionRecord) -> None:
        self._write(record)

    def update(self, record: LeaderElectionRecord) -> None:
        self._write(record)

    def _write(self, record: LeaderElectionRecord) -> None:
        for which, lock in (("lease", self._lease), ("configmap", self._configmap)):
            if self._found[which]:
                lock.update(record)
            else:
                lock.create(record)
                self._found[which] = True
