"""gc deletes only the port kinds this controller creates; every other kube-ovn port stays
(against a real ovsdb-server, the ports written the way kube-ovn's own components write them)."""

from __future__ import annotations

import pytest

from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer
from tests.controllers.helpers import World
from tests.fixtures.nb import nbctl

pytestmark = pytest.mark.timeout(60)

FOREIGN = {
    # the uplink of an underlay subnet (kube-ovn subnet controller)
    "localnet.ovn-default": ("localnet", "unknown"),
    # an interconnection transit port of another availability zone
    "ts-az2": ("remote", "00:00:00:00:02:01 169.254.100.2"),
    # some other kube-ovn port of type "" that is no pod or node port by its name
    "vpc-nat-gw-gw1": ("", "00:00:00:00:02:02 10.16.0.250"),
}


def _ports(remote: str) -> set[str]:
    out = nbctl(remote, "--bare", "--columns=name", "list", "Logical_Switch_Port")
    return {line for line in out.splitlines() if line}


def test_gc_leaves_ports_it_does_not_create(nb_server: NbServer) -> None:
    remote = nb_server.remote
    for name, (kind, addresses) in FOREIGN.items():
        args = ["lsp-add", "ovn-default", name, "--", "lsp-set-addresses", name, addresses]
        if kind:
            args += ["--", "lsp-set-type", name, kind]
        nbctl(remote, "--may-exist", "ls-add", "ovn-default")
        nbctl(
            remote, *args, "--", "set", "logical_switch_port", name, "external_ids:vendor=kube-ovn"
        )
    with OvsdbappNbClient.from_addr(remote, timeout=5.0) as nb:
        w = World(nb=nb)
        gone = w.network("gone", "10.16.0.10", "00:00:00:00:00:0a")
        w.sync()
        w.gc.run_startup_gc()
        ports = _ports(remote)
        assert gone not in ports  # a pod port nobody accounts for still goes
        assert set(FOREIGN) <= ports
