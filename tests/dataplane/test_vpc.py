"""Packets in custom VPCs: two tenants' VPCs with the same CIDR; pods of one tenant reach each
other and their own router, never the other tenant's pod at the same address, nor the default
VPC's pods or the nodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from controller.core.constants import LOGICAL_SWITCH_ANNOTATION
from controller.sandbox.processes import stop_process
from tests.dataplane.helpers import Net, WiredPod
from tests.e2e.helpers import wait_for

CIDR = "10.60.0.0/24"
PORT = 9000


def _tenant(net: Net, name: str) -> str:
    store = net.cluster.server.store
    store.create("vpcs", {"metadata": {"name": name}, "spec": {}, "status": {"router": name}})
    subnet = f"{name}-net"
    store.create(
        "subnets", {"metadata": {"name": subnet}, "spec": {"cidrBlock": CIDR, "vpc": name}}
    )
    assert net.ctl is not None
    wait_for(lambda: net.ctl is not None and net.ctl.ipam.has_subnet(subnet), message=subnet)
    return subnet


@contextlib.contextmanager
def _named(net: Net, *pods: WiredPod) -> Iterator[None]:
    procs = [net.dp.tcp_listen(p.netns, "0.0.0.0", PORT, reply=p.name.encode()) for p in pods]
    try:
        yield
    finally:
        for proc in procs:
            stop_process(proc)


def test_tenants_with_one_cidr_are_isolated_from_each_other_and_the_default_vpc(net: Net) -> None:
    red = {LOGICAL_SWITCH_ANNOTATION: _tenant(net, "red")}
    blue = {LOGICAL_SWITCH_ANNOTATION: _tenant(net, "blue")}
    red1 = net.create("red-1", annotations=red)
    red2 = net.create("red-2", annotations=red)
    blue1 = net.create("blue-1", annotations=blue)
    default = net.create("vpc-default")
    assert red1.eth0.addresses[0].endswith("/24") and red1.ip().startswith("10.60.0.")
    with _named(net, red1, red2, blue1):
        net.reaches(red1.netns, red2.ip())
        net.reaches(red1.netns, "10.60.0.1")  # red's own router
        net.reaches(blue1.netns, "10.60.0.1")  # blue's, at the same address
        assert net.dp.tcp_request(red1.netns, red2.ip(), PORT) == b"red-2"
        # blue-1 may hold red-1's or red-2's very address: what answers there is blue's own
        for addr in (red1.ip(), red2.ip()):
            answer = net.dp.tcp_request(blue1.netns, addr, PORT)
            assert answer in (None, b"blue-1"), f"blue-1 reached {answer!r} at {addr}"
        # no way out of the VPC: neither the default VPC's pods nor the nodes
        net.silent(red1.netns, default.ip())
        net.silent(default.netns, red1.ip())
        net.silent(red1.netns, net.node_ip())
