"""Immutable views of the API objects the pod controller reads (pure, no I/O).

The informers cache raw JSON dicts; `X.from_dict(d)` converts one into a frozen, hashable value
holding only the fields the controller uses. Conversion is tolerant of *missing* fields (they get
Kubernetes' / kube-ovn's defaults, e.g. a subnet's provider `ovn` and vpc `ovn-cluster`, which
kube-ovn's `formatSubnet` would have written) but a field of the wrong type or syntax raises
`MalformedObjectError` naming the object and the field, never a bare KeyError/TypeError.

String maps (annotations, labels) are `FrozenDict`s and lists are tuples, so models can be
compared by value, hashed (queue items, sets) and shared between threads without copying.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core.address import check_protocol
from controller.core.constants import (
    DEFAULT_VPC,
    GATEWAY_TYPE_DISTRIBUTED,
    KIND_STATEFULSET,
    KIND_VM_INSTANCE,
    OVN_PROVIDER,
)
from controller.core.object_fields import EMPTY, FieldReader, FrozenDict

# --- objects ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class Pod:
    """The fields of a v1 Pod the controller uses."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    annotations: FrozenDict = EMPTY
    labels: FrozenDict = EMPTY
    owner_references: tuple[OwnerReference, ...] = ()
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    node_name: str = ""
    host_network: bool = False
    restart_policy: str = "Always"
    termination_grace_period_seconds: int | None = None
    phase: str = ""
    reason: str = ""
    pod_ip: str = ""
    pod_ips: tuple[str, ...] = ()
    host_ip: str = ""

    @property
    def key(self) -> str:
        """The work-queue key `namespace/name`."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_dict(cls, raw: object) -> Pod:
        fast = _pod_fast(raw)
        return fast if fast is not None else cls.read(raw)

    @classmethod
    def read(cls, raw: object) -> Pod:
        """`from_dict` through the general reader only (which names any malformed field)."""
        r = FieldReader("Pod", raw)
        owners = []
        for index, item in enumerate(r.items("metadata.ownerReferences")):
            o = r.child(f"metadata.ownerReferences[{index}]", item)
            owners.append(
                OwnerReference(
                    api_version=o.string("apiVersion"),
                    kind=o.string("kind"),
                    name=o.string("name"),
                    uid=o.string("uid"),
                    controller=o.boolean("controller"),
                )
            )
        pod_ips = []
        for index, item in enumerate(r.items("status.podIPs")):
            if not isinstance(item, Mapping) or not isinstance(item.get("ip", ""), str):
                raise r.fail(f"status.podIPs[{index}]", "an object with a string ip", item)
            pod_ips.append(str(item.get("ip", "")))
        return cls(
            namespace=r.string("metadata.namespace"),
            name=r.string("metadata.name"),
            uid=r.string("metadata.uid"),
            resource_version=r.string("metadata.resourceVersion"),
            annotations=r.str_map("metadata.annotations"),
            labels=r.str_map("metadata.labels"),
            owner_references=tuple(owners),
            deletion_timestamp=r.time("metadata.deletionTimestamp"),
            deletion_grace_period_seconds=r.integer("metadata.deletionGracePeriodSeconds"),
            node_name=r.string("spec.nodeName"),
            host_network=r.boolean("spec.hostNetwork"),
            restart_policy=r.string("spec.restartPolicy", "Always"),
            termination_grace_period_seconds=r.integer("spec.terminationGracePeriodSeconds"),
            phase=r.string("status.phase"),
            reason=r.string("status.reason"),
            pod_ip=r.string("status.podIP"),
            pod_ips=tuple(pod_ips),
            host_ip=r.string("status.hostIP"),
        )

    def owner(self, kind: str, api_prefix: str) -> OwnerReference | None:
        """The first owner of `kind` whose apiVersion starts with `api_prefix`."""
        for ref in self.owner_references:
            if ref.kind == kind and ref.api_version.startswith(api_prefix):
                return ref
        return None

    def statefulset_owner(self) -> OwnerReference | None:
        return self.owner(KIND_STATEFULSET, "apps/")

    def vm_owner(self) -> OwnerReference | None:
        return self.owner(KIND_VM_INSTANCE, "kubevirt.io")


# The exact types a fast-path field may have; NoneType: absent or null (a string reads as "").
_NONE: type = type(None)
_STR: frozenset[type] = frozenset({str})
_STR_OR_NONE: frozenset[type] = frozenset({str, _NONE})
_INT_OR_NONE: frozenset[type] = frozenset({int, _NONE})
_BOOL_OR_NONE: frozenset[type] = frozenset({bool, _NONE})


def _all_in(values: Iterable[object], types: frozenset[type]) -> bool:
    """Is every value exactly of one of `types`?"""
    return {type(v) for v in values} <= types


def _objects(value: object) -> list[dict[str, Any]] | None:
    """A list field of objects for the fast path: [] when absent, None when malformed."""
    if value is None:
        return []
    if type(value) is not list or any(type(item) is not dict for item in value):
        return None
    return value


def _section(raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A nested object of a raw pod for the fast path: {} when absent, None when not a dict."""
    value = raw.get(key)
    if value is None:
        return {}
    return value if type(value) is dict else None


