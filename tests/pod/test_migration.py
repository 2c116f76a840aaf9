"""The migration of kube-ovn v1.8's per-pod src-ip routes (controller/pod/migration.py): a routed
pod that still has one gets its routing keys queued; the routing reconciler writes its policy and
set entry and deletes the route in the same transaction; nothing else on the router is touched."""

from __future__ import annotations

import pytest

from controller.ovn.api import RoutingChange
from tests.pod.env import NODE, NODE_JOIN_IP, ROUTER, Env, raw_pod

ROUTED = "ovn.kubernetes.io/routed"


def test_a_routed_pod_with_a_v18_route_is_moved_to_policies(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE))
    env.converge()
    assert env.annotations("default/web")[ROUTED] == "true"
    # the NB as kube-ovn v1.8 left it: the pod's src-ip route, no set entry
    for aset in env.nb.list_address_sets({"kube-ovn-route": "gateway"}):
        env.nb.remove_address_set_addresses(aset.name, list(aset.addresses))
    env.nb.add_static_route("src-ip", "10.16.0.2", NODE_JOIN_IP, ROUTER)
    env.nb.add_static_route("dst-ip", "10.16.0.2", "100.64.0.9", ROUTER)  # someone else's
    env.nb.add_static_route("src-ip", "10.16.0.77", NODE_JOIN_IP, ROUTER)  # nobody's
    calls = len(env.kube.calls)

    assert env.controller.migrate_static_routes() == 1
    assert f"ovn-default/{NODE}" in env.drain(env.routing_queue)
    env.routing.handle(f"ovn-default/{NODE}")

    assert ("src-ip", "10.16.0.2", NODE_JOIN_IP) in env.routes()
    left = {(r.policy, r.ip_prefix) for r in env.nb.list_static_routes(ROUTER)}
    assert left == {("dst-ip", "10.16.0.2"), ("src-ip", "10.16.0.77")}
    assert env.kube.calls[calls:] == []  # already routed: no patch
    # the subnet key drops the route no live pod holds
    env.routing.handle("ovn-default")
    left = {(r.policy, r.ip_prefix) for r in env.nb.list_static_routes(ROUTER)}
    assert left == {("dst-ip", "10.16.0.2")}
    # done: the next scan finds nothing to move, and a full pass writes nothing
    assert env.controller.migrate_static_routes() == 0
    env.enqueue_routing()
    writes = sum(env.nb.requests.values())
    env.converge()
    assert sum(env.nb.requests.values()) == writes


def test_the_policy_is_written_with_the_route_removal(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.create_pod(raw_pod("web", node=NODE))
    env.converge()
    for aset in env.nb.list_address_sets({"kube-ovn-route": "gateway"}):
        env.nb.remove_address_set_addresses(aset.name, list(aset.addresses))
    env.nb.add_static_route("src-ip", "10.16.0.2", NODE_JOIN_IP, ROUTER)
    changes: list[RoutingChange] = []
    nb = env.nb
    real = nb.apply_routing

    def apply(router: str, change: RoutingChange) -> None:
        changes.append(change)
        real(router, change)

    monkeypatch.setattr(nb, "apply_routing", apply)
    env.controller.migrate_static_routes()
    env.converge()
    # one transaction: the entry and the route's removal together
    (change,) = [c for c in changes if c.delete_src_routes]
    assert change.delete_src_routes == ("10.16.0.2",)
    assert [(s.add) for s in change.sets] == [("10.16.0.2",)]
    assert not [r for r in nb.list_static_routes(ROUTER) if r.policy == "src-ip"]


def test_a_failed_migration_is_retried_and_keeps_the_route(env: Env) -> None:
    from controller.ovn.api import OvnTimeoutError

    env.create_pod(raw_pod("web", node=NODE))
    env.converge()
    for aset in env.nb.list_address_sets({"kube-ovn-route": "gateway"}):
        env.nb.remove_address_set_addresses(aset.name, list(aset.addresses))
    env.nb.add_static_route("src-ip", "10.16.0.2", NODE_JOIN_IP, ROUTER)
    env.nb.fail_next("apply_routing", OvnTimeoutError("nb down"))
    env.controller.migrate_static_routes()
    env.process(env.routing_queue)
    # the route is still there: the pod never lost its way out
    assert [r.ip_prefix for r in env.nb.list_static_routes(ROUTER)] == ["10.16.0.2"]
    env.advance(10)
    env.converge()
    assert env.nb.list_static_routes(ROUTER) == []
    assert ("src-ip", "10.16.0.2", NODE_JOIN_IP) in env.routes()
