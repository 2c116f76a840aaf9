"""The resource types the API server emulator serves, and the Kubernetes `Status` error model.

Pure data, no I/O. `RESOURCES` lists every served type (group, version, plural, kind, scope,
status subresource, whether strategic merge patch is allowed); `lookup()` resolves a URL's
(group, version, plural). `ApiError` is the one exception type the store and the HTTP layer
raise: it renders as a `Status` body with the code, reason and message a real apiserver uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]

VERBS_ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served REST resource (e.g. core v1 `pods`), as its discovery document describes it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str
    has_status: bool = False
    # Strategic merge patch exists only for built-in kinds; custom resources answer 415.
    builtin: bool = True
    short_names: tuple[str, ...] = ()
    # Field selectors the real apiserver accepts besides metadata.name/metadata.namespace.
    field_labels: tuple[str, ...] = ()
    # A real DELETE returns the deleted object for these kinds (pods, services), a Success
    # Status otherwise (custom resources included).
    delete_returns_object: bool = False
    # Kinds with a status subresource drop the status sent on create, except these (nodes).
    status_on_create: bool = False
    # An update (PUT) without metadata.resourceVersion is refused (422) for leases and custom
    # resources, whose registry strategies do not allow unconditional updates.
    unconditional_update: bool = True
    verbs: tuple[str, ...] = field(default=VERBS_ALL)
    # The `scale` subresource (autoscaling/v1 Scale over spec.replicas): kubectl scale uses it.
    has_scale: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def group_resource(self) -> str:
        """`pods` or `subnets.kubeovn.io`: the form error messages use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def __str__(self) -> str:
        return f"{self.group_resource}/{self.version}"


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "type",
)

RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        "pod",
        has_status=True,
        short_names=("po",),
        field_labels=_POD_FIELDS,
        delete_returns_object=True,
    ),
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        "namespace",
        has_status=True,
        short_names=("ns",),
        field_labels=("status.phase",),
    ),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        "node",
        has_status=True,
        short_names=("no",),
        field_labels=("spec.unschedulable",),
        status_on_create=True,
    ),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", short_names=("cm",)),
    ResourceType(
        "", "v1", "events", "Event", True, "event", short_names=("ev",), field_labels=_EVENT_FIELDS
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        True,
        "service",
        has_status=True,
        short_names=("svc",),
        field_labels=("spec.clusterIP", "spec.type"),
        delete_returns_object=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        True,
        "statefulset",
        has_status=True,
        short_names=("sts",),
        has_scale=True,
    ),
    ResourceType(
        "coordination.k8s.io", "v1", "leases", "Lease", True, "lease", unconditional_update=False
    ),
    ResourceType(
        "kubeovn.io",
        "v1",
        "subnets",
        "Subnet",
        False,
        "subnet",
        has_status=True,
        builtin=False,
        unconditional_update=False,
    ),
    ResourceType(
        "kubeovn.io",
        "v1",
        "ips",
        "IP",
        False,
        "ip",
        builtin=False,
        short_names=("ip",),
        unconditional_update=False,
    ),
    ResourceType(
        "kubeovn.io",
        "v1",
        "vlans",
        "Vlan",
        False,
        "vlan",
        has_status=True,
        builtin=False,
        unconditional_update=False,
    ),
    ResourceType(
        "kubeovn.io",
        "v1",
        "vpcs",
        "Vpc",
        False,
        "vpc",
        has_status=True,
        builtin=False,
        unconditional_update=False,
    ),
    ResourceType(
        "kubeovn.io",
        "v1",
        "security-groups",
        "SecurityGroup",
        False,
        "security-group",
        has_status=True,
        builtin=False,
        short_names=("sg",),
        delete_returns_object=True,
    ),
    ResourceType(
        "k8s.cni.cncf.io",
        "v1",
        "network-attachment-definitions",
        "NetworkAttachmentDefinition",
        True,
        "network-attachment-definition",
        builtin=False,
        short_names=("net-attach-def",),
        unconditional_update=False,
    ),
    ResourceType(
        "kubevirt.io",
        "v1",
        "virtualmachines",
        "VirtualMachine",
        True,
        "virtualmachine",
        has_status=True,
        builtin=False,
        short_names=("vm", "vms"),
        unconditional_update=False,
    ),
    ResourceType(
        "kubevirt.io",
        "v1",
        "virtualmachineinstances",
        "VirtualMachineInstance",
        True,
        "virtualmachineinstance",
        has_status=True,
        builtin=False,
        short_names=("vmi", "vmis"),
        unconditional_update=False,
    ),
)

_BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}
_BY_PLURAL: dict[str, ResourceType] = {r.plural: r for r in RESOURCES}


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    """The served type at /api[s]/{group}/{version}/{plural}, or None."""
    return _BY_PATH.get((group, version, plural))


def resource_for(name: str) -> ResourceType:
    """Resolve a name used by tests: a plural (`pods`), `plural.group` or a ResourceType."""
    if name in _BY_PLURAL:
        return _BY_PLURAL[name]
    plural, _, group = name.partition(".")
    for r in RESOURCES:
        if r.plural == plural and r.group == group:
            return r
    raise KeyError(f"unknown resource {name!r}")


def resource_for_kind(api_version: str, kind: str) -> ResourceType:
    """The served type of an object by its apiVersion and kind (as in a manifest)."""
    for r in RESOURCES:
        if r.api_version == api_version and r.kind == kind:
            return r
    raise KeyError(f"no served resource for apiVersion {api_version!r} kind {kind!r}")


def groups() -> dict[str, list[str]]:
    """Served API groups (core excluded) mapped to their versions, in registry order."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in out.setdefault(r.group, []):
            out[r.group].append(r.version)
    return out


def in_group_version(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCES if r.group == group and r.version == version]


class ApiError(Exception):
    """A request the apiserver refuses; `status()` is the `Status` body it answers with."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: JsonDict | None = None,
        metadata: JsonDict | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.metadata = metadata or {}

    def status(self) -> JsonDict:
        body: JsonDict = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType | None, name: str) -> JsonDict:
    d: JsonDict = {"name": name}
    if rt is not None:
        if rt.group:
            d["group"] = rt.group
        d["kind"] = rt.plural
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{rt.group_resource} "{name}" not found', details=_details(rt, name)
    )


def namespace_not_found(ns: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'namespaces "{ns}" not found', details={"name": ns, "kind": "namespaces"}
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{rt.group_resource} "{name}" already exists',
        details=_details(rt, name),
    )


def conflict(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rt.group_resource} "{name}": {why}',
        details=_details(rt, name),
    )


def modified_conflict(rt: ResourceType, name: str) -> ApiError:
    return conflict(
        rt,
        name,
        "the object has been modified; please apply your changes to the "
        "latest version and try again",
    )


def invalid(rt: ResourceType | None, name: str, message: str) -> ApiError:
    kind = rt.kind if rt is not None else "Object"
    return ApiError(
        422, "Invalid", f'{kind} "{name}" is invalid: {message}', details=_details(rt, name)
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str, *, continue_token: str | None = None) -> ApiError:
    meta = {"continue": continue_token} if continue_token else None
    return ApiError(410, "Expired", message, metadata=meta)


def too_old(requested: int, oldest: int) -> ApiError:
    return gone(f"too old resource version: {requested} ({oldest})")


def too_large(requested: int, current: int) -> ApiError:
    # NOTE: a real apiserver waits ~3 s for its cache to catch up before answering this 504;
    # the body is kube-apiserver's (a Timeout status, hence the message's "Timeout: " prefix).
    return ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        details={
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def success_status(rt: ResourceType, obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata", {})
    details = _details(rt, meta.get("name", ""))
    if meta.get("uid"):
        details["uid"] = meta["uid"]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
