"""The audit of a pod's routing on the cluster router: router policies and address-set entries
(`controller.core.router_policy`), and what kube-ovn v1.8's per-pod src-ip routes left.

For a routed pod of an overlay subnet of the default VPC, by how it leaves the cluster:

* distributed gateway: each address is in its (subnet, node) set and only there, and the set's
  priority-29000 policy reroutes to the node's join address; else `route-missing` (no entry, no
  policy), `route-mismatch` (policy via another hop) or `route-duplicate` (the address is in
  another routing set too, or also has its own reroute policy);
* `north_gateway` / EIP-SNAT: a priority-29250 `src == <ip>` reroute policy (via the annotation's
  hop for a north gateway; the external gateway is a ConfigMap the audit does not read);
* any of them: a src-ip static route still on the router for the address is `route-stale` (the
  migration to policies has not run yet, or failed).

Orphans: a routing-set entry or a per-pod policy whose address no alive pod holds is an
`orphan-route`. Only rows with the controller's `kube-ovn-route` mark are looked at.

Subnets (`check_subnet_gateways`), for each overlay subnet of the default VPC but the join
subnet: a centralized one has a `status.activateGateway` naming a node listed in its
`spec.gatewayNode`, Ready and with a join address (kube-ovn v1.8 elects only such a node),
else `gateway-mismatch`; and each CIDR block has its priority-29000 `src == <block>` reroute
(`route-missing`) via that node's join address of the block's family (`route-mismatch`). A
distributed subnet has no subnet-wide reroute (`route-stale`: its egress would leave through
one node beside the pods' own).

Nodes (`check_node_policies`): each node's InternalIP of a family it has a join address of is
rerouted by a priority-30000 `dst == <ip>` policy via that join address (`route-missing`,
`route-mismatch`); a marked node policy of a node that is gone, or of an address the node no
longer has, is `route-stale`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from controller.audit.findings import (
    KIND_GATEWAY_MISMATCH,
    KIND_ORPHAN_ROUTE,
    KIND_ROUTE_DUPLICATE,
    KIND_ROUTE_MISMATCH,
    KIND_ROUTE_MISSING,
    KIND_ROUTE_STALE,
)
from controller.audit.state import AuditState
from controller.core import router_policy as rp
from controller.core.address import canonical_ip, host_prefix, parse_ip
from controller.core.constants import (
    DEFAULT_VPC,
    GATEWAY_TYPE_CENTRALIZED,
    POLICY_SRC_IP,
)
from controller.core.gateway import gateway_node_names, join_ips
from controller.core.model import Subnet
from controller.ovn.api import RouterPolicy
from controller.pod_logic import is_ovn_provider


class RoutingIndex:
    """The snapshot's routing rows, indexed once."""

    def __init__(self, state: AuditState) -> None:
        snap = state.snap
        self.policies: dict[tuple[int, str], RouterPolicy] = {
            (p.priority, p.match.strip()): p for p in snap.policies
        }
        self.pod_policies: dict[str, list[RouterPolicy]] = defaultdict(list)
        for p in snap.policies:
            if (
                p.priority != rp.POD_PRIORITY
                or p.external_ids.get(rp.ROUTE_KIND_KEY) != rp.KIND_POD
            ):
                continue
            value = p.match.strip().split("==", 1)[-1].strip()
            ip = canonical_ip(value)
            if ip is not None:
                self.pod_policies[ip].append(p)
        self.sets_of: dict[str, list[str]] = defaultdict(list)
        for aset in snap.address_sets:
            if aset.external_ids.get(rp.ROUTE_KIND_KEY) != rp.KIND_GATEWAY:
                continue
            for entry in aset.addresses:
                ip = canonical_ip(entry)
                if ip is not None:
                    self.sets_of[ip].append(aset.name)
        self.src_routes: dict[str, list[str]] = defaultdict(list)
        for r in snap.routes:
            host = host_prefix(r.ip_prefix)
            if r.policy == POLICY_SRC_IP and host is not None:
                self.src_routes[host].append(r.nexthop)