def _pod_fast(raw: object) -> Pod | None:
    """`Pod.from_dict` for a well-formed pod of plain dicts, lists and strings, read without
    the general reader; None when anything is unusual (then the reader parses, or names what
    is wrong). Every pod is parsed on every start-up, and every pod event once."""
    if type(raw) is not dict:
        return None
    meta, spec, status = _section(raw, "metadata"), _section(raw, "spec"), _section(raw, "status")
    if meta is None or spec is None or status is None or meta.get("deletionTimestamp") is not None:
        return None
    texts = (
        meta.get("namespace"),
        meta.get("name"),
        meta.get("uid"),
        meta.get("resourceVersion"),
        spec.get("nodeName"),
        status.get("phase"),
        status.get("reason"),
        status.get("podIP"),
        status.get("hostIP"),
    )
    if not _all_in(texts, _STR_OR_NONE):
        return None
    namespace, name, uid, version, node_name, phase, reason, pod_ip, host_ip = (
        t or "" for t in texts
    )
    maps = []
    for key in ("annotations", "labels"):
        value = meta.get(key)
        if value is None:
            maps.append(EMPTY)
            continue
        if type(value) is not dict or not _all_in(value, _STR) or not _all_in(value.values(), _STR):
            return None
        maps.append(FrozenDict(value))
    refs, listed = _objects(meta.get("ownerReferences")), _objects(status.get("podIPs"))
    if refs is None or listed is None:
        return None
    owners: list[OwnerReference] = []
    for ref in refs:
        fields = (ref.get("apiVersion"), ref.get("kind"), ref.get("name"), ref.get("uid"))
        controller = ref.get("controller")
        if not _all_in(fields, _STR_OR_NONE) or type(controller) not in _BOOL_OR_NONE:
            return None
        api_version, kind, ref_name, ref_uid = (f or "" for f in fields)
        owners.append(OwnerReference(api_version, kind, ref_name, ref_uid, controller is True))
    pod_ips = [item.get("ip", "") for item in listed]
    if not _all_in(pod_ips, _STR):
        return None
    grace, termination = (
        meta.get("deletionGracePeriodSeconds"),
        spec.get("terminationGracePeriodSeconds"),
    )
    if type(grace) not in _INT_OR_NONE or type(termination) not in _INT_OR_NONE:
        return None
    host_network = spec.get("hostNetwork")
    restart_policy = spec.get("restartPolicy")
    if type(host_network) not in _BOOL_OR_NONE or type(restart_policy) not in _STR_OR_NONE:
        return None
    return Pod(
        namespace=namespace,
        name=name,
        uid=uid,
        resource_version=version,
        annotations=maps[0],
        labels=maps[1],
        owner_references=tuple(owners),
        deletion_timestamp=None,
        deletion_grace_period_seconds=grace,
        node_name=node_name,
        host_network=host_network is True,
        restart_policy="Always" if restart_policy is None else restart_policy,
        termination_grace_period_seconds=termination,
        phase=phase,
        reason=reason,
        pod_ip=pod_ip,
        pod_ips=tuple(pod_ips),
        host_ip=host_ip,
    )


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    annotations: FrozenDict = EMPTY
    labels: FrozenDict = EMPTY
    #: False when the raw object had no `metadata.annotations` at all (kube-ovn distinguishes a
    #: nil map, "namespace network annotations is nil", from a missing key).
    has_annotations: bool = False

    @classmethod
    def from_dict(cls, raw: object) -> Namespace:
        r = FieldReader("Namespace", raw)
        return cls(
            name=r.string("metadata.name"),
            annotations=r.str_map("metadata.annotations"),
            labels=r.str_map("metadata.labels"),
            has_annotations=r.get("metadata.annotations") is not None,
        )


