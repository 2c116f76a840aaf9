"""Ports between the pod controller and the Kubernetes API server.

Reads normally come from informer caches; `KubeApi` holds the *writes* kube-ovn's pod controller
makes (kube-ovn v1.8.18 `pkg/controller/pod.go`, `node.go createOrUpdateCrdIPs`) plus the few
uncached GETs it does (StatefulSet, VirtualMachine, NetworkAttachmentDefinition, ConfigMap, IP).

Contract of every `KubeApi` implementation (the real adapter in `client.py`, the in-memory fake in
`fake.py`; `tests/kube/test_contract.py` runs one suite over both):

* Objects go in and come out as plain JSON dicts (`KubeObject`), never client model classes.
* Errors are `controller.apiclient.errors.KubeApiError` subclasses, nothing else.
* `get_*` return `None` for a missing object (404) instead of raising; this includes an API group
  that is not installed (kubevirt), which answers 404 as well.
* Annotation writes are JSON *merge* patches that touch only the keys passed in. NOTE: kube-ovn
  sends a JSON patch replacing the whole `/metadata/annotations` map, computed from a cached copy;
  any annotation written by someone else between the informer event and the patch (another
  controller, a user, kube-ovn's own CNI daemon) is silently reverted. A merge patch of our keys
  cannot clobber foreign keys, needs no resourceVersion, and is idempotent, so retries are safe.
  Callers that do need "nothing changed since I read it" pass `resource_version`: it goes into the
  merge patch as `metadata.resourceVersion`, which the API server treats as a precondition
  (`ConflictError` on mismatch).
* `create_or_update_ip` follows kube-ovn: create when absent, otherwise replace labels and spec
  and write **only if they differ** (no write, no resourceVersion bump, for a no-op). With
  `likely_absent=True` the adapter POSTs first (one request for a new CR instead of GET + POST)
  and falls back to read-and-update on AlreadyExists; the outcome does not depend on the hint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, Union

from controller.core.constants import SUBNET_NAME_LABEL

KubeObject = dict[str, Any]
"""A Kubernetes object as decoded JSON."""

EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"

RequestObserver = Callable[[str, str, str, float], None]
"""`on_request(verb, url_template, code, seconds)`, called once per API request.

