"""The routing reconciler against the fake NB, driven the informers' way (tests/pod/env.py): every
scenario ends in the converged state the caches describe, whatever the order of events.

How a pod leaves the cluster is read back from the NB rows (`Env.routes()`): ("src-ip", address,
next hop) for each address-set entry under its set's reroute, each per-pod reroute, and any
src-ip static route; a centralized subnet's whole-CIDR reroute is listed by `subnet_routes`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from controller.config import Config
from controller.core import router_policy as rp
from controller.ovn.api import AddressSetInfo, NatRule, RoutingChange
from tests.pod.env import (
    DEFAULT_SUBNET,
    NODE,
    NODE_JOIN_IP,
    ROUTER,
    Env,
    cached,
    raw_pod,
    raw_subnet,
    standard_env,
)

N2, N2_JOIN = "node2", "100.64.0.3"
N3, N3_JOIN = "node3", "100.64.0.4"
EIP = "ovn.kubernetes.io/eip"
SNAT = "ovn.kubernetes.io/snat"
ROUTED = "ovn.kubernetes.io/routed"
GW_CONFIG = {
    "metadata": {"name": "ovn-external-gw-config", "namespace": "kube-system"},
    "data": {"external-gw-addr": "172.56.0.1"},
}


@pytest.fixture
def env() -> Iterator[Env]:
    e = standard_env()
    make_ready(e, NODE, NODE_JOIN_IP)
    make_ready(e, N2, N2_JOIN)
    e.kube.create_subnet(cached(e.subnets, DEFAULT_SUBNET))
    yield e
    e.close()


def make_ready(
    env: Env, name: str, join: str, *, ready: bool = True, internal: str = "172.18.0.9"
) -> None:
    """A node (created or replaced) with its join address and Ready condition; fires the event."""
    old = env.nodes.get_by_key(name)
    version = str(int((old or {}).get("metadata", {}).get("resourceVersion") or 0) + 1)
    new = {
        "metadata": {
            "name": name,
            "resourceVersion": version,
            "annotations": {"ovn.kubernetes.io/ip_address": join},
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": internal}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    handler = env.routing.node_event_handler()
    if old is None:
        env.nodes.add(new)
        handler.on_add(new, False)
    else:
        env.nodes.update(new)
        handler.on_update(old, new)


def delete_node(env: Env, name: str) -> None:
    old = cached(env.nodes, name)
    env.nodes.delete(old)
    env.routing.node_event_handler().on_delete(old)


def edit_subnet(env: Env, name: str, status: dict[str, Any] | None = None, **spec: Any) -> None:
    old = cached(env.subnets, name)
    new = copy.deepcopy(old)
    new["spec"].update(spec)
    new["status"] = {**(new.get("status") or {}), **(status or {})}
    new["metadata"]["resourceVersion"] = str(int(old["metadata"].get("resourceVersion") or 0) + 1)
    env.subnets.update(new)
    env.routing.subnet_event_handler().on_update(old, new)


def start(env: Env, name: str, node: str = NODE, **kw: Any) -> str:
    env.create_pod(raw_pod(name, node=node, **kw))
    env.converge()
    return env.annotations(f"default/{name}")["ovn.kubernetes.io/ip_address"]


def subnet_routes(env: Env) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (p.match, p.nexthops)
        for p in env.nb.list_router_policies(ROUTER)
        if p.priority == rp.GATEWAY_PRIORITY and "$" not in p.match
    ]


def routing_sets(env: Env) -> dict[str, tuple[str, ...]]:
    return {a.name: a.addresses for a in env.nb.list_address_sets({"kube-ovn-route": "gateway"})}


def quiet(env: Env) -> None:
    """A full pass finds nothing more to write (the state is converged)."""
    env.enqueue_routing()
    writes = env.nb.requests["apply_routing"]
    env.converge()
    assert env.nb.requests["apply_routing"] == writes
    assert env.routing.backstop() == []


# --- gateway type switches ----------------------------------------------------------------------


def test_distributed_to_centralized_drops_every_node_reroute_and_entry(env: Env) -> None:
    a = start(env, "a")
    b = start(env, "b", N2)
    assert sorted(env.routes()) == [("src-ip", a, NODE_JOIN_IP), ("src-ip", b, N2_JOIN)]

    edit_subnet(env, DEFAULT_SUBNET, gatewayType="centralized", gatewayNode=f"{N2},{NODE}")
    env.converge()

    assert routing_sets(env) == {}
    assert env.routes() == []
    assert subnet_routes(env) == [("ip4.src == 10.16.0.0/16", (N2_JOIN,))]
    assert env.kube.subnets[DEFAULT_SUBNET]["status"]["activateGateway"] == N2
    quiet(env)


def test_centralized_to_distributed_puts_every_running_pod_back_first(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit_subnet(env, DEFAULT_SUBNET, gatewayType="centralized", gatewayNode=NODE)
    a = start(env, "a")
    b = start(env, "b", N2)
    assert routing_sets(env) == {} and subnet_routes(env)
    applied: list[RoutingChange] = []
    real = env.nb.apply_routing

    def recording(router: str, change: RoutingChange) -> None:
        applied.append(change)
        real(router, change)

    monkeypatch.setattr(env.nb, "apply_routing", recording)

    edit_subnet(env, DEFAULT_SUBNET, gatewayType="distributed", gatewayNode="")
    env.converge()

    assert sorted(env.routes()) == [("src-ip", a, NODE_JOIN_IP), ("src-ip", b, N2_JOIN)]
    assert subnet_routes(env) == []
    # the subnet-wide reroute went only after both nodes' entries were written
    dropped = [i for i, c in enumerate(applied) if c.delete_policies]
    written = [i for i, c in enumerate(applied) if c.sets]
    assert len(written) == 2 and max(written) < min(dropped)
    quiet(env)


# --- pods moving --------------------------------------------------------------------------------


def test_a_pod_re_created_on_another_node_before_its_delete_runs_leaves_no_entry(env: Env) -> None:
    ip = start(env, "web")
    old = cached(env.pods, "default/web")
    # the successor (same name, new uid, other node, same address: a StatefulSet's) is cached
    # before the old delete is handled, which then skips its cleanup as "re-created"
    new = copy.deepcopy(old)
    new["metadata"]["uid"] = "uid-2"
    new["metadata"]["resourceVersion"] += "1"
    new["spec"]["nodeName"] = N2
    env.kube.pods["default/web"] = copy.deepcopy(new)
    env.pods.update(new)
    env.pod_events.on_update(old, new)
    env.routing_events.on_update(old, new)
    env.converge()
    assert env.routes() == [("src-ip", ip, N2_JOIN)]
    assert routing_sets(env) == {rp.set_name(DEFAULT_SUBNET, N2, 4): (ip,)}
    quiet(env)


def test_churn_with_the_same_names_over_two_nodes_converges(env: Env) -> None:
    for rnd in range(6):
        node = NODE if rnd % 2 == 0 else N2
        for i in range(5):
            env.create_pod(raw_pod(f"p{i}", node=node))
        env.converge()
        for i in range(5):
            env.remove_pod(f"default/p{i}")
        if rnd == 5:
            break
        env.converge()
    env.converge()
    assert env.routes() == []
    assert all(not entries for entries in routing_sets(env).values())
    quiet(env)


def test_a_pod_moved_to_another_subnet_leaves_no_entry_or_nat() -> None:
    env = standard_env(config=Config(enable_eip_snat=True))
    try:
        make_ready(env, NODE, NODE_JOIN_IP)
        env.add_subnet(raw_subnet("other", "10.17.0.0/16", gateway="10.17.0.1"))
        env.configmaps.add(GW_CONFIG)
        ip = start(env, "db-0", annotations={SNAT: "172.56.0.20"})
        assert ("snat", ip, "172.56.0.20", "") in env.nats()
        # the StatefulSet pod comes back in another subnet with another address
        old = cached(env.pods, "default/db-0")
        env.kube.pods.pop("default/db-0")
        env.pods.delete(old)
        env.routing_events.on_delete(old)
        env.ipam.release_address_by_pod("default/db-0")
        env.create_pod(
            raw_pod(
                "db-0",
                node=NODE,
                annotations={"ovn.kubernetes.io/logical_switch": "other", SNAT: "172.56.0.21"},
            )
        )
        env.converge()
        new_ip = env.annotations("default/db-0")["ovn.kubernetes.io/ip_address"]
        assert new_ip.startswith("10.17.")
        assert [n for n in env.nats() if n[1] == ip] == []
        assert ("snat", new_ip, "172.56.0.21", "") in env.nats()
        assert [r for r in env.routes() if r[1] == ip] == []
        quiet(env)
    finally:
        env.close()


def test_a_pod_routed_again_then_replaced_in_another_subnet_leaves_no_nat() -> None:
    """A second add of a routed pod routes it again with no change to its annotations (no
    event settles its node key). The pod is then replaced, in one relist, by a pod of the
    same name on another subnet and node: the old address's NAT rule goes with the relist's
    keys, though the subnet key runs before the old node key."""
    env = standard_env(config=Config(enable_eip_snat=True))
    try:
        make_ready(env, NODE, NODE_JOIN_IP)
        make_ready(env, N2, N2_JOIN)
        env.add_subnet(raw_subnet("other", "10.17.0.0/16", gateway="10.17.0.1"))
        env.configmaps.add(GW_CONFIG)
        ip = start(env, "db-0", annotations={SNAT: "172.56.0.20"})
        assert env.routing.route_pod(env.view.pod_model(cached(env.pods, "default/db-0")))
        assert ("snat", ip, "172.56.0.20", "") in env.nats()
        successor = raw_pod(
            "db-0",
            node=N2,
            annotations={"ovn.kubernetes.io/logical_switch": "other", SNAT: "172.56.0.20"},
        )
        successor["metadata"]["uid"] = "successor"
        env.kube.pods.pop("default/db-0")
        env.kube.add_pod(successor)
        env.kube.pods["default/db-0"]["metadata"]["resourceVersion"] = str(10**7)
        env.sync("default/db-0")  # the relist: an update whose objects have different UIDs
        env.converge()
        new_ip = env.annotations("default/db-0")["ovn.kubernetes.io/ip_address"]
        assert new_ip.startswith("10.17.")
        assert [n for n in env.nats() if n[1] == ip] == []
        assert [r for r in env.routes() if r[1] == ip] == []
        quiet(env)
    finally:
        env.close()


def test_a_pod_whose_user_preset_routed_still_gets_routed(env: Env) -> None:
    ip = start(env, "web", annotations={ROUTED: "true"})
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]


# --- nodes --------------------------------------------------------------------------------------


def test_a_join_address_change_moves_the_reroute(env: Env) -> None:
    ip = start(env, "web")
    make_ready(env, NODE, "100.64.0.99")
    env.converge()
    assert env.routes() == [("src-ip", ip, "100.64.0.99")]
    quiet(env)


def test_a_node_deleted_and_re_registered_gets_its_pods_back(env: Env) -> None:
    ip = start(env, "web")
    delete_node(env, NODE)
    env.converge()
    assert env.routes() == []  # no next hop while the node is gone
    make_ready(env, NODE, NODE_JOIN_IP)
    env.converge()
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]
    quiet(env)


def node_policies(env: Env) -> dict[str, tuple[str, ...]]:
    """match -> next hops of the priority-30000 policies (a node's InternalIP via its join)."""
    return {
        p.match: tuple(p.nexthops)
        for p in env.nb.list_router_policies(ROUTER)
        if p.priority == rp.NODE_PRIORITY
    }


def two_internal_ips(env: Env) -> None:
    make_ready(env, NODE, NODE_JOIN_IP, internal="172.18.0.11")
    make_ready(env, N2, N2_JOIN, internal="172.18.0.12")
    env.enqueue_routing()
    env.converge()


def test_a_nodes_policy_follows_its_internal_ip_and_join_address(env: Env) -> None:
    two_internal_ips(env)
    assert node_policies(env) == {
        "ip4.dst == 172.18.0.11": (NODE_JOIN_IP,),
        "ip4.dst == 172.18.0.12": (N2_JOIN,),
    }
    make_ready(env, NODE, "100.64.0.99", internal="172.18.0.21")
    env.converge()
    assert node_policies(env) == {
        "ip4.dst == 172.18.0.21": ("100.64.0.99",),
        "ip4.dst == 172.18.0.12": (N2_JOIN,),
    }
    quiet(env)


def test_a_deleted_nodes_policy_goes_and_comes_back_with_it(env: Env) -> None:
    two_internal_ips(env)
    delete_node(env, N2)
    env.converge()
    assert node_policies(env) == {"ip4.dst == 172.18.0.11": (NODE_JOIN_IP,)}
    make_ready(env, N2, "100.64.0.77", internal="172.18.0.12")
    env.converge()
    assert node_policies(env)["ip4.dst == 172.18.0.12"] == ("100.64.0.77",)
    quiet(env)


def test_the_backstop_restores_and_removes_node_policies(env: Env) -> None:
    """A node policy deleted by hand is written again; one of a node no cache knows (deleted
    while no controller ran) is removed: both by the full pass and by gc's backstop."""
    two_internal_ips(env)
    env.nb.delete_router_policy(ROUTER, rp.NODE_PRIORITY, "ip4.dst == 172.18.0.11")
    env.nb.add_router_policy(
        ROUTER,
        rp.NODE_PRIORITY,
        "ip4.dst == 172.18.0.50",
        "reroute",
        ["100.64.0.50"],
        rp.ids(rp.KIND_NODE, 4, node="gone"),
    )
    found = dict(env.routing.backstop())
    assert sorted(found) == ["/gone", f"/{NODE}"]
    assert node_policies(env) == {
        "ip4.dst == 172.18.0.11": (NODE_JOIN_IP,),
        "ip4.dst == 172.18.0.12": (N2_JOIN,),
    }
    env.nb.delete_router_policy(ROUTER, rp.NODE_PRIORITY, "ip4.dst == 172.18.0.12")
    env.routing.resync()
    env.converge()
    assert node_policies(env)["ip4.dst == 172.18.0.12"] == (N2_JOIN,)
    quiet(env)


def test_two_nodes_reporting_one_internal_ip_do_not_overwrite_each_other(env: Env) -> None:
    """The fixture's nodes share 172.18.0.9: the first by name routes it, and a full pass
    finds nothing to change (the keys do not take the row from each other)."""
    env.enqueue_routing()
    env.converge()
    assert node_policies(env) == {"ip4.dst == 172.18.0.9": (NODE_JOIN_IP,)}
    quiet(env)


def test_without_the_node_controller_node_policies_are_left_alone() -> None:
    env = standard_env(config=Config(enable_node_controller=False))
    try:
        make_ready(env, NODE, NODE_JOIN_IP, internal="172.18.0.11")
        env.enqueue_routing()
        env.converge()
        assert node_policies(env) == {}
        assert env.routing.backstop() == []
    finally:
        env.close()


def test_an_internal_ip_change_queues_the_node_policy_key(env: Env) -> None:
    env.converge()
    make_ready(env, N2, N2_JOIN, internal="172.18.0.40")
    assert f"/{N2}" in env.drain(env.routing_queue)


def test_the_centralized_gateway_must_be_ready_and_follows_the_nodes(env: Env) -> None:
    make_ready(env, NODE, NODE_JOIN_IP, ready=False)
    edit_subnet(env, DEFAULT_SUBNET, gatewayType="centralized", gatewayNode=f"{NODE},{N2}")
    env.converge()
    assert subnet_routes(env) == [("ip4.src == 10.16.0.0/16", (N2_JOIN,))]
    # node1 recovers: the active gateway stays (sticky status.activateGateway)
    edit_subnet(env, DEFAULT_SUBNET, status=env.kube.subnets[DEFAULT_SUBNET]["status"])
    make_ready(env, NODE, NODE_JOIN_IP)
    env.converge()
    assert subnet_routes(env) == [("ip4.src == 10.16.0.0/16", (N2_JOIN,))]
    # the active gateway is deleted: its delete re-queues the subnet
    delete_node(env, N2)
    env.converge()
    assert subnet_routes(env) == [("ip4.src == 10.16.0.0/16", (NODE_JOIN_IP,))]
    assert env.kube.subnets[DEFAULT_SUBNET]["status"]["activateGateway"] == NODE


def test_no_ready_gateway_keeps_the_last_reroute(env: Env) -> None:
    edit_subnet(env, DEFAULT_SUBNET, gatewayType="centralized", gatewayNode=NODE)
    env.converge()
    make_ready(env, NODE, NODE_JOIN_IP, ready=False)
    env.converge()
    assert subnet_routes(env) == [("ip4.src == 10.16.0.0/16", (NODE_JOIN_IP,))]


# --- bad input ----------------------------------------------------------------------------------


def test_a_malformed_subnet_never_makes_a_pass_raise(env: Env) -> None:
    ip = start(env, "web")
    env.subnets.add({"metadata": {"name": "bad"}, "spec": {"cidrBlock": ["x"]}})
    env.routing.enqueue("bad")
    env.routing.enqueue(f"bad/{NODE}")
    env.enqueue_routing()
    env.converge()
    assert env.routing.backstop() == []
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]