@dataclass(frozen=True, slots=True)
class Subnet:
    """A kubeovn.io/v1 Subnet (cluster-scoped), spec defaults as kube-ovn `formatSubnet` sets."""

    name: str
    cidr_block: str
    gateway: str = ""
    exclude_ips: tuple[str, ...] = ()
    provider: str = OVN_PROVIDER
    vpc: str = DEFAULT_VPC
    vlan: str = ""
    gateway_type: str = GATEWAY_TYPE_DISTRIBUTED
    protocol: str = ""
    namespaces: tuple[str, ...] = ()
    logical_gateway: bool = False
    private: bool = False
    default: bool = False
    gateway_node: str = ""
    activate_gateway: str = ""
    v4_available_ips: float = 0.0
    v6_available_ips: float = 0.0
    v4_using_ips: float = 0.0
    v6_using_ips: float = 0.0

    @classmethod
    def from_dict(cls, raw: object) -> Subnet:
        r = FieldReader("Subnet", raw)
        cidr = r.string("spec.cidrBlock")
        return cls(
            name=r.string("metadata.name"),
            cidr_block=cidr,
            gateway=r.string("spec.gateway"),
            exclude_ips=r.str_list("spec.excludeIps"),
            provider=r.string("spec.provider") or OVN_PROVIDER,
            vpc=r.string("spec.vpc") or DEFAULT_VPC,
            vlan=r.string("spec.vlan"),
            gateway_type=r.string("spec.gatewayType") or GATEWAY_TYPE_DISTRIBUTED,
            protocol=r.string("spec.protocol") or check_protocol(cidr),
            namespaces=r.str_list("spec.namespaces"),
            logical_gateway=r.boolean("spec.logicalGateway"),
            private=r.boolean("spec.private"),
            default=r.boolean("spec.default"),
            gateway_node=r.string("spec.gatewayNode"),
            activate_gateway=r.string("status.activateGateway"),
            v4_available_ips=r.number("status.v4availableIPs"),
            v6_available_ips=r.number("status.v6availableIPs"),
            v4_using_ips=r.number("status.v4usingIPs"),
            v6_using_ips=r.number("status.v6usingIPs"),
        )


@dataclass(frozen=True, slots=True)
class Node:
    """A Node: its InternalIPs, metadata and whether its `Ready` condition is `True` (kube-ovn's
    `nodeReady`, the test a centralized subnet's gateway node must pass)."""

    name: str
    internal_ips: tuple[str, ...] = ()
    annotations: FrozenDict = EMPTY
    labels: FrozenDict = EMPTY
    ready: bool = False

    @classmethod
    def from_dict(cls, raw: object) -> Node:
        r = FieldReader("Node", raw)
        ips = []
        for index, item in enumerate(r.items("status.addresses")):
            if not isinstance(item, Mapping):
                raise r.fail(f"status.addresses[{index}]", "an object", item)
            if item.get("type") == "InternalIP":
                address = item.get("address")
                if not isinstance(address, str):
                    raise r.fail(f"status.addresses[{index}].address", "a string", address)
                ips.append(address)
        ready = False
        for index, item in enumerate(r.items("status.conditions")):
            if not isinstance(item, Mapping):
                raise r.fail(f"status.conditions[{index}]", "an object", item)
            if item.get("type") == "Ready":
                ready = item.get("status") == "True"
        return cls(
            name=r.string("metadata.name"),
            internal_ips=tuple(ips),
            annotations=r.str_map("metadata.annotations"),
            labels=r.str_map("metadata.labels"),
            ready=ready,
        )


