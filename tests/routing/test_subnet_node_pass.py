"""The full pass over the subnet keys and subnet node keys (`<subnet>/<node>`): the node keys
share one read of the router (`controller.routing.node_key_rows`), and every write is made from
a fresh read.

Each pass is driven both ways it runs in the controller: gc's backstop (`backstop()`) and the
periodic resync's `ALL_SUBNETS` key worked off the routing queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pytest

from controller.core import router_policy as rp
from controller.ovn.api import AddressSetInfo, NbClient, RoutingChange
from controller.routing import node_key_rows
from controller.routing.node_key_rows import NodeKeyRows
from controller.routing.reconciler import ALL_SUBNETS
from tests.pod.env import DEFAULT_SUBNET, NODE, NODE_JOIN_IP, ROUTER, Env, raw_subnet, standard_env
from tests.routing.test_node_policy_pass import HookedNb, by_backstop, by_resync, hooked
from tests.routing.test_reconciler import N2, N2_JOIN, make_ready, routing_sets, start

PASSES = [pytest.param(by_backstop, id="backstop"), pytest.param(by_resync, id="resync")]
OTHER = "other"


class CountingNb(HookedNb):
    """Also counts the address set reads."""

    def list_address_sets(self, external_ids: Mapping[str, str]) -> list[AddressSetInfo]:
        self.reads["list_address_sets"] += 1
        return super().list_address_sets(external_ids)


@pytest.fixture
def env() -> Iterator[Env]:
    e = standard_env(nb_client=CountingNb())
    make_ready(e, NODE, NODE_JOIN_IP)
    make_ready(e, N2, N2_JOIN)
    e.add_subnet(raw_subnet(OTHER, "10.17.0.0/16", gateway="10.17.0.1"))
    start(e, "a1", annotations={"ovn.kubernetes.io/logical_switch": OTHER})
    start(e, "a2", N2)
    e.enqueue_routing()
    e.converge()
    yield e
    e.close()


def reads(env: Env) -> tuple[int, int]:
    nb = hooked(env)
    return nb.reads["list_router_policies"], nb.reads["list_address_sets"]


@pytest.mark.parametrize("nodes", [2, 9])
def test_a_pass_over_converged_keys_reads_the_router_a_number_of_times_set_by_the_subnets(
    env: Env, nodes: int
) -> None:
    """A pass costs the policies once for its subnet names, once per subnet key and once for
    all the node keys; the sets once for the names and once for the node keys: whatever the
    node count."""
    for n in range(3, nodes + 1):
        make_ready(env, f"node{n}", f"100.64.0.{40 + n}", internal=f"172.18.1.{n}")
    env.converge()
    before, writes = reads(env), env.nb.requests["apply_routing"]
    assert env.routing.reconcile(ALL_SUBNETS) == RoutingChange()
    subnets = len(env.view.subnets())  # ovn-default and other
    assert subnets == 2
    assert reads(env) == (before[0] + subnets + 2, before[1] + 2)
    assert env.nb.requests["apply_routing"] == writes


@pytest.mark.parametrize("full_pass", PASSES)
def test_a_pass_restores_the_node_keys_rows_and_removes_what_is_stale(
    env: Env, full_pass: Callable[[Env], None]
) -> None:
    want = routing_sets(env)
    default_set = rp.set_name(DEFAULT_SUBNET, N2, 4)
    other_set = rp.set_name(OTHER, NODE, 4)
    env.nb.delete_router_policy(ROUTER, rp.GATEWAY_PRIORITY, rp.src_set_match(other_set, 4))
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=DEFAULT_SUBNET, node=N2)
    env.nb.add_address_set_addresses(default_set, ["10.16.9.9"], ids)
    full_pass(env)
    assert routing_sets(env) == want
    policies = {p.match for p in env.nb.list_router_policies(ROUTER)}
    assert rp.src_set_match(other_set, 4) in policies
    assert env.routing.backstop() == []


@pytest.mark.parametrize("full_pass", PASSES)
def test_a_key_whose_stale_row_another_writer_removed_after_the_shared_read_writes_nothing(
    env: Env, full_pass: Callable[[Env], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared read holds a stale entry in node2's set; it is gone (removed by its owner)
    when node2's key runs: the key re-reads before writing and finds nothing to do. A row
    removed after the read that the key still wants, and looked right in the read, is left to
    the next pass."""
    default_set = rp.set_name(DEFAULT_SUBNET, N2, 4)
    other_set = rp.set_name(OTHER, NODE, 4)
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=DEFAULT_SUBNET, node=N2)
    env.nb.add_address_set_addresses(default_set, ["10.16.9.9"], ids)
    want = routing_sets(env)
    want[default_set] = tuple(a for a in want[default_set] if a != "10.16.9.9")
    read = NodeKeyRows.read

    def read_then_change(nb: NbClient, router: str, with_nats: bool) -> NodeKeyRows:
        rows = read(nb, router, with_nats)
        env.nb.remove_address_set_addresses(default_set, ["10.16.9.9"])
        env.nb.delete_router_policy(ROUTER, rp.GATEWAY_PRIORITY, rp.src_set_match(other_set, 4))
        return rows

    monkeypatch.setattr(node_key_rows.NodeKeyRows, "read", read_then_change)
    writes = env.nb.requests["apply_routing"]
    full_pass(env)
    monkeypatch.undo()
    assert env.nb.requests["apply_routing"] == writes
    assert routing_sets(env) == want
    policies = {p.match for p in env.nb.list_router_policies(ROUTER)}
    assert rp.src_set_match(other_set, 4) not in policies
    # the next pass restores it
    full_pass(env)
    policies = {p.match for p in env.nb.list_router_policies(ROUTER)}
    assert rp.src_set_match(other_set, 4) in policies