def test_a_delete_whose_subnet_is_gone_from_the_cache_is_not_retried_forever(env: Env) -> None:
    start(env, "web")
    raw = cached(env.subnets, DEFAULT_SUBNET)
    env.subnets.delete(raw)  # IPAM still lists it
    env.remove_pod("default/web")
    env.converge()
    assert env.ipam.get_pod_address("default/web") == []
    assert len(env.queues.delete) == 0


# --- KubeVirt -----------------------------------------------------------------------------------


def test_live_migration_source_delete_keeps_the_nat_and_reroute_the_vm_uses() -> None:
    env = standard_env(config=Config(enable_keep_vm_ip=True, enable_eip_snat=True))
    try:
        make_ready(env, NODE, NODE_JOIN_IP)
        make_ready(env, N2, N2_JOIN)
        env.configmaps.add(GW_CONFIG)
        env.vms.add({"metadata": {"name": "vm1", "namespace": "default"}})
        owner = ("kubevirt.io/v1", "VirtualMachineInstance", "vm1")
        ip = start(env, "virt-launcher-vm1-src", owner=owner, annotations={EIP: "172.56.0.9"})
        start(env, "virt-launcher-vm1-dst", N2, owner=owner, annotations={EIP: "172.56.0.9"})
        assert (
            env.annotations("default/virt-launcher-vm1-dst")["ovn.kubernetes.io/ip_address"] == ip
        )
        env.remove_pod("default/virt-launcher-vm1-src")
        env.converge()
        assert (NatRule(ROUTER, "dnat_and_snat", "172.56.0.9", ip)) in env.nb.list_nat_rules(ROUTER)
        assert ("src-ip", ip, "172.56.0.1") in env.routes()
        quiet(env)
    finally:
        env.close()


