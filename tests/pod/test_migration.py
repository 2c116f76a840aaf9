"""The migration of kube-ovn v1.8's per-pod src-ip routes (controller/pod/migration.py): a routed
pod that still has one is routed again with policies, and only then its route is deleted; nothing
else on the router is touched."""

from __future__ import annotations

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
    env.nb.add_static_route("src-ip", "10.16.0.77", NODE_JOIN_IP, ROUTER)  # nobody's: gc's
    calls = len(env.kube.calls)

    assert env.controller.migrate_static_routes() == 1
    assert env.drain(env.queues.update) == ["default/web"]
    env.controller.handle_update_pod("default/web")

    assert ("src-ip", "10.16.0.2", NODE_JOIN_IP) in env.routes()
    left = {(r.policy, r.ip_prefix) for r in env.nb.list_static_routes(ROUTER)}
    assert left == {("dst-ip", "10.16.0.2"), ("src-ip", "10.16.0.77")}
    assert env.kube.calls[calls:] == []  # already routed: no patch
    # done: the next scan finds nothing to move, and a plain update does nothing
    assert env.controller.migrate_static_routes() == 0
    env.queues.update.add("default/web")
    writes = sum(env.nb.requests.values())
    env.converge()
    assert sum(env.nb.requests.values()) == writes


def test_the_policy_is_written_before_the_route_goes(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE))
    env.converge()
    env.nb.add_static_route("src-ip", "10.16.0.2", NODE_JOIN_IP, ROUTER)
    order: list[str] = []
    nb = env.nb
    real_add, real_delete = nb.add_address_set_addresses, nb.delete_static_route

    def add(*a: object, **kw: object) -> None:
        order.append("entry")
        real_add(*a, **kw)  # type: ignore[arg-type]

    def delete(*a: object, **kw: object) -> None:
        order.append("route")
        real_delete(*a, **kw)  # type: ignore[arg-type]

    nb.add_address_set_addresses = add  # type: ignore[method-assign]
    nb.delete_static_route = delete  # type: ignore[method-assign]
    env.controller.migrate_static_routes()
    env.converge()
    assert order == ["entry", "route"]
    assert not [r for r in nb.list_static_routes(ROUTER) if r.policy == "src-ip"]


def test_a_failed_migration_is_retried_and_keeps_the_route(env: Env) -> None:
    from controller.ovn.api import OvnTimeoutError

    env.create_pod(raw_pod("web", node=NODE))
    env.converge()
    for aset in env.nb.list_address_sets({"kube-ovn-route": "gateway"}):
        env.nb.remove_address_set_addresses(aset.name, list(aset.addresses))
    env.nb.add_static_route("src-ip", "10.16.0.2", NODE_JOIN_IP, ROUTER)
    env.nb.fail_next("add_address_set_addresses", OvnTimeoutError("nb down"))
    env.controller.migrate_static_routes()
    env.process(env.queues.update)
    # the route is still there: the pod never lost its way out
    assert [r.ip_prefix for r in env.nb.list_static_routes(ROUTER)] == ["10.16.0.2"]
    env.advance(10)
    env.converge()
    assert env.nb.list_static_routes(ROUTER) == []
    assert ("src-ip", "10.16.0.2", NODE_JOIN_IP) in env.routes()
