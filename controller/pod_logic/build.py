"""What handleAddPod writes once an address is allocated: annotations, IP CR, LSP spec (pure).

`build_pod_allocation` is the per-network annotation set (vlan keys included),
`build_pod_annotations` the pod's resulting annotation map, `build_ip_cr` the kubeovn.io/v1 IP
object, `build_port_spec` the logical switch port and `security_groups_to_sync` the security
groups to push.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core import annotations as ann
from controller.core.address import check_protocol, get_string_ip, split_string_ip
from controller.core.constants import (
    KUBEOVN_API_VERSION,
    NETWORK_TYPE_GENEVE,
    NETWORK_TYPE_VLAN,
    REASON_GET_VLAN_INFO_FAILED,
    SUBNET_NAME_LABEL,
)
from controller.core.errors import ResourceNotReadyError
from controller.core.model import Pod, PodNet, ProviderType, Subnet, Vlan
from controller.core.naming import ip_cr_name, pod_name_to_port_name
from controller.ovn.api import PortSpec
from controller.pod_logic.classify import get_name_by_pod

# --- annotations and IP CR after allocation -------------------------------------------------


def build_pod_allocation(
    net: PodNet,
    subnet: Subnet,
    *,
    v4: str,
    v6: str,
    mac: str,
    vlan: Vlan | None = None,
    vm_name: str = "",
) -> ann.PodNetworkAnnotations:
    """kube-ovn handleAddPod step 4.3 (+ the vlan keys of step 4.6) for one net.

    `subnet` is the subnet the address came from; `vlan` its Vlan when `subnet.vlan` is set (a
    missing one raises ResourceNotReadyError with reason GetVlanInfoFailed, for OVN nets only:
    IPAM-only nets never read it); `vm_name` is set for a VM pod under keep-vm-ip.
    """
    vlan_id: int | None = None
    provider_network = ""
    if net.type is not ProviderType.IPAM and subnet.vlan:
        if vlan is None:
            raise ResourceNotReadyError(
                f"vlan {subnet.vlan} of subnet {subnet.name} not found",
                reason=REASON_GET_VLAN_INFO_FAILED,
            )
        vlan_id, provider_network = vlan.id, vlan.provider
    return ann.PodNetworkAnnotations(
        ip_address=get_string_ip(v4, v6),
        mac_address=mac,
        cidr=subnet.cidr_block,
        gateway=subnet.gateway,
        logical_switch=subnet.name,
        network_type=NETWORK_TYPE_VLAN if subnet.vlan else NETWORK_TYPE_GENEVE,
        allocated=True,
        logical_router=subnet.vpc if not subnet.vlan and subnet.vpc else "",
        vlan_id=vlan_id,
        provider_network=provider_network,
        virtualmachine=vm_name,
    )


def build_pod_annotations(
    annotations: Mapping[str, str],
    net: PodNet,
    allocation: ann.PodNetworkAnnotations,
    *,
    pod_nic_type: str,
) -> dict[str, str]:
    """The pod's annotation map after `allocation` of `net` (pod_nic_type kept if set)."""
    return ann.apply_allocation(
        annotations, allocation, net.provider_name, pod_nic_type=pod_nic_type
    )


def build_ip_cr(
    *,
    pod_name: str,
    ip: str,
    mac: str,
    subnet: str,
    namespace: str,
    node_name: str,
    provider: str,
    pod_type: str,
    node_switch: str,
) -> dict[str, Any]:
    """The kubeovn.io/v1 IP object `createOrUpdateCrdIPs` writes (name, labels, spec).

    On the node switch the CR is `node-<node>` and `spec.podName` is the node name.
    """
    on_node_switch = bool(node_switch) and subnet == node_switch
    v4, v6 = split_string_ip(ip)
    return {
        "apiVersion": KUBEOVN_API_VERSION,
        "kind": "IP",
        "metadata": {
            "name": ip_cr_name(
                pod_name,
                namespace,
                provider,
                subnet=subnet,
                node_switch=node_switch,
                node_name=node_name,
            ),
            "labels": {SUBNET_NAME_LABEL: subnet, subnet: ""},
        },
        "spec": {
            "podName": node_name if on_node_switch else pod_name,
            "namespace": namespace,
            "subnet": subnet,
            "attachSubnets": [],
            "nodeName": node_name,
            "ipAddress": ip,
            "v4IpAddress": v4,
            "v6IpAddress": v6,
            "attachIps": [],
            "macAddress": mac,
            "attachMacs": [],
            "podType": pod_type,
        },
    }


def build_port_spec(
    pod: Pod, net: PodNet, subnet: Subnet, *, v4: str, v6: str, mac: str, keep_vm_ip: bool
) -> PortSpec:
    """The LSP of one OVN net (kube-ovn handleAddPod step 4.6 `CreatePort` arguments).

    `pod_name` is the VM name under keep-vm-ip. The security groups are passed whenever the pod
    names some; the NB client applies them only with port security, as kube-ovn's CreatePort.
    """
    name = get_name_by_pod(pod, keep_vm_ip)
    request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
    ips = tuple(ip for ip in (v4, v6) if ip)
    cidrs = tuple(
        block
        for ip in ips
        for block in subnet.cidr_block.split(",")
        if check_protocol(block) == check_protocol(ip)
    )
    return PortSpec(
        name=pod_name_to_port_name(name, pod.namespace, net.provider_name),
        switch=subnet.name,
        mac=mac,
        ips=ips,
        cidrs=cidrs,
        pod_name=name,
        pod_namespace=pod.namespace,
        port_security=request.port_security,
        security_groups=request.security_group_names(),
    )


def security_groups_to_sync(pod: Pod, net: PodNet) -> tuple[str, ...]:
    """The SGs handleAddPod pushes to the SyncSgPorts queue: only with port security."""
    request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
    return request.security_group_names() if request.port_security else ()