def test_gc_never_removes_an_entry_an_add_writes_between_its_read_and_its_write(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop reads and applies a key under the key's lock: an add of a pod that reuses a
    released address on the same node (the pod handler writes under the same lock) waits, and
    its entry survives the pass."""
    import threading

    start(env, "old")
    ip = env.annotations("default/old")["ovn.kubernetes.io/ip_address"]
    env.remove_pod("default/old")
    env.converge()
    # the entry of the released address is back (drift the backstop will remove)
    set_ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=DEFAULT_SUBNET, node=NODE)
    env.nb.add_address_set_addresses(rp.set_name(DEFAULT_SUBNET, NODE, 4), [ip], set_ids)
    # a new pod got that very address on the same node; its add runs mid-pass
    successor = raw_pod("new", node=NODE, annotations=builders_allocated(ip), uid="uid-new")
    adder: list[threading.Thread] = []
    real = env.nb.list_address_sets

    def read_then_race(ids: Mapping[str, str]) -> list[AddressSetInfo]:
        rows = real(ids)
        if not adder and ids.get("node") == NODE:
            stored = env.kube.add_pod(successor)
            env.pods.add(copy.deepcopy(stored))
            thread = threading.Thread(
                target=env.routing.route_pod, args=(env.view.pod_model(stored),)
            )
            adder.append(thread)
            thread.start()
            thread.join(0.2)
            # it cannot write while the pass holds the key
            assert thread.is_alive()
        return rows

    monkeypatch.setattr(env.nb, "list_address_sets", read_then_race)
    env.routing.backstop()
    adder[0].join(10)
    monkeypatch.undo()
    assert not adder[0].is_alive()
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]
    quiet(env)


def builders_allocated(ip: str) -> dict[str, str]:
    from controller.testing import builders

    return builders.allocated(ip, "00:00:00:00:00:99", DEFAULT_SUBNET)


def test_a_key_settled_before_the_cache_has_the_pods_allocation_keeps_its_entry(env: Env) -> None:
    """The add writes the pod's rows before its annotation patch reaches the cache; a pass over
    the node's key in between keeps them (the routed pod is remembered until then)."""
    env.create_pod(raw_pod("web", node=NODE))
    env.process(env.queues.add)  # routed and patched on the API server, the cache not synced
    ip = env.annotations("default/web")["ovn.kubernetes.io/ip_address"]
    assert "ovn.kubernetes.io/ip_address" not in (
        cached(env.pods, "default/web")["metadata"].get("annotations") or {}
    )
    env.routing.handle(f"{DEFAULT_SUBNET}/{NODE}")
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]
    env.converge()
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]
    quiet(env)


