"""Builders of raw API objects and models for the pod-logic tests."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from controller.core.address import get_gw_by_cidr
from controller.core.model import Namespace, NetworkAttachmentDefinition, Node, Pod, Subnet

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def raw_pod(
    name: str = "web-0",
    namespace: str = "default",
    *,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str, str] | None = None,
    rv: str = "1",
    phase: str = "Running",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": rv,
    }
    if annotations is not None:
        meta["annotations"] = annotations
    if owner is not None:
        api_version, kind, owner_name = owner
        meta["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": "o"}
        ]
    return {"metadata": meta, "spec": dict(spec), "status": {"phase": phase}}


def pod(
    name: str = "web-0",
    namespace: str = "default",
    *,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str, str] | None = None,
    **fields: Any,
) -> Pod:
    """A Pod model; extra keyword fields are model fields (node_name, phase, ...)."""
    base = Pod.from_dict(raw_pod(name, namespace, annotations=annotations, owner=owner))
    return base if not fields else _replace(base, **fields)


def _replace(obj: Pod, **fields: Any) -> Pod:
    return dataclasses.replace(obj, **fields)


def sts_pod(name: str = "web-1", **kw: Any) -> Pod:
    return pod(name, owner=("apps/v1", "StatefulSet", "web"), **kw)


def vm_pod(name: str = "virt-launcher-vm1-abcde", **kw: Any) -> Pod:
    return pod(name, owner=("kubevirt.io/v1", "VirtualMachineInstance", "vm1"), **kw)


def subnet(
    name: str = "ovn-default",
    cidr: str = "10.16.0.0/16",
    *,
    gateway: str = "",
    provider: str = "",
    vlan: str = "",
    vpc: str = "",
    v4_available: float = 100,
    v6_available: float = 100,
    **spec: Any,
) -> Subnet:
    raw_spec: dict[str, Any] = {"cidrBlock": cidr, **spec}
    raw_spec["gateway"] = gateway or get_gw_by_cidr(cidr)
    if provider:
        raw_spec["provider"] = provider
    if vlan:
        raw_spec["vlan"] = vlan
    if vpc:
        raw_spec["vpc"] = vpc
    return Subnet.from_dict(
        {
            "metadata": {"name": name},
            "spec": raw_spec,
            "status": {"v4availableIPs": v4_available, "v6availableIPs": v6_available},
        }
    )


def namespace(name: str = "default", logical_switch: str | None = "ovn-default") -> Namespace:
    annotations = (
        None if logical_switch is None else {"ovn.kubernetes.io/logical_switch": logical_switch}
    )
    meta: dict[str, Any] = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    return Namespace.from_dict({"metadata": meta})


def node(name: str, *internal_ips: str, tunnel_ip: str = "") -> Node:
    raw: dict[str, Any] = {
        "metadata": {"name": name},
        "status": {"addresses": [{"type": "InternalIP", "address": ip} for ip in internal_ips]},
    }
    if tunnel_ip:
        raw["metadata"]["annotations"] = {"ovn.kubernetes.io/ip_address": tunnel_ip}
    return Node.from_dict(raw)


def nad(name: str, ns: str, config: str) -> NetworkAttachmentDefinition:
    return NetworkAttachmentDefinition(namespace=ns, name=name, config=config)


OVN_CONF = '{"cniVersion": "0.3.1", "type": "kube-ovn", "server_socket": "/run/k.sock"}'
MACVLAN_CONF = '{"cniVersion": "0.3.1", "type": "macvlan", "ipam": {"type": "kube-ovn"}}'
OVN_CONFLIST = (
    '{"cniVersion": "0.3.1", "name": "l", "plugins": [{"type": "kube-ovn"}, {"type": "portmap"}]}'
)
