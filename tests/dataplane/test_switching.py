"""Packets on one logical switch: pods of ovn-default reach each other, their gateway and their
node's join address; a pod that does not exist answers nothing."""

from __future__ import annotations

from tests.dataplane.helpers import Net


def test_pods_on_one_subnet_reach_each_other(net: Net) -> None:
    a = net.create("same-a")
    b = net.create("same-b")
    assert a.eth0.port == "same-a.default"
    assert net.reaches(a.netns, b.ip()) > 0
    assert net.reaches(b.netns, a.ip()) > 0
    # an address of the subnet that no pod holds answers nothing
    net.silent(a.netns, "10.16.255.254")


def test_pod_reaches_its_gateway_and_its_node(net: Net) -> None:
    a = net.create("gw-a")
    net.reaches(a.netns, a.gateway())
    net.reaches(a.netns, net.node_ip())
    # and the node reaches the pod back (the join subnet is routed to ovn-default)
    net.reaches(net.node_netns["node1"], a.ip())
    # the join subnet's own gateway answers, an unused join address does not
    net.reaches(a.netns, "100.64.0.1")
    net.silent(a.netns, "100.64.255.254")
