"""What releasing an address removes from the cluster router (`RoutingReconciler.release_pod`),
computed from the caches.

The set entries of the released address are the released subnet's own (named by it). Its
per-address rows (a 29250 reroute, NAT rules, a kube-ovn v1.8 src-ip route) are keyed by the
address alone, so they go only when the released subnet may have written them (it is routed on
the cluster router, or no longer cached) and no live pod of a routed subnet holds the address:
a custom VPC may reuse a default-VPC range, and so may an IPAM-only attachment subnet, and its
release must not unroute the default-VPC pod holding the same address. A live holder in the
released subnet itself (a successor on the same node, a VM's migration target) keeps them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from controller.core import router_policy as rp
from controller.core.constants import NAT_TYPE_DNAT_AND_SNAT, NAT_TYPE_SNAT
from controller.core.model import Pod
from controller.ovn.api import NatChange, RoutingChange, SetChange
from controller.pod_logic import routing_state as rs
from controller.routing.inputs import RoutingInputs


def released_rows(
    inputs: RoutingInputs,
    cfg: rs.RoutingConfig,
    now: datetime,
    pod: Pod,
    subnet: str,
    address: str,
    nodes: Sequence[str],
) -> RoutingChange:
    """The rows `pod`'s `address` ("v4,v6") in `subnet` loses, its set entries looked at on
    `nodes` (see the module docstring)."""
    cached, _ = inputs.subnet(subnet)
    routes_here = cached is None or rs.routed_subnet(cached, cfg)
    sets: list[SetChange] = []
    drops: list[tuple[int, str]] = []
    nats: list[NatChange] = []
    routes: list[str] = []
    for ip in (a.strip() for a in address.split(",") if a.strip()):
        others = [p for p in inputs.holders(ip) if p.uid != pod.uid and rs.routable(p, now)]
        version = rp.family(ip)
        for node in nodes:
            if not any(p.node_name == node and rs.pod_subnet(p) == subnet for p in others):
                sets.append(SetChange(rp.set_name(subnet, node, version), remove=(ip,)))
                sets.append(SetChange(rp.legacy_set_name(subnet, node, version), remove=(ip,)))
        if not routes_here or any(_routed(inputs, cfg, p, subnet) for p in others):
            continue  # not this subnet's rows, or the live holder's now
        drops.append((rp.POD_PRIORITY, rp.src_match(ip)))
        if cfg.enable_eip_snat:
            nats += [NatChange(NAT_TYPE_DNAT_AND_SNAT, ip, ""), NatChange(NAT_TYPE_SNAT, ip, "")]
        routes.append(ip)
    return RoutingChange(
        delete_policies=tuple(drops),
        sets=tuple(sets),
        nats=tuple(nats),
        delete_src_routes=tuple(routes),
    )


def _routed(inputs: RoutingInputs, cfg: rs.RoutingConfig, pod: Pod, released: str) -> bool:
    """Does live `pod` have rows on the cluster router (its subnet is `released`, or a cached
    routed subnet)? As `RoutingInputs.claims`, a pod of an uncached subnet has none."""
    name = rs.pod_subnet(pod)
    if name == released:
        return True
    subnet, _ = inputs.subnet(name)
    return rs.routed_subnet(subnet, cfg)
