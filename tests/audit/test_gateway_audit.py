"""audit() of a centralized subnet's egress: its subnet-wide reroute and its active gateway
(`status.activateGateway`), and no subnet-wide reroute left on a distributed subnet."""

from __future__ import annotations

import dataclasses

import pytest

from controller.audit.audit import (
    KIND_GATEWAY_MISMATCH,
    KIND_ROUTE_MISMATCH,
    KIND_ROUTE_MISSING,
    KIND_ROUTE_STALE,
    AuditReport,
    audit,
)
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.model import Subnet
from controller.ovn.api import RouterPolicy
from tests.audit.helpers import ROUTER, Cluster, clean_cluster, mac

BLOCK = "10.30.0.0/16"


def central(
    gateway_node: str = "n1,n2", active: str = "n1", hop: str | None = "100.64.0.2"
) -> Cluster:
    """The clean cluster with a second node, both Ready, and a centralized subnet with one
    pod whose egress leaves through `active` (the reroute via `hop`, none when None)."""
    c = clean_cluster()
    c.add_node("n2", "100.64.0.3", mac(9))
    for name in ("n1", "n2"):
        c.nodes[name] = dataclasses.replace(c.nodes[name], ready=True)
    s = Subnet(
        "central",
        BLOCK,
        "10.30.0.1",
        gateway_type="centralized",
        gateway_node=gateway_node,
        activate_gateway=active,
    )
    c.add_subnet(s)
    c.add_pod("c", "10.30.0.2", mac(4), subnet=s)
    c.unroute("10.30.0.2")
    if hop is not None:
        reroute(c, BLOCK, hop, subnet="central")
    return c


def reroute(c: Cluster, block: str, hop: str, *, subnet: str) -> None:
    ids = rp.ids(rp.KIND_GATEWAY, rp.family(block), subnet=subnet)
    match = rp.src_match(block)
    c.policies[(rp.GATEWAY_PRIORITY, match)] = RouterPolicy(
        ROUTER, rp.GATEWAY_PRIORITY, match, "reroute", (hop,), ids
    )


def run(c: Cluster) -> AuditReport:
    return audit(c.snapshot(), Config())


def found(report: AuditReport) -> list[tuple[str, str]]:
    return [(f.kind, f.object) for f in report.findings]


def test_a_centralized_subnet_routed_through_its_active_gateway_is_clean() -> None:
    report = run(central())
    assert report.settled, report.render()


def test_a_gateway_moved_to_another_listed_node_is_clean() -> None:
    report = run(central(active="n2", hop="100.64.0.3"))
    assert report.settled, report.render()


def test_a_reroute_via_another_node_than_the_active_gateway_is_a_mismatch() -> None:
    report = run(central(active="n2", hop="100.64.0.2"))
    assert found(report) == [(KIND_ROUTE_MISMATCH, "subnet central")]
    assert "100.64.0.3" in report.findings[0].message


def test_a_centralized_subnet_without_its_reroute_is_reported() -> None:
    report = run(central(hop=None))
    assert found(report) == [(KIND_ROUTE_MISSING, "subnet central")]


@pytest.mark.parametrize(
    ("gateway_node", "active", "why"),
    [
        ("n1,n2", "", "no status.activateGateway"),
        ("n2", "n1", "not in gatewayNode"),
        ("n1,gone", "gone", "not a node"),
    ],
)
def test_an_active_gateway_that_kube_ovn_would_not_elect_is_reported(
    gateway_node: str, active: str, why: str
) -> None:
    report = run(central(gateway_node=gateway_node, active=active))
    assert found(report) == [(KIND_GATEWAY_MISMATCH, "subnet central")]
    assert why in report.findings[0].message


def test_an_active_gateway_that_is_not_ready_is_reported() -> None:
    c = central()
    c.nodes["n1"] = dataclasses.replace(c.nodes["n1"], ready=False)
    report = run(c)
    assert found(report) == [(KIND_GATEWAY_MISMATCH, "subnet central")]
    assert "not Ready" in report.findings[0].message


def test_a_subnet_wide_reroute_left_on_a_distributed_subnet_is_stale() -> None:
    c = central()
    s = dataclasses.replace(c.subnets["central"], gateway_type="distributed", gateway_node="")
    c.subnets["central"] = s
    c.route("10.30.0.2", "central", "n1", "100.64.0.2")
    report = run(c)
    assert found(report) == [(KIND_ROUTE_STALE, "subnet central")]


def test_a_centralized_ipam_only_subnet_needs_no_gateway_on_the_cluster_router() -> None:
    # a subnet whose provider is another plugin's (kube-ovn only its IPAM) has no switch and no
    # router row, as the routing reconciler writes none for it: no gateway to find or miss
    c = clean_cluster()
    c.add_subnet(
        Subnet(
            "attached",
            BLOCK,
            "10.30.0.1",
            provider="macvlan.default",
            gateway_type="centralized",
            gateway_node="n1",
        )
    )
    report = run(c)
    assert report.settled, report.render()