def test_events_that_change_nothing_routing_depends_on_queue_nothing(env: Env) -> None:
    start(env, "web")
    env.drain(env.routing_queue)
    old = cached(env.pods, "default/web")
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"app": "x"}
    new["metadata"]["resourceVersion"] += "1"
    env.routing_events.on_update(old, new)
    # a node's heartbeat
    node = cached(env.nodes, NODE)
    beat = copy.deepcopy(node)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T12:00:10Z"
    beat["metadata"]["resourceVersion"] += "1"
    env.routing.node_event_handler().on_update(node, beat)
    assert env.drain(env.routing_queue) == []
    # an address change queues the pod's keys
    new["metadata"]["annotations"]["ovn.kubernetes.io/ip_address"] = "10.16.0.99"
    env.routing_events.on_update(old, new)
    assert sorted(env.drain(env.routing_queue)) == [DEFAULT_SUBNET, f"{DEFAULT_SUBNET}/{NODE}"]


def test_the_backstop_leaves_a_queued_key_to_the_reconciler(env: Env) -> None:
    """A pass running between a pod's delete event and its keys' handling finds what the queued
    keys are about to write: converging, not drift. A drifted key nobody queued is still found."""
    ip = start(env, "web")
    env.remove_pod("default/web")  # the informer's delete: the keys are queued, not yet handled
    assert env.routing.backstop() == []
    assert env.routes() == [("src-ip", ip, NODE_JOIN_IP)]
    env.converge()
    assert env.routes() == []
    env.nb.add_address_set_addresses(
        rp.set_name(DEFAULT_SUBNET, NODE, 4),
        ["10.16.0.99"],
        rp.ids(rp.KIND_GATEWAY, 4, subnet=DEFAULT_SUBNET, node=NODE),
    )
    found = env.routing.backstop()
    assert [key for key, _ in found] == [f"{DEFAULT_SUBNET}/{NODE}"]
    quiet(env)


