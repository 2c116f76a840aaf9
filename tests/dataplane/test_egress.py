"""Egress through the pod's own node: with two nodes (one chassis carries both), a pod's traffic
to an address outside the cluster leaves through *its* node's join port, as the distributed
gateway route says. Each node's namespace owns the same "outside" address with a TCP listener
that answers the node's name, so the answer tells which node the packet left through."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from controller.core.constants import NORTH_GATEWAY_ANNOTATION
from controller.sandbox.processes import stop_process
from tests.dataplane.helpers import NODE2, Net
from tests.dataplane.routes import reach_or_explain
from tests.e2e.helpers import NODE

OUTSIDE = {4: "192.0.2.10", 6: "2001:db8::10"}
PORT = 8000


@contextlib.contextmanager
def _outside_world(net: Net) -> Iterator[None]:
    procs = []
    try:
        for name in (NODE, NODE2):
            netns = net.node_netns[name]
            for version, addr in OUTSIDE.items():
                plen = 32 if version == 4 else 128
                net.dp.exec_in(netns, ["ip", "addr", "add", f"{addr}/{plen}", "dev", "lo"])
            procs.append(net.dp.tcp_listen(netns, "::", PORT, reply=name.encode()))
        yield
    finally:
        for proc in procs:
            stop_process(proc)
        for name in (NODE, NODE2):
            for version, addr in OUTSIDE.items():
                plen = 32 if version == 4 else 128
                with contextlib.suppress(Exception):
                    net.dp.exec_in(
                        net.node_netns[name], ["ip", "addr", "del", f"{addr}/{plen}", "dev", "lo"]
                    )


def test_each_pod_leaves_the_cluster_through_its_own_node(net: Net) -> None:
    on1 = net.create("egress-1", node=NODE)
    on2 = net.create("egress-2", node=NODE2)
    with _outside_world(net):
        for version, addr in OUTSIDE.items():
            net.reaches(on1.netns, addr)
            net.reaches(on2.netns, addr)
            assert net.dp.tcp_request(on1.netns, addr, PORT) == NODE.encode(), version
            assert net.dp.tcp_request(on2.netns, addr, PORT) == NODE2.encode(), version
    # without the outside world, nothing answers there
    net.silent(on1.netns, OUTSIDE[4])


@pytest.mark.parametrize("version", [4, 6])
def test_a_pod_reaches_its_own_nodes_join_address(net: Net, version: int) -> None:
    on2 = net.create(f"join-own{version}", node=NODE2)
    net.reaches(on2.netns, net.node_ip(NODE2, version))


@pytest.mark.parametrize("version", [4, 6])
def test_a_pod_reaches_another_nodes_join_address(net: Net, version: int) -> None:
    on2 = net.create(f"join-other{version}", node=NODE2)
    cidr = "100.64.0.0/16" if version == 4 else "fd00:100:64::/64"
    reach_or_explain(net, on2, net.node_ip(NODE, version), cidr, version)


def test_north_gateway_sends_a_pods_egress_to_that_next_hop(net: Net) -> None:
    # node2's join address as the next hop of a pod on node1: its egress leaves through node2
    pod = net.create(
        "north-1", node=NODE, annotations={NORTH_GATEWAY_ANNOTATION: net.node_ip(NODE2)}
    )
    with _outside_world(net):
        net.reaches(pod.netns, OUTSIDE[4])
        assert net.dp.tcp_request(pod.netns, OUTSIDE[4], PORT) == NODE2.encode()
