"""Builders of the typed models (`controller.core.model`) the pure pod logic takes.

Contract: each builder parses a raw object from `controller.testing.builders` with the model's
own `from_dict`, so a model built here is one the informer path could have produced. Defaults
describe one running pod `web-0` in namespace `default` bound to subnet `ovn-default`
(10.16.0.0/16).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from controller.core.address import get_gw_by_cidr
from controller.core.model import Namespace, NetworkAttachmentDefinition, Node, Pod, Subnet
from controller.testing import builders

STS_OWNER = ("apps/v1", "StatefulSet", "web")
VM_OWNER = ("kubevirt.io/v1", "VirtualMachineInstance", "vm1")


def pod(
    name: str = "web-0",
    namespace: str = builders.DEFAULT_NAMESPACE,
    *,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str, str] | None = None,
    **fields: Any,
) -> Pod:
    """A running Pod model; extra keyword fields are model fields (node_name, phase, ...)."""
    raw = builders.pod(
        name,
        namespace,
        annotations=annotations,
        owner=owner,
        owner_uid="o",
        uid=f"uid-{name}",
        resource_version="1",
        containers=None,
        phase="Running",
    )
    base = Pod.from_dict(raw)
    return dataclasses.replace(base, **fields) if fields else base


def sts_pod(name: str = "web-1", **kw: Any) -> Pod:
    """A pod of StatefulSet `web`."""
    return pod(name, owner=STS_OWNER, **kw)


def vm_pod(name: str = "virt-launcher-vm1-abcde", **kw: Any) -> Pod:
    """A launcher pod of KubeVirt VirtualMachineInstance `vm1`."""
    return pod(name, owner=VM_OWNER, **kw)


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
    """A Subnet model; the gateway defaults to kube-ovn's (the CIDR's first address)."""
    options: dict[str, Any] = {"provider": provider, "vlan": vlan, "vpc": vpc}
    raw = builders.subnet(
        name,
        cidr,
        status={"v4availableIPs": v4_available, "v6availableIPs": v6_available},
        **spec,
        **{key: value for key, value in options.items() if value},
    )
    raw["spec"]["gateway"] = gateway or get_gw_by_cidr(cidr)
    return Subnet.from_dict(raw)


def namespace(
    name: str = builders.DEFAULT_NAMESPACE, logical_switch: str | None = "ovn-default"
) -> Namespace:
    """A Namespace model bound to `logical_switch` (none when `None`)."""
    annotations = (
        None if logical_switch is None else {"ovn.kubernetes.io/logical_switch": logical_switch}
    )
    return Namespace.from_dict(builders.namespace(name, annotations=annotations))


def node(name: str, *internal_ips: str, tunnel_ip: str = "") -> Node:
    """A Node model; `tunnel_ip` is the join-network address kube-ovn annotates on the node."""
    annotations = {"ovn.kubernetes.io/ip_address": tunnel_ip} if tunnel_ip else None
    return Node.from_dict(builders.node(name, *internal_ips, annotations=annotations))


def nad(name: str, ns: str, config: str) -> NetworkAttachmentDefinition:
    """A NetworkAttachmentDefinition model."""
    return NetworkAttachmentDefinition(namespace=ns, name=name, config=config)