def test_the_backstop_diffs_the_node_keys_itself_and_queues_none(env: Env) -> None:
    """Drift in a node key is found (and counted) by the pass: the pass does not queue the node
    keys for a worker that could repair the drift before the pass sees it."""
    start(env, "web")
    env.converge()
    env.nb.add_address_set_addresses(
        rp.set_name(DEFAULT_SUBNET, NODE, 4),
        ["10.16.0.99"],
        rp.ids(rp.KIND_GATEWAY, 4, subnet=DEFAULT_SUBNET, node=NODE),
    )
    found = env.routing.backstop()
    assert [key for key, _ in found] == [f"{DEFAULT_SUBNET}/{NODE}"]
    assert env.drain(env.routing_queue) == []


def test_a_nodes_v18_static_route_is_replaced_by_its_policy(env: Env) -> None:
    """kube-ovn v1.8.18 routed to a node's InternalIP with a dst-ip static route via its join
    address (pkg/controller/node.go l.254-268); the node policy key swaps it for the 30000
    reroute in one transaction, and a gone node's route goes by that next hop."""
    env.nb.add_static_route("", "172.18.0.11", NODE_JOIN_IP, ROUTER)
    env.nb.add_static_route("", "172.18.0.12", N2_JOIN, ROUTER)
    env.nb.add_static_route("", "172.18.0.99", "10.0.0.1", ROUTER)  # not a node's
    env.nb.add_static_route("", "0.0.0.0/0", "100.64.0.1", ROUTER)
    two_internal_ips(env)
    assert node_policies(env) == {
        "ip4.dst == 172.18.0.11": (NODE_JOIN_IP,),
        "ip4.dst == 172.18.0.12": (N2_JOIN,),
    }
    assert env.routes() == [
        ("dst-ip", "0.0.0.0/0", "100.64.0.1"),
        ("dst-ip", "172.18.0.99", "10.0.0.1"),
    ]
    # a node that went while v1.8 still ran: its route by next hop goes with its policy
    env.nb.add_static_route("", "172.18.0.12", N2_JOIN, ROUTER)
    delete_node(env, N2)
    env.converge()
    assert node_policies(env) == {"ip4.dst == 172.18.0.11": (NODE_JOIN_IP,)}
    assert env.routes() == [
        ("dst-ip", "0.0.0.0/0", "100.64.0.1"),
        ("dst-ip", "172.18.0.99", "10.0.0.1"),
    ]
    quiet(env)