def routing_index(state: AuditState) -> RoutingIndex:
    """The state's `RoutingIndex`, built on first use."""
    index = getattr(state, "_routing_index", None)
    if not isinstance(index, RoutingIndex):
        index = RoutingIndex(state)
        setattr(state, "_routing_index", index)  # noqa: B010
    return index


def check_pod_routing(
    state: AuditState,
    index: RoutingIndex,
    obj: str,
    ips: Sequence[str],
    *,
    subnet: str,
    node: str,
    node_hops: Sequence[str] | None,
    pod_hops: Sequence[str] | None,
    own_policy: bool,
) -> None:
    """One routed pod: `own_policy` for north_gateway / EIP-SNAT pods (`pod_hops` the wanted
    hops, None: any), else the distributed-gateway set of `node` (`node_hops` its join
    addresses, None: unknown)."""
    router = state.config.cluster_router
    for ip in ips:
        version = rp.family(ip)
        if index.src_routes.get(ip):
            state.add(
                KIND_ROUTE_STALE,
                obj,
                f"src-ip static route {ip} via {index.src_routes[ip][0]} still on {router}",
            )
        policies = index.pod_policies.get(ip, [])
        sets = index.sets_of.get(ip, [])
        if own_policy:
            if not policies:
                state.add(KIND_ROUTE_MISSING, obj, f"no reroute policy for {ip} on {router}")
                continue
            want = [h for h in pod_hops or [] if rp.family(h) == version]
            if want and not any(set(p.nexthops) & set(want) for p in policies):
                state.add(
                    KIND_ROUTE_MISMATCH,
                    obj,
                    f"policy for {ip} via {','.join(policies[0].nexthops)}, "
                    f"want {' or '.join(want)}",
                )
            if sets:
                state.add(KIND_ROUTE_DUPLICATE, obj, f"{ip} is also in address set {sets[0]}")
            continue
        name = rp.set_name(subnet, node, version)
        if name not in sets:
            state.add(KIND_ROUTE_MISSING, obj, f"{ip} is not in address set {name}")
        others = [s for s in sets if s != name]
        if others or policies:
            where = f"address set {others[0]}" if others else "its own reroute policy"
            state.add(KIND_ROUTE_DUPLICATE, obj, f"{ip} is also routed by {where}")
        policy = index.policies.get((rp.GATEWAY_PRIORITY, rp.src_set_match(name, version)))
        if policy is None:
            state.add(KIND_ROUTE_MISSING, obj, f"no reroute policy for ${name} on {router}")
            continue
        want = [h for h in node_hops or [] if rp.family(h) == version]
        if want and not set(policy.nexthops) & set(want):
            state.add(
                KIND_ROUTE_MISMATCH,
                obj,
                f"policy of ${name} via {','.join(policy.nexthops)}, want {' or '.join(want)}",
            )


def check_routing_orphans(state: AuditState, index: RoutingIndex) -> None:
    for ip, names in sorted(index.sets_of.items()):
        if ip not in state.alive_ips:
            state.add(
                KIND_ORPHAN_ROUTE,
                f"address set {names[0]}",
                f"entry {ip}: no alive pod has {ip}",
            )
    for ip, policies in sorted(index.pod_policies.items()):
        if ip not in state.alive_ips:
            state.add(
                KIND_ORPHAN_ROUTE,
                f"policy {policies[0].match}",
                f"reroute via {','.join(policies[0].nexthops)}: no alive pod has {ip}",
            )


