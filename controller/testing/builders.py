"""Builders of the Kubernetes objects tests and benches feed the controller.

Contract: each builder returns a fresh plain-JSON dict (inputs are copied, nothing is shared
between two results) holding exactly the fields asked for: an option left at `None` leaves its
field out, so a suite states the object shape it relies on. One builder per kind: `pod`,
`subnet`, `node`, `namespace`, `nad`; `owner_reference` spells an ownerReferences entry. The
typed-model builders (`controller.core.model` objects) live in `controller.testing.models`.

Spec fields a builder has no option for are keyword arguments in the API's own camelCase
(`pod(..., hostNetwork=True)`, `subnet(..., provider="p")`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

# A fixed "now" for tests that compare timestamps (deletionTimestamp, lease times, ...).
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

DEFAULT_NAMESPACE = "default"
CONTAINERS: tuple[Mapping[str, str], ...] = ({"name": "app", "image": "busybox"},)

# (apiVersion, kind, name), or a whole ownerReferences entry.
Owner = tuple[str, str, str] | Mapping[str, Any]

# NetworkAttachmentDefinition configs: kube-ovn's own CNI, a conflist that chains it, and a
# macvlan attachment whose addresses kube-ovn's IPAM hands out.
OVN_CONF = '{"cniVersion": "0.3.1", "type": "kube-ovn", "server_socket": "/run/k.sock"}'
MACVLAN_CONF = '{"cniVersion": "0.3.1", "type": "macvlan", "ipam": {"type": "kube-ovn"}}'
OVN_CONFLIST = (
    '{"cniVersion": "0.3.1", "name": "l", "plugins": [{"type": "kube-ovn"}, {"type": "portmap"}]}'
)


def timestamp(when: datetime) -> str:
    """`when` as the API server writes metadata timestamps (RFC 3339, seconds, UTC)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def allocated(
    ip: str,
    mac: str,
    switch: str = "ovn-default",
    *,
    provider: str = "ovn",
    cidr: str | None = None,
    gateway: str | None = None,
    routed: bool = False,
) -> dict[str, str]:
    """The annotations an add leaves on a pod for one network (`<provider>.kubernetes.io/...`):
    the allocated mark, address, MAC, logical switch, the CIDR and gateway when given, and the
    routed mark of a finished update when `routed`."""
    prefix = f"{provider}.kubernetes.io"
    annotations = {
        f"{prefix}/allocated": "true",
        f"{prefix}/ip_address": ip,
        f"{prefix}/mac_address": mac,
        f"{prefix}/logical_switch": switch,
    }
    if cidr is not None:
        annotations[f"{prefix}/cidr"] = cidr
    if gateway is not None:
        annotations[f"{prefix}/gateway"] = gateway
    if routed:
        annotations[f"{prefix}/routed"] = "true"
    return annotations


def owner_reference(owner: Owner, *, uid: str | None = None) -> dict[str, Any]:
    """An ownerReferences entry; a tuple gives apiVersion, kind and name (and `uid` if set)."""
    if not isinstance(owner, tuple):
        return dict(owner)
    api_version, kind, name = owner
    ref: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name}
    if uid is not None:
        ref["uid"] = uid
    return ref


def _metadata(
    name: str,
    namespace: str | None,
    *,
    uid: str | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return meta


def _object(
    type_meta: tuple[str, str] | None,
    meta: dict[str, Any],
    spec: dict[str, Any],
    status: Mapping[str, Any] | None,
    status_fields: Mapping[str, Any],
) -> dict[str, Any]:
    """apiVersion/kind (when `type_meta`), metadata, spec, and a status only when one is given:
    a copy of `status` with `status_fields` set over it."""
    obj: dict[str, Any] = {}
    if type_meta is not None:
        obj["apiVersion"], obj["kind"] = type_meta
    obj["metadata"] = meta
    obj["spec"] = spec
    if status is not None or status_fields:
        obj["status"] = {**copy.deepcopy(dict(status or {})), **status_fields}
    return obj


def pod(
    name: str,
    namespace: str | None = DEFAULT_NAMESPACE,
    *,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    owner: Owner | None = None,
    owner_uid: str | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    deletion_timestamp: str | None = None,
    grace_period: int | None = None,
    node: str | None = None,
    containers: Sequence[Mapping[str, str]] | None = CONTAINERS,
    phase: str | None = None,
    status: Mapping[str, Any] | None = None,
    typed: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A Pod. `node` sets spec.nodeName, `phase` status.phase (merged over `status`),
    `deletion_timestamp` and `grace_period` the deletion metadata; `typed` adds apiVersion/kind;
    `containers=None` leaves spec.containers out."""
    meta = _metadata(
        name,
        namespace,
        uid=uid,
        resource_version=resource_version,
        labels=labels,
        annotations=annotations,
    )
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner, uid=owner_uid)]
    if deletion_timestamp is not None:
        meta["deletionTimestamp"] = deletion_timestamp
    if grace_period is not None:
        meta["deletionGracePeriodSeconds"] = grace_period
    body_spec: dict[str, Any] = {}
    if containers is not None:
        body_spec["containers"] = [dict(c) for c in containers]
    body_spec.update(copy.deepcopy(spec))
    if node is not None:
        body_spec["nodeName"] = node
    fields = {} if phase is None else {"phase": phase}
    return _object(("v1", "Pod") if typed else None, meta, body_spec, status, fields)


def subnet(
    name: str,
    cidr: str,
    *,
    gateway: str | None = None,
    exclude_ips: Sequence[str] | None = None,
    available: float | None = None,
    status: Mapping[str, Any] | None = None,
    resource_version: str | None = None,
    typed: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A kube-ovn Subnet with spec.cidrBlock `cidr`; `available` sets both v4availableIPs and
    v6availableIPs in the status (merged over `status`)."""
    body_spec: dict[str, Any] = {"cidrBlock": cidr}
    if gateway is not None:
        body_spec["gateway"] = gateway
    if exclude_ips is not None:
        body_spec["excludeIps"] = list(exclude_ips)
    body_spec.update(copy.deepcopy(spec))
    fields = {} if available is None else {"v4availableIPs": available, "v6availableIPs": available}
    type_meta = ("kubeovn.io/v1", "Subnet") if typed else None
    meta = _metadata(name, None, resource_version=resource_version)
    return _object(type_meta, meta, body_spec, status, fields)


def node(
    name: str,
    *internal_ips: str,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """A Node whose status lists `internal_ips` as InternalIP addresses."""
    meta = _metadata(
        name, None, resource_version=resource_version, labels=labels, annotations=annotations
    )
    return {
        "metadata": meta,
        "status": {"addresses": [{"type": "InternalIP", "address": ip} for ip in internal_ips]},
    }


def namespace(
    name: str,
    *,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Namespace."""
    return {"metadata": _metadata(name, None, labels=labels, annotations=annotations)}


def nad(
    name: str,
    namespace: str = DEFAULT_NAMESPACE,
    config: str | Mapping[str, Any] = OVN_CONF,
    *,
    typed: bool = False,
) -> dict[str, Any]:
    """A NetworkAttachmentDefinition; a mapping `config` is serialised to JSON (spec.config is a
    string in the API)."""
    text = config if isinstance(config, str) else json.dumps(config)
    type_meta = ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition") if typed else None
    meta = {"name": name, "namespace": namespace}
    return _object(type_meta, meta, {"config": text}, None, {})
