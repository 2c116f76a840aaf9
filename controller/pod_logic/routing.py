"""handleUpdatePod's routing helpers (pure).

`needs_update` / `routes_with_add` / `needs_reroute` say whether a pod's handler routes it;
`subnet_allow_policies`, `src_ip_route_pairs` and `external_gateway_next_hop` build the rows and
next hops the routing planner (`routing_state`) assembles. The rows and their priorities are
`controller.core.router_policy`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from controller.core import annotations as ann
from controller.core import router_policy as rp
from controller.core.address import check_protocol
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    EXTERNAL_GATEWAY_ADDR_KEY,
)
from controller.core.errors import ResourceNotReadyError, RetryableError
from controller.core.model import Pod
from controller.ovn.api import RouterPolicy
from controller.pod_logic.classify import is_pod_alive

# --- update (routing) flow helpers -----------------------------------------------------------


def src_ip_route_pairs(pod_ip: str, next_hops: Iterable[str]) -> list[tuple[str, str]]:
    """(pod address, node address) pairs of the same family, node order first (kube-ovn)."""
    return [
        (pod_addr, hop)
        for hop in next_hops
        for pod_addr in pod_ip.split(",")
        if check_protocol(hop) == check_protocol(pod_addr)
    ]


def subnet_allow_policies(subnet_name: str, cidr: str, router: str) -> tuple[RouterPolicy, ...]:
    """The priority-31000 allow of each CIDR block of a default-VPC subnet."""
    return tuple(
        RouterPolicy(
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
