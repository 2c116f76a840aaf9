"""The full pass over the node policy keys (`controller.routing.node_policies`): one shared read
of the router for every key, owners looked up in the node cache as it is when each key runs,
and every write made from a fresh read.

Each pass is driven both ways it runs in the controller: gc's backstop (`backstop()`) and the
periodic resync's `/` key worked off the routing queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from controller.core import router_policy as rp
from controller.ovn.api import OvnError, RouterPolicy, RoutingChange, StaticRoute
from controller.routing.node_policies import ALL_NODE_POLICIES
from controller.routing.reconciler import ALL_SUBNETS
from controller.testing.fake_nb import FakeNbClient
from tests.pod.env import NODE, NODE_JOIN_IP, ROUTER, Env, standard_env
from tests.routing.test_reconciler import N2, N2_JOIN, make_ready, node_policies

A_IP, B_IP = "172.18.0.11", "172.18.0.12"


class HookedNb(FakeNbClient):
    """Runs `after_write` once, after the first `apply_routing` that `when` picks; counts the
    router reads a pass makes."""

    def __init__(self) -> None:
        super().__init__()
        self.when: Callable[[RoutingChange], bool] = lambda change: False
        self.after_write: Callable[[], None] | None = None
        self.reads: Counter[str] = Counter()

    def list_router_policies(self, router: str) -> list[RouterPolicy]:
        self.reads["list_router_policies"] += 1
        return super().list_router_policies(router)

    def list_static_routes(self, router: str) -> list[StaticRoute]:
        self.reads["list_static_routes"] += 1
        return super().list_static_routes(router)

    def apply_routing(self, router: str, change: RoutingChange) -> None:
        super().apply_routing(router, change)
        hook = self.after_write
        if hook is not None and self.when(change):
            self.after_write = None
            hook()


@pytest.fixture
def env() -> Iterator[Env]:
    e = standard_env(nb_client=HookedNb())
    make_ready(e, NODE, NODE_JOIN_IP, internal=A_IP)
    make_ready(e, N2, N2_JOIN, internal=B_IP)
    e.enqueue_routing()
    e.converge()
    assert node_policies(e) == {
        f"ip4.dst == {A_IP}": (NODE_JOIN_IP,),
        f"ip4.dst == {B_IP}": (N2_JOIN,),
    }
    yield e
    e.close()


def hooked(env: Env) -> HookedNb:
    assert isinstance(env.nb, HookedNb)
    return env.nb


def by_backstop(env: Env) -> None:
    env.routing.backstop()


def by_resync(env: Env) -> None:
    env.routing.resync()
    env.process(env.routing_queue)


PASSES = [pytest.param(by_backstop, id="backstop"), pytest.param(by_resync, id="resync")]


def set_internal_ips(env: Env, name: str, *ips: str) -> None:
    """Change a node's InternalIPs in the cache only (no event queues anything)."""
    raw = env.nodes.get_by_key(name)
    assert raw is not None
    version = str(int(raw["metadata"]["resourceVersion"]) + 1)
    new = {
        **raw,
        "metadata": {**raw["metadata"], "resourceVersion": version},
        "status": {
            **raw["status"],
            "addresses": [{"type": "InternalIP", "address": ip} for ip in ips],
        },
    }
    env.nodes.update(new)


def writes_node(name: str) -> Callable[[RoutingChange], bool]:
    return lambda change: any(p.external_ids.get(rp.NODE_KEY) == name for p in change.policies)


