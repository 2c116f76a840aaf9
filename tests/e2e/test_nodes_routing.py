"""A node's own priority-30000 policy (`ip4.dst == <InternalIP>` rerouted to the node's join
address, kube-ovn v1.9's form: v1.9.0 `pkg/controller/node.go` l.305-320 handleAddNode) follows
the node: its InternalIP changing, its delete while no controller runs, a hand-deleted row, the
node registering again with another join address, and kube-ovn v1.8.18's static route to the
node (v1.8.18 node.go l.254-268) giving way to it.

Rows are found by priority and match in the NB (`Snapshot`), never through the controller.
"""

from __future__ import annotations

import pytest

from controller.app import Controller
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
)
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import NODE, running
from tests.e2e.routing_state import Snapshot, join_ip, make_ready, ready_node, until
from tests.fixtures.nb import nbctl

pytestmark = [pytest.mark.e2e]

NODE2 = "node2"
NODE2_IP = "172.18.0.3"
NODE2_MOVED_IP = "172.18.0.33"
NODE_PRIORITY = 30000
#: No gc pass and no full routing pass during a test unless the test asks for one: what
#: converges here converges from the node events (or the start-up pass).
FLAGS = ("--gc-interval=3600",)


def node_policies(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """match -> next hops of every priority-30000 policy on the cluster router."""
    out: dict[str, tuple[str, ...]] = {}
    for p in Snapshot.read(cluster.nb_server.remote).policies:
        if int(p["priority"]) != NODE_PRIORITY:
            continue
        hops = p.get("nexthops")
        if isinstance(hops, list) and hops and hops[0] == "set":
            hops = hops[1]
        values = hops if isinstance(hops, list) else [hops]
        out[str(p["match"]).strip()] = tuple(sorted(str(h) for h in values if h))
    return out


def with_node2(cluster: Cluster, start_controller: StartController, *flags: str) -> Controller:
    store = cluster.server.store
    store.create("nodes", ready_node(NODE2, NODE2_IP))
    make_ready(store, NODE2)
    ctl = running(start_controller(*flags))
    j2 = join_ip(cluster.server, NODE2)
    until(lambda: node_policies(cluster).get(f"ip4.dst == {NODE2_IP}") == (j2,), "node2 routed")
    return ctl


def test_an_internal_ip_change_moves_the_node_policy(
    cluster: Cluster, start_controller: StartController
) -> None:
    with_node2(cluster, start_controller, *FLAGS)
    j2 = join_ip(cluster.server, NODE2)
    store = cluster.server.store
    status = dict(store.get("nodes", None, NODE2).get("status") or {})
    status["addresses"] = [{"type": "InternalIP", "address": NODE2_MOVED_IP}]
    store.patch("nodes", None, NODE2, {"status": status}, subresource="status")
    until(
        lambda: node_policies(cluster).get(f"ip4.dst == {NODE2_MOVED_IP}") == (j2,),
        "the new InternalIP routed via node2's join address",
    )
    assert f"ip4.dst == {NODE2_IP}" not in node_policies(cluster)


def test_a_node_deleted_while_no_controller_runs_loses_its_policy_at_start(
    cluster: Cluster, start_controller: StartController
) -> None:
    first = with_node2(cluster, start_controller, *FLAGS)
    first.stop()
    assert first.wait(15) == 0
    cluster.server.store.delete("nodes", None, NODE2)
    running(start_controller(*FLAGS, identity="controller-b"))
    until(
        lambda: f"ip4.dst == {NODE2_IP}" not in node_policies(cluster),
        "the deleted node's policy removed at start-up",
    )
    j1 = join_ip(cluster.server, NODE)
    assert (j1,) in node_policies(cluster).values()


@pytest.mark.routing_drift_expected("deletes a node policy from the NB by hand")
@pytest.mark.parametrize(
    "flags",
    [("--gc-interval=1",), ("--gc-interval=3600", "--routing-resync-period=1")],
    ids=["gc", "resync"],
)
def test_a_node_policy_deleted_by_hand_is_restored_by_the_pass(
    cluster: Cluster, start_controller: StartController, flags: tuple[str, ...]
) -> None:
    with_node2(cluster, start_controller, *flags)
    j2 = join_ip(cluster.server, NODE2)
    match = f"ip4.dst == {NODE2_IP}"
    nbctl(cluster.nb_server.remote, "lr-policy-del", "ovn-cluster", str(NODE_PRIORITY), match)
    until(lambda: node_policies(cluster).get(match) == (j2,), "the node policy restored")


def test_a_node_re_registered_with_another_join_address_is_routed_through_it(
    cluster: Cluster, start_controller: StartController
) -> None:
    with_node2(cluster, start_controller, *FLAGS)
    old = join_ip(cluster.server, NODE2)
    store = cluster.server.store
    store.delete("nodes", None, NODE2)
    until(lambda: cluster.nb.get_port(f"node-{NODE2}") is None, "node2's join port deleted")
    new = "100.64.0.201"
    assert new != old
    again = ready_node(NODE2, NODE2_IP)
    again["metadata"]["annotations"] = {
        ALLOCATED_ANNOTATION: "true",
        IP_ADDRESS_ANNOTATION: new,
        MAC_ADDRESS_ANNOTATION: "00:00:00:aa:bb:01",
        LOGICAL_SWITCH_ANNOTATION: "join",
    }
    store.create("nodes", again)
    make_ready(store, NODE2)
    until(lambda: join_ip(cluster.server, NODE2) == new, "node2 keeps its annotated address")
    until(
        lambda: node_policies(cluster).get(f"ip4.dst == {NODE2_IP}") == (new,),
        "node2's InternalIP routed via its new join address",
    )


def static_routes(cluster: Cluster) -> set[tuple[str, str, str]]:
    """(policy, prefix, next hop) of every static route in the NB (policy "" is dst-ip)."""
    out = nbctl(
        cluster.nb_server.remote,
        "--format=csv",
        "--data=bare",
        "--no-headings",
        "--columns=policy,ip_prefix,nexthop",
        "list",
        "Logical_Router_Static_Route",
    )
    rows = (line.split(",") for line in out.splitlines() if line.strip())
    return {(policy or "dst-ip", prefix, hop) for policy, prefix, hop in rows}


def test_a_v18_static_route_to_a_node_gives_way_to_its_policy(
    cluster: Cluster, start_controller: StartController
) -> None:
    """kube-ovn v1.8.18's `<InternalIP>` via `<join address>` dst-ip route (node.go l.254-268)
    left on the router goes at the next pass; routes that are no v1.8 node route stay."""
    with_node2(cluster, start_controller, "--gc-interval=3600", "--routing-resync-period=1")
    j2 = join_ip(cluster.server, NODE2)
    remote = cluster.nb_server.remote
    nbctl(remote, "lr-route-add", "ovn-cluster", NODE2_IP, j2)
    nbctl(remote, "lr-route-add", "ovn-cluster", "172.18.0.99", j2)  # not node2's address
    nbctl(remote, "--policy=src-ip", "lr-route-add", "ovn-cluster", NODE2_IP, j2)
    assert ("dst-ip", NODE2_IP, j2) in static_routes(cluster)
    until(lambda: ("dst-ip", NODE2_IP, j2) not in static_routes(cluster), "the v1.8 route gone")
    routes = static_routes(cluster)
    assert ("dst-ip", "172.18.0.99", j2) in routes
    assert ("src-ip", NODE2_IP, j2) in routes
    assert node_policies(cluster).get(f"ip4.dst == {NODE2_IP}") == (j2,)