`verb` is the HTTP method (client-go's `method`/`verb` labels), `url_template` the request path
with namespace and name replaced by `{namespace}`/`{name}` (client-go's `url` label), `code` the
HTTP status as a string or `"<error>"` when no response arrived (client-go's convention).
"""


class NamedObject(Protocol):
    """Anything naming a namespaced object, e.g. the controller's frozen `model.Pod`."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...


EventTarget = Union["ObjectRef", Mapping[str, Any], NamedObject]
"""What `EventRecorder.event` accepts: an ObjectRef, a decoded object, or a model object."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Enough of an object to name it as an Event's `involvedObject`."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""

    @classmethod
    def from_object(
        cls, obj: Mapping[str, Any], *, default_kind: str = "Pod", default_api_version: str = "v1"
    ) -> ObjectRef:
        """Reference a decoded object. Items of a LIST carry no `kind`, hence the defaults."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise ValueError("object has no metadata.name; cannot reference it in an Event")
        return cls(
            kind=str(obj.get("kind") or default_kind),
            name=str(meta["name"]),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            api_version=str(obj.get("apiVersion") or default_api_version),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @classmethod
    def of(cls, target: EventTarget, *, default_kind: str = "Pod") -> ObjectRef:
        """Reference any `EventTarget`; model objects give kind `default_kind`, apiVersion v1."""
        if isinstance(target, ObjectRef):
            return target
        if isinstance(target, Mapping):
            return cls.from_object(target, default_kind=default_kind)
        name = getattr(target, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"cannot reference {type(target).__name__} in an Event: no name")
        return cls(
            kind=default_kind,
            name=name,
            namespace=str(getattr(target, "namespace", "") or ""),
            uid=str(getattr(target, "uid", "") or ""),
            resource_version=str(getattr(target, "resource_version", "") or ""),
        )

    def to_involved_object(self) -> dict[str, str]:
        ref = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.namespace:
            ref["namespace"] = self.namespace
        if self.uid:
            ref["uid"] = self.uid
        if self.resource_version:
            ref["resourceVersion"] = self.resource_version
        return ref


class KubeApi(Protocol):
    """The Kubernetes writes (and uncached reads) of the pod controller."""

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
        """Set `annotations` on the pod, leaving every other key alone; return the new pod.

        A merge patch creates the annotations map when the pod has none, so one call serves a
        pod with and without annotations.
        Raises `NotFoundError` if the pod is gone (kube-ovn then enqueues a delete). With `uid`
        the patch carries it as a precondition: `ConflictError` when the pod of that name is
        another incarnation (deleted and re-created since it was read).
        """
        ...

    def delete_pod_annotations(
        self,
        namespace: str,
        name: str,
        keys: Iterable[str],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        """Remove `keys` (absent keys are fine) from the pod's annotations; return the new pod."""
        ...

    # --- kubeovn.io/v1 IP -----------------------------------------------------------------------
    def create_or_update_ip(
        self, ip_cr: Mapping[str, Any], *, likely_absent: bool = False
    ) -> KubeObject:
        """Create the IP CR or bring labels and spec in line; no write when already equal.

        `likely_absent` is a hint (e.g. the informer cache has no such CR): try the create
        first and skip the read. The result is the same either way.
        """
        ...

    def delete_ip(self, name: str) -> bool:
        """Delete the IP CR; `False` when it did not exist (kube-ovn ignores NotFound)."""
        ...

    def get_ip(self, name: str) -> KubeObject | None: ...

    def list_ips(self) -> list[KubeObject]: ...

    # --- kubeovn.io/v1 Subnet -------------------------------------------------------------------
    def create_subnet(self, body: Mapping[str, Any]) -> KubeObject:
        """Create a Subnet; `AlreadyExistsError` if the name is taken."""
        ...

    def get_subnet(self, name: str) -> KubeObject | None: ...

    def update_subnet_status(self, name: str, status_patch: Mapping[str, Any]) -> KubeObject:
        """Merge-patch the status subresource (only the given status fields change)."""
        ...

    # --- namespaces and nodes -------------------------------------------------------------------
    def annotate_namespace(self, name: str, annotations: Mapping[str, str | None]) -> KubeObject:
        """Merge-patch namespace annotations; a `None` value removes the key."""
        ...

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> KubeObject:
        """Merge-patch node annotations; a `None` value removes the key."""
        ...

    # --- uncached reads -------------------------------------------------------------------------
    def get_statefulset(self, namespace: str, name: str) -> KubeObject | None: ...

    def get_virtual_machine(self, namespace: str, name: str) -> KubeObject | None:
        """kubevirt.io/v1 VirtualMachine; `None` also when kubevirt is not installed."""
        ...

    def get_network_attachment_definition(self, namespace: str, name: str) -> KubeObject | None: ...

    def get_configmap(self, namespace: str, name: str) -> KubeObject | None: ...


class ClusterLister(Protocol):
    """Uncached cluster-wide lists, for one-shot tools (`controller.audit.check`) that run without
    informers. Every object of the collection is returned (the adapter pages through it)."""

    def list_pods(self) -> list[KubeObject]: ...

    def list_namespaces(self) -> list[KubeObject]: ...

    def list_nodes(self) -> list[KubeObject]: ...

    def list_subnets(self) -> list[KubeObject]: ...

    def list_ips(self) -> list[KubeObject]: ...

    def list_vpcs(self) -> list[KubeObject]:
        """kubeovn.io/v1 Vpcs; empty when the CRD is not installed."""
        ...

    def list_security_groups(self) -> list[KubeObject]:
        """kubeovn.io/v1 SecurityGroups; empty when the CRD is not installed."""
        ...

    def list_statefulsets(self) -> list[KubeObject]: ...

    def list_virtual_machines(self) -> list[KubeObject]:
        """kubevirt.io/v1 VirtualMachines; empty when kubevirt is not installed."""
        ...

    def list_events(self) -> list[KubeObject]:
        """core/v1 Events of every namespace (the Warning Events a refused pod carries)."""
        ...


class EventRecorder(Protocol):
    """Records Kubernetes Events about an object; never blocks and never raises on API errors."""

    def event(self, obj: EventTarget, type_: str, reason: str, message: str) -> None:
        """Record an Event about `obj`: an `ObjectRef`, a pod dict, or a `model.Pod`."""
        ...


class EventSink(Protocol):
    """Where an `EventRecorder` writes core/v1 Events (implemented by the adapter and the fake)."""

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> KubeObject: ...

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> KubeObject: ...


def check_object_name(what: str, value: str) -> str:
    """Reject names that cannot address an object (empty, non-string, containing "/")."""
    if not isinstance(value, str) or not value or "/" in value:
        raise ValueError(f"invalid {what} {value!r} for a Kubernetes object")
    return value


def annotation_merge_patch(
    annotations: Mapping[str, str | None],
    resource_version: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """The merge-patch document both implementations apply (`None` deletes a key); a `uid`
    in the patched metadata is a precondition (the API server answers 409 on another UID)."""
    for key, value in annotations.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"annotation key must be a non-empty string, not {key!r}")
        if value is not None and not isinstance(value, str):
            raise ValueError(f"annotation {key!r} must be a string, not {type(value).__name__}")
    meta: dict[str, Any] = {"annotations": dict(annotations)}
    if resource_version:
        meta["resourceVersion"] = resource_version
    if uid:
        meta["uid"] = uid
    return {"metadata": meta}


IP_API_VERSION = "kubeovn.io/v1"


def desired_ip(ip_cr: Mapping[str, Any]) -> KubeObject:
    """Validate an IP CR body for `create_or_update_ip` and fill in apiVersion/kind."""
    meta = ip_cr.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ValueError("IP CR needs metadata.name")
    spec = ip_cr.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError(f"IP CR {meta['name']!r} needs a spec mapping")
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ValueError(f"IP CR {meta['name']!r}: metadata.labels must be a mapping")
    body: KubeObject = {
        "apiVersion": IP_API_VERSION,
        "kind": "IP",
        "metadata": {**dict(meta), "labels": dict(labels)},
        "spec": dict(spec),
    }
    body["metadata"].pop("resourceVersion", None)
    return body


def ip_owner_conflict(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> str | None:
    """Why a pod's IP CR body must not overwrite `existing`, or None.

    A body for a pod (its spec names a namespace) never takes over a CR that records another
    owner: a node's (`node-<node>`, no namespace) or another pod's whose name and namespace
    join to the same CR name. kube-ovn v1.8.18 `createOrUpdateCrdIPs` overwrites it, and the
    owner's record stays wrong until the owner is written again. A node's body (no namespace)
    may repair its own CR whatever it says; a CR that names no pod is anyone's.
    """
    have = existing.get("spec")
    want = desired.get("spec") or {}
    if not isinstance(have, Mapping) or not want.get("namespace"):
        return None
    owner = (str(have.get("namespace") or ""), str(have.get("podName") or ""))
    name = str(desired["metadata"]["name"])
    wanted = (str(want.get("namespace") or ""), str(want.get("podName") or ""))
    if not owner[1] or owner == wanted or not (owner[0] or name.startswith("node-")):
        return None
    who = f"pod {owner[0]}/{owner[1]}" if owner[0] else f"node {owner[1]}"
    return f"IP CR {name} belongs to {who}"


def ip_update(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> KubeObject | None:
    """The object to PUT so `existing` carries `desired`'s labels and spec; `None` if equal.

    NOTE: kube-ovn (`createOrUpdateCrdIPs`) overwrites labels and spec and updates when either
    differs (DeepEqual). Here the comparison is semantic: a field that is absent, null, "" or
    empty means the same (kube-ovn writes `containerID: ""` and null lists, which we omit or
    write as []), so a CR kube-ovn wrote is not rewritten after a migration; labels other
    controllers set are kept (only the subnet labels are ours: `ovn.kubernetes.io/subnet` and
    the one named after the subnet), and so are spec fields we do not write. Every other field
    of the existing object is kept, including its resourceVersion, so a concurrent writer makes
    the PUT fail with a conflict instead of being overwritten.
    """
    meta = existing.get("metadata") or {}
    have_labels = dict(meta.get("labels") or {})
    ours = {SUBNET_NAME_LABEL, str(have_labels.get(SUBNET_NAME_LABEL) or "")}
    ours.add(str((existing.get("spec") or {}).get("subnet") or ""))
    want_labels = {k: v for k, v in have_labels.items() if k not in ours}
    want_labels.update(desired["metadata"].get("labels") or {})
    have_spec = existing.get("spec") or {}
    if have_labels == want_labels and _same_fields(have_spec, desired["spec"]):
        return None
    want_spec = {**have_spec, **desired["spec"]}
    updated: KubeObject = dict(existing)
    updated["metadata"] = {**dict(meta), "labels": want_labels}
    updated["spec"] = want_spec
    updated.setdefault("apiVersion", IP_API_VERSION)
    updated.setdefault("kind", "IP")
    return updated


def _same_fields(have: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Does `have` carry every field of `desired`, an empty value (absent, null, "", [] or
    {}) counting as the field's absence? (Fields only `have` has are kept by an update.)"""
    for key, want in desired.items():
        got = have.get(key)
        if got != want and not (_empty(got) and _empty(want)):
            return False
    return True


def _empty(value: Any) -> bool:
    return value in (None, "", [], {})
