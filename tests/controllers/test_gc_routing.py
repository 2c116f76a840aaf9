"""gc of the pod routing rows: the routing reconciler's backstop pass (`gc_routing`).

Each pass diffs every routing key with the reconciler's desired-state functions, under the key's
lock: in a converged cluster it finds nothing; what it finds (drift) is repaired at once and
counted; rows of other owners are never touched; a malformed Subnet never makes it raise."""

from __future__ import annotations

from controller.core import router_policy as rp
from tests.controllers.helpers import LR, LS, NODE_IP, World, allocated, raw_pod

A_IP, A_MAC = "10.16.0.10", "00:00:00:00:00:0a"
B_IP = "10.16.0.11"
N2_IP = "100.64.0.3"
SET = rp.set_name(LS, "n1", 4)
GW_IDS = rp.ids(rp.KIND_GATEWAY, 4, subnet=LS, node="n1")


def node(w: World, name: str, join: str) -> None:
    w.kube.add_node(
        {
            "metadata": {"name": name, "annotations": {"ovn.kubernetes.io/ip_address": join}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )


def pod(w: World, name: str, ip: str, on: str = "n1") -> None:
    raw = raw_pod(name, annotations=allocated(ip, A_MAC))
    raw["spec"]["nodeName"] = on
    w.kube.add_pod(raw)


def route(w: World, ip: str, on: str = "n1", name: str = "") -> None:
    """An entry in (LS, node)'s set and its reroute, as a pod's routing writes them."""
    name = name or rp.set_name(LS, on, 4)
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=LS, node=on)
    w.nb.add_address_set_addresses(name, [ip], ids)
    w.nb.add_router_policy(
        LR, rp.GATEWAY_PRIORITY, rp.src_set_match(name, 4), "reroute", [NODE_IP], ids
    )


def entries(w: World, name: str = SET) -> list[str]:
    return [ip for a in w.nb.list_address_sets({}) if a.name == name for ip in a.addresses]


def matches(w: World) -> set[str]:
    return {p.match for p in w.nb.list_router_policies(LR)}


def converged() -> World:
    w = World()
    node(w, "n1", NODE_IP)
    pod(w, "alive", A_IP)
    w.sync()
    w.gc.gc_routing()  # the first pass writes everything (nothing was routed yet)
    return w


def test_a_converged_cluster_gives_the_backstop_nothing_to_do() -> None:
    w = converged()
    writes = sum(w.fake_nb().requests.values())
    assert w.gc.gc_routing() == []
    assert sum(w.fake_nb().requests.values()) == writes
    assert entries(w) == [A_IP]
    assert rp.src_set_match(SET, 4) in matches(w)


def test_an_entry_nobody_holds_goes_in_one_pass_and_is_counted() -> None:
    w = converged()
    route(w, B_IP)  # its pod is gone
    assert w.deleted_metric("address_set_entry") == 0  # the first pass only wrote
    (found,) = w.gc.gc_routing()
    assert found.startswith(f"{LS}/n1: ") and B_IP in found
    assert entries(w) == [A_IP]
    assert w.deleted_metric("address_set_entry") == 1


def test_rows_a_pass_has_to_write_are_counted_as_added() -> None:
    """A reroute and an entry deleted by hand are written again and counted."""
    w = converged()  # its first pass is a periodic one: what it wrote is counted too
    policies, entries_ = w.added_metric("router_policy"), w.added_metric("address_set_entry")
    w.nb.delete_router_policy(LR, rp.GATEWAY_PRIORITY, rp.src_set_match(SET, 4))
    w.nb.remove_address_set_addresses(SET, [A_IP])
    (found,) = w.gc.gc_routing()
    assert found.startswith(f"{LS}/n1: ")
    assert entries(w) == [A_IP]
    assert w.added_metric("router_policy") == policies + 1
    assert w.added_metric("address_set_entry") == entries_ + 1
    assert w.deleted_metric("router_policy") == 0


def test_the_start_up_pass_does_not_count_what_it_writes() -> None:
    w = World()
    node(w, "n1", NODE_IP)
    pod(w, "alive", A_IP)
    w.sync()
    w.gc.run_startup_gc()
    assert entries(w) == [A_IP]
    assert w.added_metric("router_policy") == 0
    assert w.added_metric("address_set_entry") == 0


def test_an_entry_of_a_pod_now_on_another_node_moves_with_it() -> None:
    w = converged()
    node(w, "n2", N2_IP)
    w.kube.pods.clear()
    pod(w, "alive", A_IP, on="n2")  # re-created on n2 under its name
    w.sync()
    w.gc.gc_routing()
    assert entries(w) == []
    assert entries(w, rp.set_name(LS, "n2", 4)) == [A_IP]
    assert w.gc.gc_routing() == []


def test_rows_of_a_deleted_node_and_orphan_pod_policies_go_foreign_ones_stay() -> None:
    w = converged()
    route(w, B_IP, on="gone")  # no such node
    w.nb.add_router_policy(
        LR,
        rp.POD_PRIORITY,
        rp.src_match("10.16.0.99"),
        "reroute",
        ["172.18.0.1"],
        rp.ids(rp.KIND_POD, 4, subnet=LS, pod="default/x"),
    )
    w.nb.add_router_policy(LR, 100, "ip4.src == 10.16.0.99", "drop", [], {"vendor": "other"})
    w.nb.add_address_set_addresses("foreign", ["10.16.0.99"], {"vendor": "other"})
    assert len(w.gc.gc_routing()) == 2  # the subnet key (pod policy), the gone node's key
    assert "ip4.src == 10.16.0.99" in matches(w)
    assert [p.priority for p in w.nb.list_router_policies(LR) if "10.16.0.99" in p.match] == [100]
    assert {a.name for a in w.nb.list_address_sets({})} == {"foreign", SET}


def test_a_malformed_subnet_is_skipped_and_the_others_are_still_collected() -> None:
    w = converged()
    w.subnets.add({"metadata": {"name": "bad"}, "spec": {"cidrBlock": 7}})
    w.nb.add_router_policy(
        LR,
        rp.SUBNET_PRIORITY,
        rp.dst_match("10.99.0.0/16"),
        "allow",
        [],
        rp.ids(rp.KIND_SUBNET, 4, subnet="bad"),
    )
    route(w, B_IP)
    found = w.gc.gc_routing()
    assert len(found) == 1 and B_IP in found[0]
    # the malformed subnet's rows are left as they are (its spec may be fixed)
    assert rp.dst_match("10.99.0.0/16") in matches(w)


def test_rows_under_the_ambiguous_names_are_renamed_in_one_transaction() -> None:
    # "prod" + "db-node1" and "prod-db" + "node1" shared one set under the old names
    w = converged()
    for aset in w.nb.list_address_sets({}):
        w.nb.delete_address_set(aset.name)
    for p in w.nb.list_router_policies(LR):
        if p.priority == rp.GATEWAY_PRIORITY:
            w.nb.delete_router_policy(LR, p.priority, p.match)
    legacy = rp.legacy_set_name(LS, "n1", 4)
    route(w, A_IP, name=legacy)
    before = w.fake_nb().requests["apply_routing"]
    w.gc.gc_routing()
    assert w.fake_nb().requests["apply_routing"] == before + 1
    assert {a.name for a in w.nb.list_address_sets({})} == {SET}
    assert entries(w) == [A_IP]
    assert rp.src_set_match(legacy, 4) not in matches(w)
    assert rp.src_set_match(SET, 4) in matches(w)


def test_set_names_are_unambiguous_and_valid_ovn_identifiers() -> None:
    from controller.ovn.logic import check_address_set_name

    a = rp.set_name("prod", "db-node1", 4)
    b = rp.set_name("prod-db", "node1", 4)
    assert a != b
    assert rp.legacy_set_name("prod", "db-node1", 4) == rp.legacy_set_name("prod-db", "node1", 4)
    for name in (a, b, rp.set_name("1subnet", "node.example.com", 6)):
        assert check_address_set_name(name) == name


def test_static_routes_a_pass_removes_are_counted() -> None:
    """kube-ovn v1.8's dst-ip route to a node (pkg/controller/node.go l.254-268) goes with the
    node policy that replaces it, and its src-ip route of a live pod's address with the pod's
    routing-set entry: each removed route is counted under `static_route`, as gc's own sweep
    of orphan src-ip routes counts them."""
    w = converged()
    w.kube.add_node(
        {
            "metadata": {"name": "n1", "annotations": {"ovn.kubernetes.io/ip_address": NODE_IP}},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "172.18.0.11"}],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    w.sync()
    w.gc.gc_routing()  # the node's policy written
    w.nb.add_static_route("", "172.18.0.11", NODE_IP, LR)
    w.nb.add_static_route("src-ip", A_IP, NODE_IP, LR)
    assert w.deleted_metric("static_route") == 0
    found = w.gc.gc_routing()
    assert sorted(f.split(":", 1)[0] for f in found) == ["/n1", f"{LS}/n1"]
    assert w.nb.list_static_routes(LR) == []
    assert w.deleted_metric("static_route") == 2
    assert w.gc.gc_routing() == []
    assert w.deleted_metric("static_route") == 2
