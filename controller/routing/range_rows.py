"""What the NB holds inside a subnet's address range that the subnet key owns: NAT rules of its
addresses (EIP/SNAT) and kube-ovn v1.8's src-ip static routes of single addresses in it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.core.constants import POLICY_SRC_IP
from controller.ovn.api import NatRule, NbClient, StaticRoute
from controller.pod_logic import routing_state as rs


@dataclass(frozen=True)
class RangeRows:
    nats: list[NatRule]
    routes: list[StaticRoute]
    hosts: set[str]  # the addresses of the src-ip routes of single addresses in the range


def in_any(ip: str, blocks: Iterable[str]) -> bool:
    return any(rs.in_blocks(ip, b) for b in blocks)


def range_rows(nb: NbClient, router: str, blocks: list[str], with_nat: bool) -> RangeRows:
    """The rows of `router` inside `blocks` (the subnet's CIDR blocks); NAT only `with_nat`."""
    nats = nb.list_nat_rules(router) if with_nat else []
    return rows_in_range(nats, nb.list_static_routes(router), blocks)


def rows_in_range(
    nats: Iterable[NatRule], routes: Iterable[StaticRoute], blocks: list[str]
) -> RangeRows:
    """`range_rows` of rows already read: those of `nats` inside `blocks`, every route (a
    subnet key's `actual_rows` picks its own) and the hosts of the single-address ones."""
    routes = list(routes)
    hosts = {
        r.ip_prefix.split("/", 1)[0]
        for r in routes
        if r.policy == POLICY_SRC_IP
        and r.ip_prefix not in blocks
        and in_any(r.ip_prefix.split("/", 1)[0], blocks)
    }
    return RangeRows([n for n in nats if in_any(n.logical_ip, blocks)], routes, hosts)
