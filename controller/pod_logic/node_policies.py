"""The routing reconciler's node policy keys `/<node>`, planned (pure; no I/O).

* `desired_node_policies`: traffic to each InternalIP of a node goes through the node's join
  address of that family (priority 30000, kube-ovn v1.9's form: v1.9.0 pkg/controller/node.go
  handleAddNode); nothing for a node that is gone or has no join address of that family yet.
* `internal_ip_owners`: of nodes reporting one address, the first by name routes it.
* `v18_node_routes` / `diff_node_policies`: kube-ovn v1.8.18's dst-ip static route to each node
  goes in the transaction that writes the policy replacing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from controller.core import router_policy as rp
from controller.core.address import parse_ip
from controller.core.constants import POLICY_DST_IP
from controller.core.gateway import join_ips
from controller.core.model import Node
from controller.ovn.api import RouterPolicy, RoutingChange, StaticRoute
from controller.pod_logic.routing_state import RoutingConfig, Rows, diff_rows, policy_ip


def internal_ip_owners(nodes: Iterable[Node]) -> dict[str, str]:
    """InternalIP -> the node whose policy routes it: of nodes reporting the same address
    (a misconfiguration), the first by name, so their keys never overwrite each other."""
    owners: dict[str, str] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        for ip in node.internal_ips:
            owners.setdefault(ip, node.name)
    return owners


def desired_node_policies(
    name: str, node: Node | None, cfg: RoutingConfig, owners: Mapping[str, str] | None = None
) -> Rows:
    """Node policy key `name`: traffic to each InternalIP of the node goes through the node's
    join address of the same family (priority 30000); nothing for a node that is gone or has
    no join address of that family yet, nor for an address `owners` gives another node."""
    rows = Rows()
    if node is None:
        return rows
    hops = join_ips(node)
    for internal in node.internal_ips:
        if parse_ip(internal) is None or (owners or {}).get(internal, name) != name:
            continue
        version = rp.family(internal)
        hop = [h for h in hops if parse_ip(h) is not None and rp.family(h) == version]
        if not hop:
            continue
        match = rp.dst_match(internal)
        ids = rp.ids(rp.KIND_NODE, version, node=name)
        rows.policies[(rp.NODE_PRIORITY, match)] = RouterPolicy(
            cfg.router, rp.NODE_PRIORITY, match, "reroute", (hop[0],), ids
        )
    return rows


def _host(prefix: str) -> str:
    """The address of a host route prefix (bare, /32 or /128), "" for any other prefix."""
    addr, _, length = prefix.strip().partition("/")
    ip = parse_ip(addr)
    if ip is None or (length and length != str(ip.max_prefixlen)):
        return ""
    return str(ip)


def v18_node_routes(
    desired: Rows, actual: Rows, routes: Iterable[StaticRoute]
) -> tuple[tuple[str, str], ...]:
    """kube-ovn v1.8.18's dst-ip static routes of a node policy key, as (prefix, next hop).

    v1.8.18 routed to a node's InternalIP with a static route `<InternalIP>` via the node's join
    address (pkg/controller/node.go l.254-268, handleAddNode) and removed them by that next hop
    alone on node delete (l.431, handleDeleteNode). Of a node with policies to write, the
    routes each policy replaces go (its address, via its next hop); of a node that wants none,
    every dst-ip host route via a next hop its own marked policies named. Nothing else: no
    other prefix (a default route), no other next hop, no src-ip route.
    """
    dst = [r for r in routes if r.policy in ("", POLICY_DST_IP)]
    stale: set[tuple[str, str]] = set()
    if desired.policies:
        wanted = {
            (_host(policy_ip(p)), hop) for p in desired.policies.values() for hop in p.nexthops
        }
        stale = {(r.ip_prefix, r.nexthop) for r in dst if (_host(r.ip_prefix), r.nexthop) in wanted}
    else:
        hops = {hop for p in actual.policies.values() for hop in p.nexthops}
        stale = {(r.ip_prefix, r.nexthop) for r in dst if r.nexthop in hops and _host(r.ip_prefix)}
    return tuple(sorted(stale))


def diff_node_policies(desired: Rows, actual: Rows, routes: Iterable[StaticRoute]) -> RoutingChange:
    """A node policy key's change: its policies (`diff_rows`) and, in the same transaction,
    the kube-ovn v1.8 node routes they replace (`v18_node_routes`)."""
    change = diff_rows(desired, actual)
    return dataclasses.replace(change, delete_dst_routes=v18_node_routes(desired, actual, routes))