@dataclass(frozen=True, slots=True)
class Vlan:
    name: str
    id: int = 0
    provider: str = ""

    @classmethod
    def from_dict(cls, raw: object) -> Vlan:
        r = FieldReader("Vlan", raw)
        vlan_id = r.integer("spec.id")
        if vlan_id is None:  # deprecated v1.8 spelling
            vlan_id = r.integer("spec.vlanId")
        return cls(
            name=r.string("metadata.name"),
            id=vlan_id or 0,
            provider=r.string("spec.provider") or r.string("spec.providerInterfaceName"),
        )


@dataclass(frozen=True, slots=True)
class Vpc:
    name: str
    router: str = ""
    default_logical_switch: str = ""
    namespaces: tuple[str, ...] = ()
    default: bool = False

    @classmethod
    def from_dict(cls, raw: object) -> Vpc:
        r = FieldReader("Vpc", raw)
        return cls(
            name=r.string("metadata.name"),
            router=r.string("status.router"),
            default_logical_switch=r.string("status.defaultLogicalSwitch"),
            namespaces=r.str_list("spec.namespaces"),
            default=r.boolean("status.default"),
        )


@dataclass(frozen=True, slots=True)
class NetworkAttachmentDefinition:
    """A k8s.cni.cncf.io/v1 NAD; `config` is the raw CNI JSON string of `spec.config`."""

    namespace: str
    name: str
    config: str = ""

    @classmethod
    def from_dict(cls, raw: object) -> NetworkAttachmentDefinition:
        r = FieldReader("NetworkAttachmentDefinition", raw)
        return cls(
            namespace=r.string("metadata.namespace"),
            name=r.string("metadata.name"),
            config=r.string("spec.config"),
        )


@dataclass(frozen=True, slots=True)
class StatefulSet:
    """An apps/v1 StatefulSet, as `isStatefulSetPodToDel` / `appendCheckPodToDel` read it."""

    namespace: str
    name: str
    replicas: int = 1
    deletion_timestamp: datetime | None = None
    template_annotations: FrozenDict = EMPTY

    @classmethod
    def from_dict(cls, raw: object) -> StatefulSet:
        r = FieldReader("StatefulSet", raw)
        replicas = r.integer("spec.replicas")
        return cls(
            namespace=r.string("metadata.namespace"),
            name=r.string("metadata.name"),
            replicas=1 if replicas is None else replicas,  # the API server's default
            deletion_timestamp=r.time("metadata.deletionTimestamp"),
            template_annotations=r.str_map("spec.template.metadata.annotations"),
        )


@dataclass(frozen=True, slots=True)
class VirtualMachine:
    """A kubevirt.io/v1 VirtualMachine (its name equals its VMI's and the launcher pod owner's)."""

    namespace: str
    name: str
    deletion_timestamp: datetime | None = None
    template_annotations: FrozenDict = EMPTY

    @classmethod
    def from_dict(cls, raw: object) -> VirtualMachine:
        r = FieldReader("VirtualMachine", raw)
        return cls(
            namespace=r.string("metadata.namespace"),
            name=r.string("metadata.name"),
            deletion_timestamp=r.time("metadata.deletionTimestamp"),
            template_annotations=r.str_map("spec.template.metadata.annotations"),
        )


class ProviderType(enum.Enum):
    """kube-ovn `providerType`: an OVN network (gets an LSP) or an IPAM-only attachment."""

    IPAM = "ipam"
    ORIGINAL = "original"


@dataclass(frozen=True, slots=True)
class PodNet:
    """One network of a pod (kube-ovn `kubeovnNet`)."""

    type: ProviderType
    provider_name: str
    subnet: Subnet
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class NetworkSelectionElement:
    """One element of a pod's multus network annotation (multus `NetworkSelectionElement`)."""

    name: str
    namespace: str
    interface: str = ""
    ips: tuple[str, ...] = ()
    mac: str = ""