@pytest.mark.parametrize("full_pass", PASSES)
def test_an_internal_ip_moving_between_two_keys_of_one_pass_is_routed_to_its_new_node(
    env: Env, full_pass: Callable[[Env], None]
) -> None:
    """node1's key writes its missing policy; then, before node2's key runs, node1's address
    moves to node2 (node1 reports another): node2's key routes it through node2, as the cache
    says when it runs, not as the cache said when the pass began."""
    env.nb.delete_router_policy(ROUTER, rp.NODE_PRIORITY, f"ip4.dst == {A_IP}")
    nb = hooked(env)
    nb.when = writes_node(NODE)

    def move() -> None:
        set_internal_ips(env, NODE, "172.18.0.21")
        set_internal_ips(env, N2, B_IP, A_IP)

    nb.after_write = move
    full_pass(env)
    assert nb.after_write is None, "the hook never ran"
    assert node_policies(env)[f"ip4.dst == {A_IP}"] == (N2_JOIN,)
    assert node_policies(env)[f"ip4.dst == {B_IP}"] == (N2_JOIN,)
    # node1's own key (queued by its node event in the controller) finishes the move
    env.routing.reconcile(f"/{NODE}")
    assert node_policies(env) == {
        "ip4.dst == 172.18.0.21": (NODE_JOIN_IP,),
        f"ip4.dst == {A_IP}": (N2_JOIN,),
        f"ip4.dst == {B_IP}": (N2_JOIN,),
    }


def test_a_pass_over_converged_nodes_reads_the_router_once(env: Env) -> None:
    for n in range(3, 9):
        make_ready(env, f"node{n}", f"100.64.0.{40 + n}", internal=f"172.18.1.{n}")
    env.converge()
    nb = hooked(env)
    reads = (nb.reads["list_router_policies"], nb.reads["list_static_routes"])
    writes = env.nb.requests["apply_routing"]
    assert env.routing.reconcile(ALL_NODE_POLICIES) == RoutingChange()
    assert (nb.reads["list_router_policies"], nb.reads["list_static_routes"]) == (
        reads[0] + 1,
        reads[1] + 1,
    )
    assert env.nb.requests["apply_routing"] == writes
    assert len(node_policies(env)) == 8


def test_a_row_another_writer_removed_after_the_pass_read_is_not_drift(env: Env) -> None:
    """node2's v1.8 dst-ip route is in the pass's read but gone (removed by its owner) when
    node2's key runs: the key re-reads before writing and finds nothing to do."""
    env.nb.delete_router_policy(ROUTER, rp.NODE_PRIORITY, f"ip4.dst == {A_IP}")
    env.nb.add_static_route("", B_IP, N2_JOIN, ROUTER)
    nb = hooked(env)
    nb.when = writes_node(NODE)
    nb.after_write = lambda: env.nb.delete_static_route(B_IP, ROUTER)
    found = dict(env.routing.backstop())
    assert nb.after_write is None
    assert f"/{N2}" not in found
    assert f"/{NODE}" in found
    assert node_policies(env) == {
        f"ip4.dst == {A_IP}": (NODE_JOIN_IP,),
        f"ip4.dst == {B_IP}": (N2_JOIN,),
    }


def test_the_pass_key_is_queued_by_the_resync_and_skipped_keys_stay_queued(env: Env) -> None:
    env.drain(env.routing_queue)
    env.routing.resync()
    queued = env.drain(env.routing_queue)
    # the two passes, and no key of its own for any node or subnet
    assert sorted(queued) == sorted([ALL_NODE_POLICIES, ALL_SUBNETS])


@pytest.mark.parametrize("full_pass", PASSES)
def test_a_node_key_failing_in_the_pass_is_retried_alone_and_the_pass_goes_on(
    env: Env, full_pass: Callable[[Env], None]
) -> None:
    want = node_policies(env)
    env.nb.delete_router_policy(ROUTER, rp.NODE_PRIORITY, f"ip4.dst == {A_IP}")
    env.nb.delete_router_policy(ROUTER, rp.NODE_PRIORITY, f"ip4.dst == {B_IP}")
    env.nb.fail_next("apply_routing", OvnError("transaction refused"))  # NODE's key: first
    full_pass(env)
    assert node_policies(env)[f"ip4.dst == {B_IP}"] == (N2_JOIN,)  # the pass went on
    env.converge()
    assert node_policies(env) == want
    assert env.routing.backstop() == []
