"""`NodeKeyRows`: one read of the cluster router for every subnet key (`<subnet>`) and subnet
node key (`<subnet>/<node>`) of a full pass, grouped by the key each row belongs to.

A node key diffs its marked policies and address sets (the controller's mark says whose they
are), and the NAT rules and src-ip static routes of its pods' addresses. Read per key, each key
costs every row of the router; read once and grouped here, a pass costs the router once and
each key only its own rows. A subnet key's rows are picked from the whole read (its policies
and the rows inside its CIDR), the node keys' from the groups. The read is a snapshot: the pass
diffs a key against it only to find the keys that look different, and re-reads before writing
(see `RoutingReconciler._reconcile_node` and `_reconcile_subnet`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.core import router_policy as rp
from controller.core.constants import POLICY_SRC_IP
from controller.ovn.api import AddressSetInfo, NatRule, NbClient, RouterPolicy, StaticRoute
from controller.routing.range_rows import RangeRows, rows_in_range

#: (subnet, node) of a row, from its external_ids
Owner = tuple[str, str]


@dataclass(frozen=True)
class KeyRows:
    """What one node key's `routing_state.actual_rows` reads: its rows of the snapshot."""

    policies: list[RouterPolicy]
    sets: list[AddressSetInfo]
    nats: list[NatRule]
    routes: list[StaticRoute]


@dataclass
class NodeKeyRows:
    """The router's marked policies and routing address sets by owner, its NAT rules and
    src-ip static routes by address (see the module docstring)."""

    policies: dict[Owner, list[RouterPolicy]] = field(default_factory=lambda: defaultdict(list))
    sets: dict[Owner, list[AddressSetInfo]] = field(default_factory=lambda: defaultdict(list))
    nats: dict[str, list[NatRule]] = field(default_factory=lambda: defaultdict(list))
    routes: dict[str, list[StaticRoute]] = field(default_factory=lambda: defaultdict(list))
    # subnet -> the nodes its marked rows name
    nodes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    # the whole read, for the subnet keys
    every_policy: list[RouterPolicy] = field(default_factory=list)
    every_nat: list[NatRule] = field(default_factory=list)
    every_route: list[StaticRoute] = field(default_factory=list)

    @classmethod
    def read(cls, nb: NbClient, router: str, with_nats: bool) -> NodeKeyRows:
        """One read of `router`'s policies, static routes and (`with_nats`) NAT rules, and of
        the routing address sets."""
        rows = cls()
        rows.every_policy = nb.list_router_policies(router)
        rows.every_nat = nb.list_nat_rules(router) if with_nats else []
        rows.every_route = nb.list_static_routes(router)
        for p in rows.every_policy:
            owner = rows._owner(p.external_ids)
            if owner is not None:
                rows.policies[owner].append(p)
        for a in nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY}):
            owner = rows._owner(a.external_ids)
            if owner is not None:
                rows.sets[owner].append(a)
        for n in rows.every_nat:
            rows.nats[n.logical_ip].append(n)
        for r in rows.every_route:
            if r.policy == POLICY_SRC_IP:
                address = r.ip_prefix.split("/", 1)[0]
                rows.routes[address].append(r)
                if r.ip_prefix != address:
                    rows.routes[r.ip_prefix].append(r)
        return rows

    def _owner(self, ids: Mapping[str, str]) -> Owner | None:
        if not ids.get(rp.ROUTE_KIND_KEY):
            return None
        subnet, node = ids.get(rp.SUBNET_KEY, ""), ids.get(rp.NODE_KEY, "")
        if subnet and node:
            self.nodes[subnet].add(node)
        return subnet, node

    def of(self, subnet: str, node: str, addresses: Iterable[str]) -> KeyRows:
        """Node key (subnet, node)'s rows, and the NAT rules and routes of `addresses`."""
        wanted = set(addresses)
        return KeyRows(
            self.policies.get((subnet, node), []),
            self.sets.get((subnet, node), []),
            [n for ip in wanted for n in self.nats.get(ip, [])],
            [r for ip in wanted for r in self.routes.get(ip, [])],
        )

    def nodes_of(self, subnet: str) -> set[str]:
        """The nodes the subnet's marked rows name."""
        return self.nodes.get(subnet, set())

    def subnets(self) -> set[str]:
        """The subnets the marked policies and routing address sets name."""
        return {subnet for subnet, _ in [*self.policies, *self.sets] if subnet}

    def in_range(self, blocks: list[str]) -> RangeRows:
        """`range_rows` of the read: its rows inside `blocks` (a subnet's CIDR blocks)."""
        return rows_in_range(self.every_nat, self.every_route, blocks)


def node_names_of(
    subnet: str,
    cached: Iterable[str],
    policies: Iterable[RouterPolicy],
    sets: Iterable[AddressSetInfo],
) -> list[str]:
    """Every node `subnet` may have rows for: the `cached` ones and those its rows name."""
    names = set(cached)
    for row_ids in [p.external_ids for p in policies] + [a.external_ids for a in sets]:
        if row_ids.get(rp.SUBNET_KEY) == subnet and row_ids.get(rp.NODE_KEY):
            names.add(row_ids[rp.NODE_KEY])
    return sorted(names)
