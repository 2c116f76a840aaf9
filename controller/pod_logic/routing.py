"""handleUpdatePod's plan: router policies, address-set entries and NAT rules of a pod's
default network (pure).

`needs_update` says whether a pod still needs routing, `plan_update_pod` returns the
`UpdatePlan` the handler writes to NB before patching `routed`: the policies (subnet allows, the
node's reroute, or the pod's own reroute), then the pod's address-set entries, then NAT rules,
and last the removal of the src-ip static routes kube-ovn v1.8 wrote for the pod's addresses
(so a running pod keeps a way out while it is migrated). The rows and their priorities are
`controller.core.router_policy`'s. Only overlay subnets of the default VPC are routed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from controller.core import annotations as ann
from controller.core import router_policy as rp
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
    SNAT_ANNOTATION,
)
from controller.core.errors import ResourceNotReadyError, RetryableError
from controller.core.model import Node, Pod, PodNet, Subnet
from controller.core.naming import pod_name_to_port_name
from controller.ovn.api import RouterPolicy
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


#: One `NbClient.add_router_policy(router, priority, match, action, nexthops, ids)` call: the
#: row it makes, as `list_router_policies` reads it back.
PolicyAction = RouterPolicy


@dataclass(frozen=True, slots=True)
class SetMember:
    """One `NbClient.add_address_set_addresses(name, [ip], ids)` call."""

    name: str
    ip: str
    external_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """What handleUpdatePod writes to NB, in order, before patching `routed=true`: policies,
    address-set entries, NAT rules, then the src-ip static routes of `replaced_routes` (the
    pod's addresses) are deleted on `router`. `routes` (static routes) stays empty: the
    controller no longer writes them."""

    routes: tuple[RouteAction, ...] = ()
    nats: tuple[NatAction, ...] = ()
    policies: tuple[PolicyAction, ...] = ()
    members: tuple[SetMember, ...] = ()
    replaced_routes: tuple[str, ...] = ()
    router: str = ""


def subnet_allow_policies(subnet_name: str, cidr: str, router: str) -> tuple[PolicyAction, ...]:
    """The priority-31000 allow of each CIDR block of a default-VPC subnet."""
    return tuple(
        PolicyAction(
            router,
            rp.SUBNET_PRIORITY,
            rp.dst_match(block.strip()),
            "allow",
            (),
            rp.ids(rp.KIND_SUBNET, rp.family(block), subnet=subnet_name),
        )
        for block in cidr.split(",")
        if block.strip()
    )


def node_gateway_routing(
    subnet_name: str, node: Node, pod_ips: Iterable[str], router: str
) -> tuple[tuple[PolicyAction, ...], tuple[SetMember, ...]]:
    """A distributed-gateway pod on `node`: each address joins the (subnet, node) set of its
    family, which the node's priority-29000 policy reroutes to the node's join address."""
    policies: list[PolicyAction] = []
    members: list[SetMember] = []
    hops = get_node_tunnel_ips(node)
    for ip in pod_ips:
        version = rp.family(ip)
        hop = [h for h in hops if rp.family(h) == version]
        if not hop:
            continue
        name = rp.set_name(subnet_name, node.name, version)
        ids = rp.ids(rp.KIND_GATEWAY, version, subnet=subnet_name, node=node.name)
        policies.append(
            PolicyAction(
                router,
                rp.GATEWAY_PRIORITY,
                rp.src_set_match(name, version),
                "reroute",
                (hop[0],),
                ids,
            )
        )
        members.append(SetMember(name, ip, ids))
    return tuple(policies), tuple(members)


def needs_update(pod: Pod, now: datetime) -> bool:
    """kube-ovn handleUpdatePod steps 1-2: False when there is nothing to do (terminating, dead
    or already routed pod); RetryableError when no address is allocated yet (stale cache)."""
    if pod.deletion_timestamp is not None or not is_pod_alive(pod, now):
        return False
    if not pod.annotations.get(ALLOCATED_ANNOTATION):
        raise RetryableError(f"no address has been allocated to {pod.key}")
    return not ann.is_routed(pod.annotations)


def routes_with_add(pod: Pod, now: datetime) -> bool:
    """May the add of `pod` (its model with the annotations the add is about to patch) route it
    in the same pass: bound to a node, alive, not terminating, allocated and not yet routed.

    NOTE: kube-ovn v1.8 always routes in a second handler round (UpdatePod, queued by the
    allocation's own update event) and a second patch; kube-ovn v1.12 merged the two
    (AddOrUpdatePod). A pod this says no to is routed by handleUpdatePod as before.
    """
    if not pod.node_name or not pod.annotations.get(ALLOCATED_ANNOTATION):
        return False
    return needs_update(pod, now)


def plan_update_pod(
    pod: Pod,
    nets: Iterable[PodNet],
    *,
    node: Node | None,
    external_gw_config: Mapping[str, str] | None,
    cluster_router: str,
    enable_eip_snat: bool,
    keep_vm_ip: bool,
    join: Subnet | None = None,
) -> UpdatePlan:
    """kube-ovn handleUpdatePod steps 3-4: routes and NAT of the pod's default OVN network.

    `node` is the pod's node (needed for distributed-gateway subnets), `external_gw_config` the
    data of ConfigMap `kube-system/ovn-external-gw-config` (needed for EIP/SNAT pods).
    Missing either when needed is ResourceNotReadyError. Nothing is planned for underlay
    subnets and custom VPCs. `join` is the join subnet, whose allow policy lets pods reach
    every node's join address directly.

    The next hops are v1.8's (the node's join address for a distributed gateway, the
    `north_gateway` annotation, the external gateway for EIP/SNAT pods), written as router
    policies instead of src-ip static routes (see `controller.core.router_policy`).

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
    ips = [ip for ip in pod_ip.split(",") if ip]
    policies = list(subnet_allow_policies(subnet.name, subnet.cidr_block, cluster_router))
    if join is not None:
        policies += subnet_allow_policies(join.name, join.cidr_block, cluster_router)
    members: tuple[SetMember, ...] = ()
    pairs: list[tuple[str, str]] = []
    if enable_eip_snat and (eip or snat):
        pairs = src_ip_route_pairs(pod_ip, external_gateway_next_hop(external_gw_config).split(","))
    else:
        if subnet.gateway_type == GATEWAY_TYPE_DISTRIBUTED and not north_gateway:
            if node is None:
                raise ResourceNotReadyError(f"node {pod.node_name!r} of pod {pod.key} not found")
            node_policies, members = node_gateway_routing(subnet.name, node, ips, cluster_router)
            policies += node_policies
        if north_gateway:
            pairs += src_ip_route_pairs(pod_ip, north_gateway.split(","))
    for prefix, hop in pairs:
        ids = rp.ids(rp.KIND_POD, rp.family(prefix), subnet=subnet.name, pod=pod.key)
        policies.append(
            PolicyAction(
                cluster_router, rp.POD_PRIORITY, rp.src_match(prefix), "reroute", (hop,), ids
            )
        )
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
    return UpdatePlan(
        (),
        tuple(nats),
        _unique(policies),
        members,
        tuple(ips),
        cluster_router,
    )


def _unique(policies: Iterable[PolicyAction]) -> tuple[PolicyAction, ...]:
    seen: dict[tuple[int, str], PolicyAction] = {}
    for p in policies:
        seen.setdefault((p.priority, p.match), p)
    return tuple(seen.values())


def external_gateway_next_hop(data: Mapping[str, str] | None) -> str:
    """The `external-gw-addr` of ConfigMap `ovn-external-gw-config`, masks stripped (one
    address, or "v4,v6" for a dual-stack external network)."""
    value = (data or {}).get(EXTERNAL_GATEWAY_ADDR_KEY, "")
    if not value:
        raise ResourceNotReadyError("no available gateway nic address")
    return ",".join(part.strip().split("/", 1)[0] for part in value.split(",") if part.strip())


def needs_reroute(pod: Pod, now: datetime) -> bool:
    """A pod already marked routed that may be routed again (the migration of its v1.8 src-ip
    route): alive, not terminating, allocated and scheduled."""
    return (
        pod.deletion_timestamp is None
        and is_pod_alive(pod, now)
        and bool(pod.annotations.get(ALLOCATED_ANNOTATION))
        and bool(pod.node_name)
        and ann.is_routed(pod.annotations)
    )