# --- addresses shared across VPCs and networks ---------------------------------------------------

SHARED_IP = "10.16.0.50"
MACVLAN_CONF = '{"cniVersion": "0.3.1", "type": "macvlan", "ipam": {"type": "kube-ovn"}}'


def tenant_pod(env: Env) -> None:
    """A pod of a custom-VPC subnet reusing the default subnet's range (its own router)."""
    env.vpcs.add({"metadata": {"name": "tenant"}, "status": {"router": "tenant"}})
    env.nb.ensure_logical_router("tenant")
    env.add_subnet(raw_subnet("tenant-net", "10.16.0.0/16", gateway="10.16.0.1", vpc="tenant"))
    ann = {
        "ovn.kubernetes.io/logical_switch": "tenant-net",
        "ovn.kubernetes.io/ip_address": SHARED_IP,
    }
    start(env, "other", annotations=ann)
    assert env.annotations("default/other")["ovn.kubernetes.io/ip_address"] == SHARED_IP


def attachment_pod(env: Env) -> None:
    """A pod whose IPAM-only attachment network (macvlan, kube-ovn IPAM) has a subnet reusing
    the default subnet's range: not an OVN subnet, so kube-ovn checks no overlap and writes no
    OVN row for it (v1.8.18 pkg/controller/subnet.go handleAddOrUpdateSubnet returns at
    `!isOvnSubnet`)."""
    env.nads.add(
        {"metadata": {"name": "mv", "namespace": "default"}, "spec": {"config": MACVLAN_CONF}}
    )
    env.add_subnet(raw_subnet("mv", "10.16.0.0/16", gateway="10.16.0.1", provider="mv.default"))
    ann = {"k8s.v1.cni.cncf.io/networks": "mv", "mv.default.kubernetes.io/ip_address": SHARED_IP}
    start(env, "other", annotations=ann)
    assert env.annotations("default/other")["mv.default.kubernetes.io/ip_address"] == SHARED_IP


