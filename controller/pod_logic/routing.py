"""handleUpdatePod's plan: src-ip routes and NAT rules of a pod's default network (pure).

`needs_update` says whether a pod still needs routing, `plan_update_pod` returns the
`UpdatePlan` (routes, then NAT rules) the handler writes to NB before patching `routed`.
Only overlay subnets of the default VPC are routed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from controller.core import annotations as ann
from controller.core.address import check_protocol, parse_ip, same_family
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    DEFAULT_VPC,
    EIP_ANNOTATION,
    EXTERNAL_GATEWAY_ADDR_KEY,
    EXTERNAL_GATEWAY_TYPE_DISTRIBUTED,
    GATEWAY_TYPE_DISTRIBUTED,
    IP_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    NORTH_GATEWAY_ANNOTATION,
    POLICY_SRC_IP,
    SNAT_ANNOTATION,
)
from controller.core.errors import ResourceNotReadyError, RetryableError
from controller.core.model import Node, Pod, PodNet, Subnet
from controller.core.naming import pod_name_to_port_name
from controller.pod_logic.classify import get_name_by_pod, is_pod_alive
from controller.pod_logic.networks import default_ovn_net

# --- update (routing) flow helpers -----------------------------------------------------------


def needs_routing(pod_ip: str, subnet: Subnet) -> bool:
    """handleUpdatePod configures routes/NAT only for overlay subnets of the default VPC."""
    return bool(pod_ip) and not subnet.vlan and subnet.vpc == DEFAULT_VPC


def get_node_tunnel_ips(node: Node) -> list[str]:
    """kube-ovn `getNodeTunlIP`: the node's join-switch IPs (its `ovn.kubernetes.io/ip_address`)."""
    value = node.annotations.get(IP_ADDRESS_ANNOTATION, "")
    if not value:
        raise ResourceNotReadyError(f"node {node.name} has no tunnel ip annotation")
    ips = value.split(",")
    for ip in ips:
        if parse_ip(ip) is None:
            raise ResourceNotReadyError(f"node {node.name} has an invalid tunnel ip {ip!r}")
    return ips


def src_ip_route_pairs(pod_ip: str, next_hops: Iterable[str]) -> list[tuple[str, str]]:
    """(pod address, node address) pairs of the same family, node order first (kube-ovn)."""
    return [
        (pod_addr, hop)
        for hop in next_hops
        for pod_addr in pod_ip.split(",")
        if check_protocol(hop) == check_protocol(pod_addr)
    ]


@dataclass(frozen=True, slots=True)
class RouteAction:
    """One `NbClient.add_static_route(policy, prefix, nexthop, router)` call."""

    policy: str
    prefix: str
    nexthop: str
    router: str


@dataclass(frozen=True, slots=True)
class NatAction:
    """One `NbClient.update_nat_rule(policy, logical_ip, external_ip, router, mac, port)` call;
    an empty `external_ip` removes the rule."""

    policy: str
    logical_ip: str
    external_ip: str
    router: str
    logical_mac: str = ""
    port: str = ""


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """What handleUpdatePod writes to NB, in order, before patching `routed=true`."""

    routes: tuple[RouteAction, ...] = ()
    nats: tuple[NatAction, ...] = ()


def needs_update(pod: Pod, now: datetime) -> bool:
    """kube-ovn handleUpdatePod steps 1-2: False when there is nothing to do (terminating, dead
    or already routed pod); RetryableError when no address is allocated yet (stale cache)."""
    if pod.deletion_timestamp is not None or not is_pod_alive(pod, now):
        return False
    if not pod.annotations.get(ALLOCATED_ANNOTATION):
        raise RetryableError(f"no address has been allocated to {pod.key}")
    return not ann.is_routed(pod.annotations)


def plan_update_pod(
    pod: Pod,
    nets: Iterable[PodNet],
    *,
    node: Node | None,
    external_gw_config: Mapping[str, str] | None,
    cluster_router: str,
    enable_eip_snat: bool,
    keep_vm_ip: bool,
) -> UpdatePlan:
    """kube-ovn handleUpdatePod steps 3-4: routes and NAT of the pod's default OVN network.

    `node` is the pod's node (needed for distributed-gateway subnets), `external_gw_config` the
    data of ConfigMap `kube-system/ovn-external-gw-config` (needed for EIP/SNAT pods).
    Missing either when needed is ResourceNotReadyError. Nothing is planned for underlay
    subnets and custom VPCs.

    dnat_and_snat rules are centralized (no logical_port / external_mac), as kube-ovn v1.8
    writes them; only a ConfigMap saying `type: distributed` (kube-ovn v1.9+
    ExternalGatewayType) makes them distributed, on the pod's port with its MAC.
    """
    net = default_ovn_net(nets)
    if net is None:
        return UpdatePlan()
    pod_ip = pod.annotations.get(IP_ADDRESS_ANNOTATION, "")
    subnet = net.subnet
    if not needs_routing(pod_ip, subnet):
        return UpdatePlan()
    eip = pod.annotations.get(EIP_ANNOTATION, "")
    snat = pod.annotations.get(SNAT_ANNOTATION, "")
    north_gateway = pod.annotations.get(NORTH_GATEWAY_ANNOTATION, "")
    pairs: list[tuple[str, str]] = []
    if enable_eip_snat and (eip or snat):
        pairs = src_ip_route_pairs(pod_ip, external_gateway_next_hop(external_gw_config).split(","))
    else:
        if subnet.gateway_type == GATEWAY_TYPE_DISTRIBUTED and not north_gateway:
            if node is None:
                raise ResourceNotReadyError(f"node {pod.node_name!r} of pod {pod.key} not found")
            pairs = src_ip_route_pairs(pod_ip, get_node_tunnel_ips(node))
        if north_gateway:
            pairs += src_ip_route_pairs(pod_ip, north_gateway.split(","))
    routes = tuple(RouteAction(POLICY_SRC_IP, prefix, hop, cluster_router) for prefix, hop in pairs)
    nats: list[NatAction] = []
    if enable_eip_snat:
        port = mac = ""
        if (external_gw_config or {}).get("type") == EXTERNAL_GATEWAY_TYPE_DISTRIBUTED:
            port = pod_name_to_port_name(get_name_by_pod(pod, keep_vm_ip), pod.namespace)
            mac = pod.annotations.get(MAC_ADDRESS_ANNOTATION, "")
        for ip in pod_ip.split(","):
            # NOTE: kube-ovn pairs every pod address with the one external address, which NB
            # refuses across families; a dual-stack pod gets each family's own (or none).
            dnat_ip, snat_ip = same_family(eip, ip), same_family(snat, ip)
            nats.append(NatAction(NAT_TYPE_DNAT_AND_SNAT, ip, dnat_ip, cluster_router, mac, port))
            nats.append(NatAction(NAT_TYPE_SNAT, ip, snat_ip, cluster_router))
    return UpdatePlan(routes, tuple(nats))


def external_gateway_next_hop(data: Mapping[str, str] | None) -> str:
    """The `external-gw-addr` of ConfigMap `ovn-external-gw-config`, masks stripped (one
    address, or "v4,v6" for a dual-stack external network)."""
    value = (data or {}).get(EXTERNAL_GATEWAY_ADDR_KEY, "")
    if not value:
        raise ResourceNotReadyError("no available gateway nic address")
    return ",".join(part.strip().split("/", 1)[0] for part in value.split(",") if part.strip())
