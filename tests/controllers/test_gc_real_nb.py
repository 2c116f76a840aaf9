"""The collector against a real ovsdb-server through OvsdbappNbClient (rows read back with
ovn-nbctl, not through the client's own cache)."""

from __future__ import annotations

import pytest

from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovsdb import NbServer
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
