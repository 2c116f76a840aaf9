"""audit() of each node's own priority-30000 policy: its InternalIP rerouted via its join
address (kube-ovn v1.9's form, v1.9.0 `pkg/controller/node.go` l.305-320 handleAddNode), none
left for what is gone."""

from __future__ import annotations

from controller.audit.audit import (
    KIND_ROUTE_MISMATCH,
    KIND_ROUTE_MISSING,
    KIND_ROUTE_STALE,
    audit,
)
from controller.config import Config
from controller.core import router_policy as rp
from controller.ovn.api import RouterPolicy, StaticRoute
from tests.audit.helpers import ROUTER, Cluster, clean_cluster

N1_MATCH = "ip4.dst == 172.18.0.2"  # clean_cluster's n1


def findings(c: Cluster) -> list[tuple[str, str, str]]:
    return [(f.kind, f.object, f.message) for f in audit(c.snapshot(), Config()).findings]


def test_the_clean_cluster_has_its_node_policy() -> None:
    assert findings(clean_cluster()) == []


def test_a_missing_node_policy_is_reported() -> None:
    c = clean_cluster()
    del c.policies[(rp.NODE_PRIORITY, N1_MATCH)]
    assert findings(c) == [
        (KIND_ROUTE_MISSING, "node n1", f"no reroute policy for {N1_MATCH} on {ROUTER}")
    ]


def test_a_node_policy_via_another_hop_is_reported() -> None:
    c = clean_cluster()
    have = c.policies[(rp.NODE_PRIORITY, N1_MATCH)]
    c.policies[(rp.NODE_PRIORITY, N1_MATCH)] = RouterPolicy(
        ROUTER, have.priority, have.match, "reroute", ("100.64.0.99",), have.external_ids
    )
    assert findings(c) == [
        (KIND_ROUTE_MISMATCH, "node n1", f"{N1_MATCH} rerouted via 100.64.0.99, want 100.64.0.2")
    ]


def test_a_policy_of_a_gone_node_is_stale() -> None:
    c = clean_cluster()
    match = "ip4.dst == 172.18.0.77"
    c.policies[(rp.NODE_PRIORITY, match)] = RouterPolicy(
        ROUTER,
        rp.NODE_PRIORITY,
        match,
        "reroute",
        ("100.64.0.9",),
        rp.ids(rp.KIND_NODE, 4, node="gone"),
    )
    assert findings(c) == [
        (
            KIND_ROUTE_STALE,
            f"policy {match}",
            "node policy of gone via 100.64.0.9: no such node address",
        )
    ]


def test_a_v18_node_static_route_is_no_finding_of_its_own() -> None:
    """kube-ovn v1.8.18's dst-ip route to a node (v1.8.18 node.go l.254-268) is what the node
    policy key removes when it writes the policy: the audit reports the policy, not the route."""
    c = clean_cluster()
    c.routes.append(StaticRoute(ROUTER, "172.18.0.2", "100.64.0.2"))
    assert findings(c) == []
    del c.policies[(rp.NODE_PRIORITY, N1_MATCH)]
    assert findings(c) == [
        (KIND_ROUTE_MISSING, "node n1", f"no reroute policy for {N1_MATCH} on {ROUTER}")
    ]
