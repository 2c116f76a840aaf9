"""How each pod address leaves the cluster, read back from the NB: the router policies and
address sets the controller writes (`controller.core.router_policy`), plus any src-ip static
route still there (a v1.8 leftover: it shows up as a second entry)."""

from __future__ import annotations

from controller.core import router_policy as rp
from controller.ovn.api import NbClient

ROUTER = "ovn-cluster"


def egress_routes(nb: NbClient, router: str = ROUTER) -> set[tuple[str, str, str]]:
    """{(pod address, next hop, "src-ip")}."""
    out = {
        (r.ip_prefix, r.nexthop, r.policy)
        for r in nb.list_static_routes(router)
        if r.policy == "src-ip"
    }
    policies = nb.list_router_policies(router)
    by_match = {p.match: p for p in policies if p.action == "reroute"}
    for aset in nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY}):
        for version in (4, 6):
            policy = by_match.get(rp.src_set_match(aset.name, version))
            if policy is not None:
                out |= {(ip, policy.nexthops[0], "src-ip") for ip in aset.addresses}
    for p in policies:
        if p.priority == rp.POD_PRIORITY and p.action == "reroute":
            out.add((p.match.split("== ", 1)[1], p.nexthops[0], "src-ip"))
    return out
