"""The src-ip routes the audit expects for a dual-stack pod follow the node's join addresses.

kube-ovn routes a pod address through its node only via a node (join) address of the same
family; a dual-stack pod on an IPv4-only join subnet is routed with its IPv4 route alone (the
sandbox demo's `dual` pod). With a dual-stack join subnet both routes are expected.
"""

from __future__ import annotations

from controller.audit.audit import KIND_ROUTE_MISSING, audit
from controller.config import Config
from controller.core.model import FrozenDict, Node, Subnet
from controller.ovn.api import StaticRoute
from tests.audit.helpers import ROUTER, Cluster, clean_cluster, mac

DUAL = Subnet("dual", "10.40.0.0/16,fd00:40::/112", "10.40.0.1,fd00:40::1", protocol="Dual")


def with_dual_pod(node_join: str) -> Cluster:
    c = clean_cluster()
    node = c.nodes["n1"]
    c.nodes["n1"] = Node(
        node.name,
        node.internal_ips,
        FrozenDict({**node.annotations, "ovn.kubernetes.io/ip_address": node_join}),
    )
    c.add_subnet(DUAL)
    c.add_pod("d", "10.40.0.2,fd00:40::2", mac(5), subnet=DUAL)
    c.routes.pop()  # the helper's one route for the whole address list
    ipv4_hop = node_join.partition(",")[0]
    c.routes.append(StaticRoute(ROUTER, "10.40.0.2", ipv4_hop, "src-ip"))
    return c


def route_findings(c: Cluster) -> list[str]:
    report = audit(c.snapshot(), Config())
    return [f.message for f in report.findings if f.kind == KIND_ROUTE_MISSING]


def test_dual_stack_pod_on_ipv4_only_join_needs_no_ipv6_route() -> None:
    assert route_findings(with_dual_pod("100.64.0.2")) == []


def test_dual_stack_pod_on_dual_stack_join_needs_its_ipv6_route() -> None:
    assert route_findings(with_dual_pod("100.64.0.2,fd00:100:64::2")) == [
        f"no src-ip route for fd00:40::2 on {ROUTER}"
    ]