def shared_rows(env: Env) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, str]]]:
    """How `SHARED_IP` leaves the cluster, and its NAT rules."""
    return [r for r in env.routes() if r[1] == SHARED_IP], [
        n for n in env.nats() if n[1] == SHARED_IP
    ]


@pytest.mark.parametrize("other", [tenant_pod, attachment_pod], ids=["custom-vpc", "attachment"])
@pytest.mark.parametrize(
    "extra",
    [{}, {SNAT: "172.56.0.20"}, {"ovn.kubernetes.io/north_gateway": "10.16.0.254"}],
    ids=["set-entry", "snat", "north-gateway"],
)
def test_another_subnets_release_of_an_address_keeps_the_default_pods_rows_of_it(
    other: Callable[[Env], None], extra: dict[str, str]
) -> None:
    """A custom VPC or an attachment network may reuse a default-VPC range: the delete of its
    pod holding the same address as a default-VPC pod removes none of the rows that pod's
    address has on the cluster router (its node's set entry, its own reroute, its NAT)."""
    env = standard_env(config=Config(enable_eip_snat=True))
    try:
        make_ready(env, NODE, NODE_JOIN_IP)
        env.configmaps.add(GW_CONFIG)
        start(env, "web", annotations={"ovn.kubernetes.io/ip_address": SHARED_IP, **extra})
        other(env)
        env.enqueue_routing()  # the new subnet's own rows (no subnet event in this bed)
        env.converge()
        before_routes, before_nats = shared_rows(env)
        assert before_routes != []
        assert (before_nats != []) == (SNAT in extra)
        env.remove_pod("default/other")
        env.process(env.queues.delete)
        assert env.ipam.get_pod_address("default/other") == []
        # only the delete has run: nothing the routing queue does can have put the rows back
        assert shared_rows(env) == (before_routes, before_nats)
        env.converge()
        assert shared_rows(env) == (before_routes, before_nats)
        quiet(env)
    finally:
        env.close()


