"""In-memory `KubeApi`, `EventSink` and `EventRecorder` for fast unit tests of the handlers.

Contract: same signatures, return values and errors as `controller.kube.client.KubeClient`
against a real API server, kept honest by `tests/kube/test_contract.py`, which runs one suite
over both. Semantics reproduced from the API server:

* every change bumps a cluster-wide `metadata.resourceVersion`; a write that changes nothing
  (merge patch of equal values) does not;
* merge patches follow RFC 7386 (`None` deletes); an annotation map left empty disappears, as the
  API server omits empty maps;
* a `resource_version` precondition or a PUT with a stale resourceVersion raises `ConflictError`;
  missing objects raise `NotFoundError`; duplicate creates `AlreadyExistsError`.

State is public for assertions: `fake.pods["ns/name"]["metadata"]["annotations"]`,
`fake.ips["name"]`, `fake.events`, ... Namespaced stores are keyed `"namespace/name"`,
cluster-scoped ones by name. Seed them with the `add_*` helpers (they stamp uid and
resourceVersion). `fail_next(method, error)` makes the next call(s) of a method raise.
Thread-safe: one lock around every operation, so handlers can run from several worker threads.
"""

from __future__ import annotations

import copy
import datetime
import itertools
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.apiclient.errors import (
    AlreadyExistsError,
    ConflictError,
    KubeApiError,
    NotFoundError,
)
from controller.kube.api import (
    ClusterLister,
    EventRecorder,
    EventSink,
    EventTarget,
    KubeApi,
    KubeObject,
    ObjectRef,
    annotation_merge_patch,
    check_object_name,
    desired_ip,
    ip_owner_conflict,
    ip_update,
)
from controller.kube.events import (
    DEFAULT_COMPONENT,
    EventCorrelator,
    to_object_ref,
    validate_event,
)
from controller.queues.clock import Clock, WallClock, utcnow
from controller.testing.clock import FakeClock


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: return `target` with `patch` applied (inputs are not modified)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def _not_found(resource: str, name: str) -> NotFoundError:
    return NotFoundError(404, "NotFound", f'{resource} "{name}" not found')


def _already_exists(resource: str, name: str) -> AlreadyExistsError:
    return AlreadyExistsError(409, "AlreadyExists", f'{resource} "{name}" already exists')


def _conflict(resource: str, name: str) -> ConflictError:
    return ConflictError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )


def _key(namespace: str, name: str) -> str:
    check_object_name("name", name)
    return f"{check_object_name('namespace', namespace)}/{name}" if namespace else name


