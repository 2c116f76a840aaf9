"""The full pass over the subnet keys (`<subnet>`) and subnet node keys (`<subnet>/<node>`): the
keys share one read of the router (`controller.routing.node_key_rows`), and every write is made
from a fresh read.

Each pass is driven both ways it runs in the controller: gc's backstop (`backstop()`) and the
periodic resync's `ALL_SUBNETS` key worked off the routing queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pytest

from controller.core import router_policy as rp
from controller.ovn.api import AddressSetInfo, NbClient, OvnError, RouterPolicy, RoutingChange
from controller.pod_logic.routing import subnet_allow_policies
from controller.routing import node_key_rows
from controller.routing.node_key_rows import NodeKeyRows
from controller.routing.reconciler import ALL_SUBNETS
from tests.pod.env import (
    DEFAULT_SUBNET,
    NODE,
    NODE_JOIN_IP,
    ROUTER,
    Env,
    cached,
    raw_subnet,
    standard_env,
)
from tests.routing.test_node_policy_pass import HookedNb, by_backstop, by_resync, hooked
from tests.routing.test_reconciler import N2, N2_JOIN, edit_subnet, make_ready, routing_sets, start

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
@pytest.mark.parametrize("extra_subnets", [0, 4])
def test_a_pass_over_converged_keys_reads_the_router_once_whatever_the_subnet_and_node_count(
    env: Env, nodes: int, extra_subnets: int
) -> None:
    """One read of the policies and one of the sets for the whole pass: the subnet names, the
    subnet keys and the node keys all diff against it."""
    for n in range(3, nodes + 1):
        make_ready(env, f"node{n}", f"100.64.0.{40 + n}", internal=f"172.18.1.{n}")
    for s in range(extra_subnets):
        env.add_subnet(raw_subnet(f"extra{s}", f"10.{30 + s}.0.0/16", gateway=f"10.{30 + s}.0.1"))
    env.enqueue_routing()
    env.converge()
    assert len(env.view.subnets()) == 2 + extra_subnets
    before, writes = reads(env), env.nb.requests["apply_routing"]
    assert env.routing.reconcile(ALL_SUBNETS) == RoutingChange()
    assert reads(env) == (before[0] + 1, before[1] + 1)
    assert env.nb.requests["apply_routing"] == writes


def allow_of(subnet: str, cidr: str) -> RouterPolicy:
    (allow,) = subnet_allow_policies(subnet, cidr, ROUTER)
    return allow


def policy_keys(env: Env) -> set[tuple[int, str]]:
    return {(p.priority, p.match) for p in env.nb.list_router_policies(ROUTER)}


@pytest.mark.parametrize("full_pass", PASSES)
def test_a_pass_restores_a_subnet_keys_rows(env: Env, full_pass: Callable[[Env], None]) -> None:
    """The subnet keys are diffed against the shared read: a missing allow and a centralized
    subnet's missing reroute are written back, a stale subnet-wide reroute is removed."""
    env.kube.create_subnet(cached(env.subnets, DEFAULT_SUBNET))  # its status is written
    edit_subnet(env, DEFAULT_SUBNET, gatewayType="centralized", gatewayNode=NODE)
    env.converge()
    want = policy_keys(env)
    reroute = (rp.GATEWAY_PRIORITY, rp.src_match("10.16.0.0/16"))
    assert reroute in want
    allow = allow_of(OTHER, "10.17.0.0/16")
    env.nb.delete_router_policy(ROUTER, allow.priority, allow.match)
    env.nb.delete_router_policy(ROUTER, *reroute)
    stale = rp.ids(rp.KIND_GATEWAY, 4, subnet=OTHER)
    match = rp.src_match("10.17.0.0/16")
    env.nb.add_router_policy(ROUTER, rp.GATEWAY_PRIORITY, match, "reroute", [NODE_JOIN_IP], stale)
    full_pass(env)
    assert policy_keys(env) == want
    assert env.routing.backstop() == []


@pytest.mark.parametrize("full_pass", PASSES)
def test_a_subnet_key_that_only_the_shared_read_shows_drifting_writes_nothing(
    env: Env, full_pass: Callable[[Env], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared read lacks a subnet's allow (put back by another writer just after it) and
    holds a stale subnet-wide reroute (removed by its owner just after): the subnet key re-reads
    before writing and finds nothing to do."""
    want = policy_keys(env)
    allow = allow_of(OTHER, "10.17.0.0/16")
    match = rp.src_match("10.16.0.0/16")
    stale = rp.ids(rp.KIND_GATEWAY, 4, subnet=DEFAULT_SUBNET)
    read = NodeKeyRows.read

    def read_stale(nb: NbClient, router: str, with_nats: bool) -> NodeKeyRows:
        env.nb.delete_router_policy(ROUTER, allow.priority, allow.match)
        env.nb.add_router_policy(
            ROUTER, rp.GATEWAY_PRIORITY, match, "reroute", [NODE_JOIN_IP], stale
        )
        rows = read(nb, router, with_nats)
        env.nb.add_router_policy(
            ROUTER, allow.priority, allow.match, allow.action, list(allow.nexthops),
            allow.external_ids,
        )  # fmt: skip
        env.nb.delete_router_policy(ROUTER, rp.GATEWAY_PRIORITY, match)
        return rows

    monkeypatch.setattr(node_key_rows.NodeKeyRows, "read", read_stale)
    before, writes = reads(env), env.nb.requests["apply_routing"]
    full_pass(env)
    monkeypatch.undo()
    # the shared read, then a fresh one for each of the two keys that looked different
    assert reads(env)[0] >= before[0] + 3
    assert env.nb.requests["apply_routing"] == writes
    assert policy_keys(env) == want


def test_a_subnet_key_queued_on_its_own_reads_the_router_afresh(env: Env) -> None:
    allow = allow_of(OTHER, "10.17.0.0/16")
    env.nb.delete_router_policy(ROUTER, allow.priority, allow.match)
    before = reads(env)
    env.routing.reconcile(OTHER)
    assert reads(env)[0] == before[0] + 1
    assert (allow.priority, allow.match) in policy_keys(env)


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


@pytest.mark.parametrize("full_pass", PASSES)
def test_a_key_failing_in_a_pass_is_retried_on_its_own_and_the_pass_goes_on(
    env: Env, full_pass: Callable[[Env], None]
) -> None:
    """The NB refuses one key's write: the pass still repairs the keys after it, and the failed
    key is queued to be retried by itself, with its own backoff, not the whole pass with it."""
    want = policy_keys(env)
    mine, theirs = allow_of(OTHER, "10.17.0.0/16"), allow_of(DEFAULT_SUBNET, "10.16.0.0/16")
    for allow in (mine, theirs):
        env.nb.delete_router_policy(ROUTER, allow.priority, allow.match)
    env.nb.fail_next("apply_routing", OvnError("transaction refused"))  # OTHER's: it sorts first
    full_pass(env)
    assert (theirs.priority, theirs.match) in policy_keys(env)
    env.converge()
    assert policy_keys(env) == want
    assert env.routing.backstop() == []