# --- gc's backstop and the events on their way --------------------------------------------------


def node3() -> dict[str, Any]:
    return {
        "metadata": {
            "name": N3,
            "resourceVersion": "1",
            "annotations": {"ovn.kubernetes.io/ip_address": N3_JOIN},
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": "172.18.0.13"}],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


@pytest.mark.parametrize("event_arrives", [True, False], ids=["event-on-its-way", "no-event"])
def test_a_backstop_pass_racing_an_event_counts_no_drift(env: Env, event_arrives: bool) -> None:
    """The informer caches a change before its handler queues the keys it affects: a pass that
    runs in between writes those keys' rows, as their handler would, and is no drift, once the
    event has queued them. A change no event announces stays drift."""
    start(env, "a")
    quiet(env)
    node = node3()
    env.nodes.add(node)  # cached; the notification has not reached the routing handler yet
    delivered: list[bool] = []

    def deliver() -> bool:
        if event_arrives and not delivered:
            env.routing.node_event_handler().on_add(node, False)
        delivered.append(True)
        return True

    env.routing.events_delivered = deliver
    found = dict(env.routing.backstop())
    assert node_policies(env)["ip4.dst == 172.18.0.13"] == (N3_JOIN,)  # written either way
    if event_arrives:
        assert found == {}
    else:
        assert f"/{N3}" in found
    env.converge()
    quiet(env)
