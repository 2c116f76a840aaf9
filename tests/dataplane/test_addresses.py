"""Packets to the addresses the controller hands out: a static address and an ip_pool entry
answer where they were asked for; a StatefulSet pod re-created keeps its address and answers
again; a deleted pod's address goes silent and answers again once a new pod is given it."""

from __future__ import annotations

from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from tests.dataplane.helpers import Net
from tests.e2e.workloads import no_lsp, statefulset


def test_static_address_pod_answers_at_its_address(net: Net) -> None:
    probe = net.create("static-probe")
    s = net.create("static-a", annotations={IP_ADDRESS_ANNOTATION: "10.16.0.50,fd00:10:16::50"})
    assert (s.ip(4), s.ip(6)) == ("10.16.0.50", "fd00:10:16::50")
    net.reaches(probe.netns, "10.16.0.50")
    net.reaches(probe.netns, "fd00:10:16::50")
    net.silent(probe.netns, "10.16.0.51")


def test_ip_pool_pod_answers_at_its_pool_address(net: Net) -> None:
    net.subnet("pools", "10.21.0.0/24")
    on_pools = {LOGICAL_SWITCH_ANNOTATION: "pools"}
    probe = net.create("pool-probe", annotations=on_pools)
    p = net.create("pool-a", annotations={**on_pools, IP_POOL_ANNOTATION: "10.21.0.60,10.21.0.61"})
    assert p.ip() == "10.21.0.60"
    net.reaches(probe.netns, "10.21.0.60")
    net.silent(probe.netns, "10.21.0.61")  # the pool's other entry is nobody's


def test_statefulset_pod_recreated_keeps_its_address_and_answers_again(net: Net) -> None:
    owner = statefulset(net.cluster, "web", 1)
    probe = net.create("sts-probe")
    first = net.create("web-0", owner=owner)
    for version in (4, 6):
        net.reaches(probe.netns, first.ip(version))
    net.delete(first)
    net.goes_silent(probe.netns, first.ip())
    second = net.create("web-0", owner=owner)
    assert second.obj["metadata"]["uid"] != first.obj["metadata"]["uid"]
    assert (second.ip(4), second.ip(6)) == (first.ip(4), first.ip(6))
    for version in (4, 6):
        net.reaches(probe.netns, second.ip(version))
        net.reaches(second.netns, probe.ip(version))
    net.delete(second)


def test_deleted_pods_address_goes_silent_and_answers_for_its_next_owner(net: Net) -> None:
    address = {IP_ADDRESS_ANNOTATION: "10.16.0.70,fd00:10:16::70"}
    probe = net.create("reuse-probe")
    old = net.create("reuse-old", annotations=address)
    net.reaches(probe.netns, "10.16.0.70")
    net.delete(old)
    net.goes_silent(probe.netns, "10.16.0.70")
    net.goes_silent(probe.netns, "fd00:10:16::70")
    no_lsp(net.cluster, "reuse-old.default")

    new = net.create("reuse-new", annotations=address)
    assert new.ip() == "10.16.0.70"
    # through the router first: its ARP resolution comes from the NB, not from a cache
    net.reaches(net.node_netns["node1"], "10.16.0.70")
    net.flush_neighbours(probe.netns)
    net.reaches(probe.netns, "10.16.0.70")
    net.reaches(probe.netns, "fd00:10:16::70")
    net.reaches(new.netns, probe.ip())
