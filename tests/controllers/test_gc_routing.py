"""gc of the pod routing rows: set entries, per-pod policies, node and subnet policies and sets.

Two passes, only rows with the controller's mark, an address allocated again between the passes
is kept, a foreign policy is never touched."""

from __future__ import annotations

from controller.core import router_policy as rp
from tests.controllers.helpers import LR, LS, NODE_IP, World

A_IP, A_MAC = "10.16.0.10", "00:00:00:00:00:0a"
B_IP = "10.16.0.11"
SET = rp.set_name(LS, "n1", 4)
GW_IDS = rp.ids(rp.KIND_GATEWAY, 4, subnet=LS, node="n1")


def route(w: World, ip: str, node: str = "n1") -> None:
    name = rp.set_name(LS, node, 4)
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=LS, node=node)
    w.nb.add_address_set_addresses(name, [ip], ids)
    w.nb.add_router_policy(
        LR, rp.GATEWAY_PRIORITY, rp.src_set_match(name, 4), "reroute", [NODE_IP], ids
    )


def entries(w: World, name: str = SET) -> list[str]:
    return [ip for a in w.nb.list_address_sets({}) if a.name == name for ip in a.addresses]


def matches(w: World) -> set[str]:
    return {p.match for p in w.nb.list_router_policies(LR)}


def test_an_entry_nobody_holds_goes_in_the_second_pass() -> None:
    w = World()
    w.kube.add_node({"metadata": {"name": "n1"}})
    w.network("alive", A_IP, A_MAC, route=False)
    w.kube.add_pod({"metadata": {"name": "alive", "namespace": "default"}, "spec": {}})
    route(w, A_IP)
    route(w, B_IP)  # its pod is gone and its address released
    w.sync()
    assert w.gc.gc_routing() == []
    assert w.gc.gc_routing() == [f"entry {SET} {B_IP}"]
    assert entries(w) == [A_IP]
    assert w.deleted_metric("address_set_entry") == 1
    assert rp.src_set_match(SET, 4) in matches(w)  # the node and subnet are alive


def test_an_entry_allocated_again_between_the_passes_stays() -> None:
    w = World()
    w.kube.add_node({"metadata": {"name": "n1"}})
    route(w, B_IP)
    w.sync()
    w.gc.gc_routing()
    w.network("new", B_IP, A_MAC, route=False)
    w.kube.add_pod({"metadata": {"name": "new", "namespace": "default"}, "spec": {}})
    w.sync()
    assert w.gc.gc_routing() == []
    assert entries(w) == [B_IP]


def test_the_entry_of_a_kept_address_whose_pod_is_gone_goes() -> None:
    # a StatefulSet address outlives its pod in IPAM (and its IP CR), not its routing
    w = World()
    w.kube.add_node({"metadata": {"name": "n1"}})
    w.network("kept-0", A_IP, A_MAC, route=False)
    route(w, A_IP)
    w.sync()
    assert w.gc.gc_routing() == []
    assert w.gc.gc_routing() == [f"entry {SET} {A_IP}"]
    assert w.ipam.get_ip_owner(A_IP, LS) == "default/kept-0"


def test_an_entry_of_a_pod_now_on_another_node_goes() -> None:
    w = World()
    w.kube.add_node({"metadata": {"name": "n1"}})
    w.network("moved", A_IP, A_MAC, route=False)
    w.kube.add_pod(
        {"metadata": {"name": "moved", "namespace": "default"}, "spec": {"nodeName": "n2"}}
    )
    route(w, A_IP)
    w.sync()
    w.gc.gc_routing()
    assert w.gc.gc_routing() == [f"entry {SET} {A_IP}"]


def test_rows_of_a_deleted_node_and_orphan_pod_policies_go_foreign_ones_stay() -> None:
    w = World()
    route(w, A_IP, node="gone")  # no such node
    w.nb.add_router_policy(
        LR,
        rp.POD_PRIORITY,
        rp.src_match("10.16.0.99"),
        "reroute",
        ["172.18.0.1"],
        rp.ids(rp.KIND_POD, 4, pod="default/x"),
    )
    w.nb.add_router_policy(LR, 100, "ip4.src == 10.16.0.99", "drop", [], {"vendor": "other"})
    w.nb.add_address_set_addresses("foreign", ["10.16.0.99"], {"vendor": "other"})
    w.sync()
    assert w.gc.gc_routing() == []
    deleted = w.gc.gc_routing()
    gone_set = rp.set_name(LS, "gone", 4)
    assert f"entry {gone_set} {A_IP}" in deleted
    assert f"set {gone_set}" in deleted
    assert (
        matches(w) == {"ip4.src == 10.16.0.99"} and w.nb.list_router_policies(LR)[0].priority == 100
    )
    assert [a.name for a in w.nb.list_address_sets({})] == ["foreign"]


def test_startup_gc_runs_the_routing_sweep_twice() -> None:
    w = World()
    w.kube.add_node({"metadata": {"name": "n1"}})
    route(w, B_IP)
    w.sync()
    w.gc.run_startup_gc()
    assert entries(w) == []