def check_subnet_gateways(state: AuditState, index: RoutingIndex) -> None:
    """Every routed subnet's subnet-wide reroute, and a centralized one's active gateway."""
    for subnet in sorted(state.subnets.values(), key=lambda s: s.name):
        if (
            subnet.vlan
            or subnet.vpc != DEFAULT_VPC
            or subnet.name == state.config.node_switch
            or not is_ovn_provider(subnet.provider)  # IPAM only: nothing on the cluster router
        ):
            continue
        blocks = [b.strip() for b in subnet.cidr_block.split(",") if b.strip()]
        obj = f"subnet {subnet.name}"
        if subnet.gateway_type != GATEWAY_TYPE_CENTRALIZED:
            for block in blocks:
                policy = index.policies.get((rp.GATEWAY_PRIORITY, rp.src_match(block)))
                if policy is not None:
                    state.add(
                        KIND_ROUTE_STALE,
                        obj,
                        f"distributed, but {block} is still rerouted via "
                        f"{','.join(policy.nexthops)}",
                    )
            continue
        _check_centralized(state, index, subnet, blocks, obj)


def _check_centralized(
    state: AuditState, index: RoutingIndex, subnet: Subnet, blocks: Sequence[str], obj: str
) -> None:
    active = subnet.activate_gateway
    node = state.nodes.get(active) if active else None
    hops = join_ips(node) if node is not None else []
    if not active:
        state.add(KIND_GATEWAY_MISMATCH, obj, "centralized, but no status.activateGateway")
    elif active not in gateway_node_names(subnet.gateway_node):
        state.add(
            KIND_GATEWAY_MISMATCH,
            obj,
            f"active gateway {active} is not in gatewayNode {subnet.gateway_node!r}",
        )
    elif node is None:
        state.add(KIND_GATEWAY_MISMATCH, obj, f"active gateway {active} is not a node")
    elif not node.ready:
        state.add(KIND_GATEWAY_MISMATCH, obj, f"active gateway {active} is not Ready")
    elif not hops:
        state.add(KIND_GATEWAY_MISMATCH, obj, f"active gateway {active} has no join address")
    router = state.config.cluster_router
    for block in blocks:
        policy = index.policies.get((rp.GATEWAY_PRIORITY, rp.src_match(block)))
        if policy is None:
            state.add(KIND_ROUTE_MISSING, obj, f"no reroute policy for {block} on {router}")
            continue
        want = [h for h in hops if rp.family(h) == rp.family(block)]
        if want and not set(policy.nexthops) & set(want):
            state.add(
                KIND_ROUTE_MISMATCH,
                obj,
                f"{block} rerouted via {','.join(policy.nexthops)}, but the active gateway "
                f"{active} is {' or '.join(want)}",
            )


def check_node_policies(state: AuditState, index: RoutingIndex) -> None:
    """The priority-30000 reroute of every node's InternalIPs (kube-ovn v1.9's form, v1.9.0
    `pkg/controller/node.go` l.305-320 handleAddNode) and none left for what is gone."""
    router = state.config.cluster_router
    wanted: set[tuple[int, str]] = set()
    for node in sorted(state.nodes.values(), key=lambda n: n.name):
        hops = [h for h in join_ips(node) if parse_ip(h) is not None]
        for internal in node.internal_ips:
            if parse_ip(internal) is None:
                continue
            want = [h for h in hops if rp.family(h) == rp.family(internal)]
            if not want:
                continue
            key = (rp.NODE_PRIORITY, rp.dst_match(internal))
            if key in wanted:
                continue  # another node reports the address too: the first by name routes it
            wanted.add(key)
            obj = f"node {node.name}"
            policy = index.policies.get(key)
            if policy is None:
                state.add(KIND_ROUTE_MISSING, obj, f"no reroute policy for {key[1]} on {router}")
            elif want[0] not in policy.nexthops:
                state.add(
                    KIND_ROUTE_MISMATCH,
                    obj,
                    f"{key[1]} rerouted via {','.join(policy.nexthops)}, want {want[0]}",
                )
    for key, policy in sorted(index.policies.items()):
        ids = policy.external_ids
        if ids.get(rp.ROUTE_KIND_KEY) != rp.KIND_NODE or key in wanted:
            continue
        state.add(
            KIND_ROUTE_STALE,
            f"policy {policy.match}",
            f"node policy of {ids.get(rp.NODE_KEY, '?')} via {','.join(policy.nexthops)}: "
            "no such node address",
        )