class FakeKubeApi:
    """In-memory Kubernetes API: implements `KubeApi` and `EventSink`."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._rv = itertools.count(1)
        self.pods: dict[str, KubeObject] = {}
        self.namespaces: dict[str, KubeObject] = {}
        self.nodes: dict[str, KubeObject] = {}
        self.ips: dict[str, KubeObject] = {}
        self.subnets: dict[str, KubeObject] = {}
        self.vpcs: dict[str, KubeObject] = {}
        self.security_groups: dict[str, KubeObject] = {}
        self.statefulsets: dict[str, KubeObject] = {}
        self.virtual_machines: dict[str, KubeObject] = {}
        self.network_attachment_definitions: dict[str, KubeObject] = {}
        self.configmaps: dict[str, KubeObject] = {}
        self.events: dict[str, KubeObject] = {}
        self.calls: list[str] = []
        self._faults: dict[str, list[KubeApiError]] = {}

    # --- test helpers ---------------------------------------------------------------------------
    def fail_next(self, method: str, error: KubeApiError, times: int = 1) -> None:
        """Make the next `times` calls of `method` (e.g. "patch_pod_annotations") raise."""
        if not callable(getattr(self, method, None)):
            raise ValueError(f"FakeKubeApi has no method {method!r}")
        with self._lock:
            self._faults.setdefault(method, []).extend([error] * times)

    def add_pod(self, pod: Mapping[str, Any]) -> KubeObject:
        return self._seed(self.pods, pod, namespaced=True, kind="Pod", api_version="v1")

    def add_namespace(self, ns: Mapping[str, Any]) -> KubeObject:
        return self._seed(self.namespaces, ns, namespaced=False, kind="Namespace", api_version="v1")

    def add_node(self, node: Mapping[str, Any]) -> KubeObject:
        return self._seed(self.nodes, node, namespaced=False, kind="Node", api_version="v1")

    def add_statefulset(self, sts: Mapping[str, Any]) -> KubeObject:
        return self._seed(
            self.statefulsets, sts, namespaced=True, kind="StatefulSet", api_version="apps/v1"
        )

    def add_virtual_machine(self, vm: Mapping[str, Any]) -> KubeObject:
        return self._seed(
            self.virtual_machines,
            vm,
            namespaced=True,
            kind="VirtualMachine",
            api_version="kubevirt.io/v1",
        )

    def add_network_attachment_definition(self, nad: Mapping[str, Any]) -> KubeObject:
        return self._seed(
            self.network_attachment_definitions,
            nad,
            namespaced=True,
            kind="NetworkAttachmentDefinition",
            api_version="k8s.cni.cncf.io/v1",
        )

    def add_configmap(self, cm: Mapping[str, Any]) -> KubeObject:
        return self._seed(self.configmaps, cm, namespaced=True, kind="ConfigMap", api_version="v1")

    def delete_pod(self, namespace: str, name: str) -> None:
        """Simulate the pod vanishing (e.g. between the OVN write and the annotation patch)."""
        with self._lock:
            self.pods.pop(_key(namespace, name), None)

    # --- internals ------------------------------------------------------------------------------
    def _enter(self, method: str, target: str) -> None:
        self.calls.append(f"{method} {target}")
        queued = self._faults.get(method)
        if queued:
            raise queued.pop(0)

    def _next_rv(self) -> str:
        return str(next(self._rv))

    def _seed(
        self,
        store: dict[str, KubeObject],
        obj: Mapping[str, Any],
        *,
        namespaced: bool,
        kind: str,
        api_version: str,
    ) -> KubeObject:
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind} needs metadata.name")
        namespace = meta.setdefault("namespace", "default") if namespaced else ""
        stored.setdefault("kind", kind)
        stored.setdefault("apiVersion", api_version)
        with self._lock:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            meta["resourceVersion"] = self._next_rv()
            store[_key(namespace, name)] = stored
        return copy.deepcopy(stored)

    def _create(
        self, store: dict[str, KubeObject], resource: str, key: str, body: Mapping[str, Any]
    ) -> KubeObject:
        if key in store:
            raise _already_exists(resource, key.rsplit("/", 1)[-1])
        stored = copy.deepcopy(dict(body))
        meta = stored.setdefault("metadata", {})
        meta.pop("resourceVersion", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["resourceVersion"] = self._next_rv()
        store[key] = stored
        return copy.deepcopy(stored)

    def _merge_patch(
        self, store: dict[str, KubeObject], resource: str, key: str, patch: Mapping[str, Any]
    ) -> KubeObject:
        current = store.get(key)
        if current is None:
            raise _not_found(resource, key.rsplit("/", 1)[-1])
        patch = copy.deepcopy(dict(patch))
        want_rv = (patch.get("metadata") or {}).pop("resourceVersion", None)
        if want_rv is not None and want_rv != current["metadata"].get("resourceVersion"):
            raise _conflict(resource, key.rsplit("/", 1)[-1])
        want_uid = (patch.get("metadata") or {}).pop("uid", None)
        if want_uid and want_uid != current["metadata"].get("uid", want_uid):
            raise _conflict(resource, key.rsplit("/", 1)[-1])
        updated = json_merge_patch(current, patch)
        meta = updated.setdefault("metadata", {})
        if meta.get("annotations") == {}:
            del meta["annotations"]  # the API server omits empty maps
        if updated != current:
            meta["resourceVersion"] = self._next_rv()
            store[key] = updated
        return copy.deepcopy(store[key])

    def _get(self, store: dict[str, KubeObject], method: str, key: str) -> KubeObject | None:
        with self._lock:
            self._enter(method, key)
            obj = store.get(key)
            return copy.deepcopy(obj) if obj is not None else None

    # --- pods -----------------------------------------------------------------------------------
    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str],
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> KubeObject:
        patch = annotation_merge_patch(annotations, resource_version, uid)
        with self._lock:
            self._enter("patch_pod_annotations", _key(namespace, name))
            return self._merge_patch(self.pods, "pods", _key(namespace, name), patch)

    def delete_pod_annotations(
        self,
        namespace: str,
        name: str,
        keys: Iterable[str],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        patch = annotation_merge_patch(dict.fromkeys(keys), resource_version)
        with self._lock:
            self._enter("delete_pod_annotations", _key(namespace, name))
            return self._merge_patch(self.pods, "pods", _key(namespace, name), patch)

    # --- IP CRs ---------------------------------------------------------------------------------
    def create_or_update_ip(
        self, ip_cr: Mapping[str, Any], *, likely_absent: bool = False
    ) -> KubeObject:
        del likely_absent  # a hint for the real adapter's request count; no effect here
        desired = desired_ip(ip_cr)
        name = desired["metadata"]["name"]
        with self._lock:
            self._enter("create_or_update_ip", name)
            existing = self.ips.get(name)
            if existing is None:
                return self._create(self.ips, "ips.kubeovn.io", name, desired)
            conflict = ip_owner_conflict(existing, desired)
            if conflict is not None:
                raise AlreadyExistsError(409, "AlreadyExists", conflict)
            updated = ip_update(existing, desired)
            if updated is None:
                return copy.deepcopy(existing)
            updated = copy.deepcopy(updated)
            updated["metadata"]["resourceVersion"] = self._next_rv()
            self.ips[name] = updated
            return copy.deepcopy(updated)

    def delete_ip(self, name: str) -> bool:
        with self._lock:
            self._enter("delete_ip", name)
            return self.ips.pop(name, None) is not None

    def get_ip(self, name: str) -> KubeObject | None:
        return self._get(self.ips, "get_ip", name)

    def list_ips(self) -> list[KubeObject]:
        return self._list(self.ips, "list_ips")

    def _list(self, store: dict[str, KubeObject], method: str) -> list[KubeObject]:
        with self._lock:
            self._enter(method, "")
            return [copy.deepcopy(store[k]) for k in sorted(store)]

    # --- ClusterLister --------------------------------------------------------------------------
    def add_vpc(self, vpc: Mapping[str, Any]) -> KubeObject:
        return self._seed(self.vpcs, vpc, namespaced=False, kind="Vpc", api_version="kubeovn.io/v1")

    def list_pods(self) -> list[KubeObject]:
        return self._list(self.pods, "list_pods")

    def list_namespaces(self) -> list[KubeObject]:
        return self._list(self.namespaces, "list_namespaces")

    def list_nodes(self) -> list[KubeObject]:
        return self._list(self.nodes, "list_nodes")

    def list_subnets(self) -> list[KubeObject]:
        return self._list(self.subnets, "list_subnets")

    def list_vpcs(self) -> list[KubeObject]:
        return self._list(self.vpcs, "list_vpcs")

    def list_security_groups(self) -> list[KubeObject]:
        return self._list(self.security_groups, "list_security_groups")

    def list_statefulsets(self) -> list[KubeObject]:
        return self._list(self.statefulsets, "list_statefulsets")

    def list_virtual_machines(self) -> list[KubeObject]:
        return self._list(self.virtual_machines, "list_virtual_machines")

    def list_events(self) -> list[KubeObject]:
        return self._list(self.events, "list_events")

    # --- subnets --------------------------------------------------------------------------------
    def create_subnet(self, body: Mapping[str, Any]) -> KubeObject:
        meta = body.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise ValueError("Subnet needs metadata.name")
        full = {"apiVersion": "kubeovn.io/v1", "kind": "Subnet", **dict(body)}
        with self._lock:
            self._enter("create_subnet", str(meta["name"]))
            return self._create(self.subnets, "subnets.kubeovn.io", str(meta["name"]), full)

    def get_subnet(self, name: str) -> KubeObject | None:
        return self._get(self.subnets, "get_subnet", name)

    def update_subnet_status(self, name: str, status_patch: Mapping[str, Any]) -> KubeObject:
        with self._lock:
            self._enter("update_subnet_status", name)
            return self._merge_patch(
                self.subnets, "subnets.kubeovn.io", name, {"status": dict(status_patch)}
            )

    def update_security_group_status(
        self, name: str, status_patch: Mapping[str, Any]
    ) -> KubeObject:
        """`KubeClient.update_security_group_status`: a merge patch of the status."""
        with self._lock:
            self._enter("update_security_group_status", name)
            return self._merge_patch(
                self.security_groups,
                "security-groups.kubeovn.io",
                name,
                {"status": dict(status_patch)},
            )

    # --- namespaces and nodes -------------------------------------------------------------------
    def annotate_namespace(self, name: str, annotations: Mapping[str, str | None]) -> KubeObject:
        patch = annotation_merge_patch(annotations)
        with self._lock:
            self._enter("annotate_namespace", name)
            return self._merge_patch(self.namespaces, "namespaces", name, patch)

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> KubeObject:
        patch = annotation_merge_patch(annotations)
        with self._lock:
            self._enter("annotate_node", name)
            return self._merge_patch(self.nodes, "nodes", name, patch)

    # --- uncached reads -------------------------------------------------------------------------
    def get_statefulset(self, namespace: str, name: str) -> KubeObject | None:
        return self._get(self.statefulsets, "get_statefulset", _key(namespace, name))

    def get_virtual_machine(self, namespace: str, name: str) -> KubeObject | None:
        return self._get(self.virtual_machines, "get_virtual_machine", _key(namespace, name))

    def get_network_attachment_definition(self, namespace: str, name: str) -> KubeObject | None:
        return self._get(
            self.network_attachment_definitions,
            "get_network_attachment_definition",
            _key(namespace, name),
        )

    def get_configmap(self, namespace: str, name: str) -> KubeObject | None:
        return self._get(self.configmaps, "get_configmap", _key(namespace, name))

    # --- EventSink ------------------------------------------------------------------------------
    def create_event(self, namespace: str, body: Mapping[str, Any]) -> KubeObject:
        name = str((body.get("metadata") or {}).get("name") or "")
        if not name:
            raise ValueError("Event needs metadata.name")
        with self._lock:
            self._enter("create_event", _key(namespace, name))
            full = copy.deepcopy(dict(body))
            full["metadata"]["namespace"] = namespace
            return self._create(self.events, "events", _key(namespace, name), full)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> KubeObject:
        with self._lock:
            self._enter("patch_event", _key(namespace, name))
            return self._merge_patch(self.events, "events", _key(namespace, name), patch)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One aggregated Event as the fake recorder holds it."""

    ref: ObjectRef
    type: str
    reason: str
    message: str
    count: int = 1


