"""The collector against a real ovsdb-server through OvsdbappNbClient (rows read back with
ovn-nbctl, not through the client's own cache)."""

from __future__ import annotations

import pytest

from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer
from tests.controllers.helpers import LR, World, allocated, raw_pod
from tests.fixtures.nb import nbctl as nbctl_text

pytestmark = pytest.mark.timeout(60)


def nbctl(remote: str, *args: str) -> list[str]:
    return [line for line in nbctl_text(remote, *args).splitlines() if line]


def test_orphans_go_and_live_pods_stay_on_a_real_nb(nb_server: NbServer) -> None:
    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=5.0) as nb:
        w = World(nb=nb)
        gone = w.network("gone", "10.16.0.10", "00:00:00:00:00:0a", nat=True)
        alive = w.network("alive", "10.16.0.11", "00:00:00:00:00:0b")
        w.kube.add_pod(raw_pod("alive", annotations=allocated("10.16.0.11", "00:00:00:00:00:0b")))
        node = w.node("n1", "100.64.0.2", "00:00:00:00:01:01")
        nb.add_static_route("src-ip", "10.16.0.99", "100.64.0.2", LR)
        w.sync()
        remote = nb_server.remote

        w.gc.run_once()
        assert gone in nbctl(remote, "--bare", "--columns=name", "list", "Logical_Switch_Port")

        w.gc.run_once()
        ports = set(nbctl(remote, "--bare", "--columns=name", "list", "Logical_Switch_Port"))
        assert gone not in ports
        assert {alive, node, "ovn-default-ovn-cluster", "join-ovn-cluster"} <= ports
        prefixes = set(
            nbctl(remote, "--bare", "--columns=ip_prefix", "list", "Logical_Router_Static_Route")
        )
        assert prefixes == {"10.16.0.11"}
        assert nbctl(remote, "--bare", "--columns=logical_ip", "list", "NAT") == []
        assert set(w.kube.ips) == {"alive.default", "node-n1"}
        assert w.held("default/gone") == []


def test_routing_backstop_renames_sets_and_migrates_v18_routes_on_a_real_nb(
    nb_server: NbServer,
) -> None:
    from controller.core import router_policy as rp

    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=5.0) as nb:
        w = World(nb=nb)
        w.kube.add_node(
            {
                "metadata": {
                    "name": "n1",
                    "annotations": {"ovn.kubernetes.io/ip_address": "100.64.0.2"},
                },
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        w.kube.add_pod(raw_pod("alive", annotations=allocated("10.16.0.11", "00:00:00:00:00:0b")))
        # what an earlier release left: the ambiguous set name, and kube-ovn v1.8's route
        ids = rp.ids(rp.KIND_GATEWAY, 4, subnet="ovn-default", node="n1")
        legacy = rp.legacy_set_name("ovn-default", "n1", 4)
        nb.add_address_set_addresses(legacy, ["10.16.0.11", "10.16.0.12"], ids)
        nb.add_router_policy(
            LR, rp.GATEWAY_PRIORITY, rp.src_set_match(legacy, 4), "reroute", ["100.64.0.2"], ids
        )
        nb.add_static_route("src-ip", "10.16.0.11", "100.64.0.2", LR)
        w.sync()
        remote = nb_server.remote

        w.gc.run_once()
        name = rp.set_name("ovn-default", "n1", 4)
        sets = nbctl(remote, "--bare", "--columns=name,addresses", "list", "Address_Set")
        assert sets == [name, "10.16.0.11"]
        matches = nbctl(remote, "--bare", "--columns=match", "list", "Logical_Router_Policy")
        assert f"ip4.src == ${name}" in matches and f"ip4.src == ${legacy}" not in matches
        assert (
            nbctl(remote, "--bare", "--columns=ip_prefix", "list", "Logical_Router_Static_Route")
            == []
        )
        # converged: the next pass removes nothing
        before = w.deleted_metric("address_set_entry") + w.deleted_metric("router_policy")
        w.gc.run_once()
        assert w.deleted_metric("address_set_entry") + w.deleted_metric("router_policy") == before
