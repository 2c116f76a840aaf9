"""The routing the audit expects for a dual-stack pod follows the node's join addresses.

kube-ovn routes a pod address through its node only via a node (join) address of the same
family; a dual-stack pod on an IPv4-only join subnet is routed by its IPv4 address-set entry
alone (the sandbox demo's `dual` pod). With a dual-stack join subnet both entries are expected.
"""

from __future__ import annotations

from controller.audit.audit import KIND_ROUTE_MISSING, audit
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.model import Node, Subnet
from controller.core.object_fields import FrozenDict
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
    c.unroute("10.40.0.2,fd00:40::2")  # the helper's one entry for the whole address list
    c.route("10.40.0.2", DUAL.name, "n1", node_join.partition(",")[0])
    return c


def route_findings(c: Cluster) -> list[str]:
    report = audit(c.snapshot(), Config())
    return [f.message for f in report.findings if f.kind == KIND_ROUTE_MISSING]


def test_dual_stack_pod_on_ipv4_only_join_needs_no_ipv6_route() -> None:
    assert route_findings(with_dual_pod("100.64.0.2")) == []


def test_dual_stack_pod_on_dual_stack_join_needs_its_ipv6_route() -> None:
    assert route_findings(with_dual_pod("100.64.0.2,fd00:100:64::2")) == [
        f"fd00:40::2 is not in address set {rp.set_name(DUAL.name, 'n1', 6)}",
        f"no reroute policy for ${rp.set_name(DUAL.name, 'n1', 6)} on {ROUTER}",
    ]
