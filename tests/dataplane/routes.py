"""Why a packet across `ovn-cluster` does not arrive, when the cause is the per-pod src-ip route.

For every distributed-gateway pod the controller (as kube-ovn v1.8's pod.go does) adds a src-ip
static route `<pod ip>/32 -> <its node's join ip>`; upstream ovn-northd ranks static routes by
prefix length, so that route outranks the route of any other subnet and of the join subnet
(measured on OVN 23.03: a /32 src-ip route gets SB priority 96, a /24 subnet 74, the join /16
50; IPv6: /128 384, a /120 362, the join /64 194), and the packet is sent to the pod's own node
instead of its destination. kube-ovn v1.8 ships a patched ovn-northd that
ranks src-ip routes below destination routes.

`reach_or_explain` fails with `SrcRouteOutranks` only when that is confirmed: the SB's logical
flows give the src-ip route the higher priority *and* ovn-trace of the packet shows the routing
stage choosing the node's join address as next hop. Any other failure stays a plain one.
"""

from __future__ import annotations

import re

from tests.dataplane.helpers import Net, WiredPod

_ROUTE_RE = re.compile(
    r"lr_in_ip_routing\s*\), priority=(\d+)\s*, match=\((ip[46])\.(src|dst) == ([0-9a-f:./]+)\)"
)
_STAGE_RE = re.compile(r"^\s*\d+\. (\w+) ", re.M)

UPSTREAM_OVN = (
    "upstream ovn-northd ranks the per-pod src-ip static route (/32: priority 96) above the "
    "destination's route (a /24: 74, the join /16: 50); kube-ovn v1.8 relies on its patched "
    "ovn-northd"
)


class SrcRouteOutranks(AssertionError):
    """The known upstream-OVN behaviour: the per-pod src-ip route wins over the destination's."""


def _routes(net: Net) -> dict[tuple[str, str], int]:
    """(src|dst, prefix) -> priority of ovn-cluster's IP routing flows in the SB."""
    flows = net.dp.sbctl("lflow-list", "ovn-cluster")
    return {(m[3], m[4]): int(m[1]) for m in _ROUTE_RE.finditer(flows)}


def _gateway_mac(net: Net, pod: WiredPod, gateway: str) -> str:
    net.reaches(pod.netns, gateway)
    neigh = net.dp.exec_in(pod.netns, ["ip", "neigh", "show", gateway])
    m = re.search(r"lladdr ([0-9a-f:]{17})", neigh)
    assert m, f"no neighbour entry for {gateway} in {pod.netns}: {neigh!r}"
    return m.group(1)


def _routing_stage(trace: str) -> str:
    """The text of the trace's first lr_in_ip_routing stage."""
    stages = list(_STAGE_RE.finditer(trace))
    for i, m in enumerate(stages):
        if m.group(1) == "lr_in_ip_routing":
            end = stages[i + 1].start() if i + 1 < len(stages) else len(trace)
            return trace[m.start() : end]
    return ""


def explain(net: Net, src: WiredPod, dst_ip: str, dst_cidr: str, version: int) -> str | None:
    """Why `src` cannot reach `dst_ip` (in `dst_cidr`), when it is the src-ip route."""
    family, plen, icmp = ("ip4", 32, "icmp4.type == 8")
    if version == 6:
        family, plen, icmp = ("ip6", 128, "icmp6.type == 128")
    routes = _routes(net)
    src_prio = routes.get(("src", f"{src.ip(version)}/{plen}"))
    dst_prio = routes.get(("dst", dst_cidr))
    if src_prio is None or dst_prio is None or src_prio <= dst_prio:
        return None
    node_ip = net.node_ip(src.obj["spec"]["nodeName"], version)
    mac = _gateway_mac(net, src, src.gateway(version))
    flow = (
        f'inport == "{src.eth0.port}" && eth.src == {src.eth0.mac} && eth.dst == {mac} && '
        f"{family}.src == {src.ip(version)} && {family}.dst == {dst_ip} && "
        f"ip.ttl == 64 && {icmp}"
    )
    stage = _routing_stage(net.dp.trace(src.switch, flow))
    if f"= {node_ip};" not in stage or dst_ip == node_ip:
        return None
    return (
        f"ovn-cluster sends {src.ip(version)} -> {dst_ip} to the pod's node {node_ip}: the "
        f"src-ip route {src.ip(version)}/{plen} has SB priority {src_prio}, the route of "
        f"{dst_cidr} only {dst_prio} (ovn-trace: the routing stage's next hop is {node_ip})"
    )


def reach_or_explain(net: Net, src: WiredPod, dst_ip: str, dst_cidr: str, version: int) -> None:
    """`src` reaches `dst_ip`, or `SrcRouteOutranks` when the src-ip route is why not."""
    try:
        net.reaches(src.netns, dst_ip, timeout=3.0)
    except AssertionError as exc:
        cause = explain(net, src, dst_ip, dst_cidr, version)
        if cause is not None:
            raise SrcRouteOutranks(cause) from exc
        raise
