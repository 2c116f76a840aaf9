"""Packets on one logical switch (the dual-stack ovn-default): pods reach each other, their
gateway and their node's join address over IPv4 and IPv6; addresses no pod holds answer
nothing."""

from __future__ import annotations

import pytest

from tests.dataplane.helpers import Net


@pytest.mark.parametrize("version", [4, 6])
def test_pods_on_one_subnet_reach_each_other(net: Net, version: int) -> None:
    a = net.create(f"same-a{version}")
    b = net.create(f"same-b{version}")
    assert a.eth0.port == f"same-a{version}.default"
    assert len(a.eth0.addresses) == 2  # dual stack: both families on eth0
    assert net.reaches(a.netns, b.ip(version)) > 0
    assert net.reaches(b.netns, a.ip(version)) > 0
    # an address of the subnet that no pod holds answers nothing
    net.silent(a.netns, "10.16.255.254" if version == 4 else "fd00:10:16::ffff")


@pytest.mark.parametrize("version", [4, 6])
def test_pod_reaches_its_gateway_and_its_node(net: Net, version: int) -> None:
    a = net.create(f"gw-a{version}")
    net.reaches(a.netns, a.gateway(version))
    # the node's join address: the distributed-gateway (src-ip) route leads to the node port
    net.reaches(a.netns, net.node_ip(version=version))
    # and the node reaches the pod back (the join switch is routed to ovn-default)
    net.reaches(net.node_netns["node1"], a.ip(version))
    # the join subnet's own gateway answers, an unused join address does not
    net.reaches(a.netns, "100.64.0.1" if version == 4 else "fd00:100:64::1")
    net.silent(a.netns, "100.64.255.254" if version == 4 else "fd00:100:64::ffff")
