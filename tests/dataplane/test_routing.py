"""Packets across the cluster router `ovn-cluster`: a pod on ovn-default and a pod on a second
subnet (IPv4-only `blue`; dual-stack `dual-b` for IPv6).

kube-ovn v1.8 routed every distributed-gateway pod with a src-ip static route
`<pod ip>/32 -> <node join ip>`, which upstream ovn-northd ranks above the other subnet's route
(SB priority 96 against 74 for a /24), so these packets left towards the node; kube-ovn ships a
patched ovn-northd for that. The controller routes pods with router policies instead (a 31000
allow per subnet CIDR above the 29000 per-node reroute), and these tests pass on stock OVN. If
that regresses to a src-ip route, `reach_or_explain` names the cause (`SrcRouteOutranks`, read
back from the SB's logical flows and confirmed with ovn-trace, see routes.py).
"""

from __future__ import annotations

from controller.core.constants import LOGICAL_SWITCH_ANNOTATION
from tests.dataplane.helpers import Net, WiredPod
from tests.dataplane.routes import reach_or_explain


def _cross_subnet(net: Net, src: WiredPod, dst: WiredPod, dst_cidr: str, version: int) -> None:
    # positive controls: both pods are wired, bound and routed to their own gateways
    net.reaches(src.netns, src.gateway(version))
    net.reaches(dst.netns, dst.gateway(version))
    reach_or_explain(net, src, dst.ip(version), dst_cidr, version)
    net.reaches(dst.netns, src.ip(version))


def test_pods_on_two_subnets_reach_each_other_ipv4(net: Net) -> None:
    net.subnet("blue", "10.17.0.0/24")
    a = net.create("cross-a")
    b = net.create("cross-b", annotations={LOGICAL_SWITCH_ANNOTATION: "blue"})
    assert b.eth0.addresses == (f"{b.ip()}/24",)
    _cross_subnet(net, a, b, "10.17.0.0/24", 4)


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
