"""Packets across the cluster router `ovn-cluster`: a pod on ovn-default and a pod on a second
subnet (IPv4-only `blue`; dual-stack `dual-b` for IPv6).

On upstream OVN this fails today. For every distributed-gateway pod the controller (as kube-ovn
v1.8's pod.go does) adds a src-ip static route `<pod ip>/32 -> <node join ip>`; upstream
ovn-northd ranks static routes by prefix length, so that route (SB priority 96 for a /32)
outranks the connected route of the other subnet (74 for a /24) and the packet leaves through
`ovn-cluster-join` towards the node port, where it is dropped. kube-ovn v1.8 ships a patched
ovn-northd that ranks src-ip routes below destination routes. The tests fail with
`SrcRouteOutranksSubnet` only when that is the cause (read back from the SB's logical flows and
confirmed with ovn-trace); any other failure is a plain test failure, and once the routing is
fixed the strict xfail turns the pass into a failure to remove the mark.
"""

from __future__ import annotations

import re

import pytest

from controller.core.constants import LOGICAL_SWITCH_ANNOTATION
from tests.dataplane.helpers import Net, WiredPod

_ROUTE_RE = re.compile(
    r"lr_in_ip_routing\s*\), priority=(\d+)\s*, match=\((ip[46])\.(src|dst) == ([0-9a-f:./]+)\)"
)


class SrcRouteOutranksSubnet(AssertionError):
    """The known upstream-OVN behaviour: the per-pod src-ip route wins over the subnet route."""


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


def _explain(net: Net, src: WiredPod, dst: WiredPod, dst_cidr: str, version: int) -> str | None:
    """Why `src` cannot reach `dst`, when it is the src-ip route (else None)."""
    family, plen, icmp = (
        ("ip4", 32, "icmp4.type == 8")
        if version == 4
        else (
            "ip6",
            128,
            "icmp6.type == 128",
        )
    )
    routes = _routes(net)
    src_prio = routes.get(("src", f"{src.ip(version)}/{plen}"))
    dst_prio = routes.get(("dst", dst_cidr))
    if src_prio is None or dst_prio is None or src_prio <= dst_prio:
        return None
    mac = _gateway_mac(net, src, src.gateway(version))
    flow = (
        f'inport == "{src.eth0.port}" && eth.src == {src.eth0.mac} && eth.dst == {mac} && '
        f"{family}.src == {src.ip(version)} && {family}.dst == {dst.ip(version)} && "
        f"ip.ttl == 64 && {icmp}"
    )
    trace = net.dp.trace("ovn-default", flow)
    if 'outport = "ovn-cluster-join"' not in trace:
        return None
    return (
        f"ovn-cluster routes {src.ip(version)} -> {dst.ip(version)} to the join switch: the "
        f"src-ip route {src.ip(version)}/{plen} has SB priority {src_prio}, the route of "
        f'{dst_cidr} only {dst_prio} (ovn-trace: outport = "ovn-cluster-join")'
    )


def _cross_subnet(net: Net, src: WiredPod, dst: WiredPod, dst_cidr: str, version: int) -> None:
    # positive controls: both pods are wired, bound and routed to their own gateways
    net.reaches(src.netns, src.gateway(version))
    net.reaches(dst.netns, dst.gateway(version))
    try:
        net.reaches(src.netns, dst.ip(version), timeout=3.0)
    except AssertionError as exc:
        cause = _explain(net, src, dst, dst_cidr, version)
        if cause is not None:
            raise SrcRouteOutranksSubnet(cause) from exc
        raise
    net.reaches(dst.netns, src.ip(version))


UPSTREAM_OVN = (
    "upstream ovn-northd ranks the per-pod src-ip static route (/32: priority 96) above the "
    "other subnet's connected route (/24: 74); kube-ovn v1.8 relies on its patched ovn-northd"
)


@pytest.mark.xfail(strict=True, raises=SrcRouteOutranksSubnet, reason=UPSTREAM_OVN)
def test_pods_on_two_subnets_reach_each_other_ipv4(net: Net) -> None:
    net.subnet("blue", "10.17.0.0/24")
    a = net.create("cross-a")
    b = net.create("cross-b", annotations={LOGICAL_SWITCH_ANNOTATION: "blue"})
    assert b.eth0.addresses == (f"{b.ip()}/24",)
    _cross_subnet(net, a, b, "10.17.0.0/24", 4)


@pytest.mark.xfail(strict=True, raises=SrcRouteOutranksSubnet, reason=UPSTREAM_OVN)
def test_pods_on_two_subnets_reach_each_other_ipv6(net: Net) -> None:
    net.subnet("dual-b", "10.18.0.0/24,fd00:18::/120")
    a = net.create("cross6-a")
    b = net.create("cross6-b", annotations={LOGICAL_SWITCH_ANNOTATION: "dual-b"})
    _cross_subnet(net, a, b, "fd00:18::/120", 6)


def test_a_pod_on_a_second_subnet_reaches_its_gateway_and_node(net: Net) -> None:
    net.subnet("green", "10.19.0.0/24")
    c = net.create("green-a", annotations={LOGICAL_SWITCH_ANNOTATION: "green"})
    net.reaches(c.netns, c.gateway())
    net.reaches(c.netns, net.node_ip())
    net.silent(c.netns, "10.19.0.254")