class FakeEventRecorder:
    """Synchronous `EventRecorder` with the real correlation rules; events land in `events`.

    An event repeated within `window` seconds replaces its earlier entry with `count + 1`
    (the real recorder patches the same Event object), so `events` reads like `kubectl get
    events`: one entry per distinct (object, type, reason, message).
    """

    def __init__(
        self,
        *,
        window: float = 600.0,
        clock: Clock | None = None,
        wall_clock: WallClock = utcnow,
    ) -> None:
        self._lock = threading.Lock()
        # NOTE: without an injected clock time stands still, so repeats always aggregate and
        # tests stay deterministic.
        self._correlator = EventCorrelator(
            component=DEFAULT_COMPONENT,
            window=window,
            clock=clock if clock is not None else FakeClock(),
            wall_clock=wall_clock,
        )
        self._index: dict[str, int] = {}
        self.events: list[RecordedEvent] = []

    def event(self, obj: EventTarget, type_: str, reason: str, message: str) -> None:
        ref = to_object_ref(obj)
        message = validate_event(type_, reason, message)
        with self._lock:
            write = self._correlator.observe(ref, type_, reason, message)
            recorded = RecordedEvent(ref, type_, reason, message, write.count)
            key = f"{write.namespace}/{write.name}"
            if write.action == "patch" and key in self._index:
                self.events[self._index[key]] = recorded
            else:
                self._index[key] = len(self.events)
                self.events.append(recorded)

    def reasons(self) -> list[str]:
        with self._lock:
            return [e.reason for e in self.events]


if TYPE_CHECKING:  # mypy proves the fakes satisfy the ports they stand in for

    def _conforms(
        f: FakeKubeApi, r: FakeEventRecorder
    ) -> tuple[KubeApi, EventSink, EventRecorder, ClusterLister]:
        return f, f, r, f
