"""Packets against the controller's port security and security groups: with port security a
spoofed source address is dropped (without it, it is not); a pod in a security group gets the
deny-all behaviour (nothing reaches it, it reaches nothing: ICMP and TCP), and leaving the
group gives its connectivity back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from controller.core.constants import PORT_SECURITY_ANNOTATION, SECURITY_GROUP_ANNOTATION_TEMPLATE
from controller.sandbox.processes import stop_process
from tests.dataplane.helpers import Net, WiredPod

SECURITY_GROUPS = SECURITY_GROUP_ANNOTATION_TEMPLATE.format(provider="ovn")
PORT = 8080


def _spoof(net: Net, pod: WiredPod, *addresses: str) -> None:
    """Give `pod`'s eth0 addresses the controller did not give it."""
    for addr in addresses:
        plen = 128 if ":" in addr else 16
        net.dp.exec_in(pod.netns, ["ip", "addr", "add", f"{addr}/{plen}", "dev", "eth0", "nodad"])


def test_port_security_drops_a_spoofed_source_and_no_port_security_does_not(net: Net) -> None:
    target = net.create("ps-target")
    on = net.create("ps-on", annotations={PORT_SECURITY_ANNOTATION: "true"})
    off = net.create("ps-off")
    _spoof(net, on, "10.16.0.201", "fd00:10:16::201")
    _spoof(net, off, "10.16.0.202", "fd00:10:16::202")
    for version in (4, 6):
        # positive controls: both reach the target from the address they were given
        net.reaches(on.netns, target.ip(version), source=on.ip(version))
        net.reaches(off.netns, target.ip(version), source=off.ip(version))
    # without port security the spoofed source goes through (and the reply comes back) ...
    net.reaches(off.netns, target.ip(), source="10.16.0.202")
    net.reaches(off.netns, target.ip(6), source="fd00:10:16::202")
    # ... with it, the port drops it
    net.silent(on.netns, target.ip(), source="10.16.0.201")
    net.silent(on.netns, target.ip(6), source="fd00:10:16::201")


@contextlib.contextmanager
def _listening(net: Net, *pods: WiredPod) -> Iterator[None]:
    procs = [net.dp.tcp_listen(p.netns, "0.0.0.0", PORT) for p in pods]
    try:
        yield
    finally:
        for proc in procs:
            stop_process(proc)


def test_security_group_pod_gets_deny_all_and_leaving_the_group_restores_it(net: Net) -> None:
    sg = net.create(
        "sg-a", annotations={PORT_SECURITY_ANNOTATION: "true", SECURITY_GROUPS: "sg-web"}
    )
    peer = net.create("sg-peer")
    other = net.create("sg-other")
    with _listening(net, sg, other):
        # positive controls: the peers reach each other (ICMP, TCP), the listeners listen
        net.reaches(peer.netns, other.ip())
        assert net.dp.tcp_connect(peer.netns, other.ip(), PORT)
        assert net.dp.tcp_connect(sg.netns, "127.0.0.1", PORT)
        for version in (4, 6):
            net.silent(peer.netns, sg.ip(version))
            net.silent(sg.netns, peer.ip(version))
            net.silent(sg.netns, sg.gateway(version))
        assert not net.dp.tcp_connect(peer.netns, sg.ip(), PORT)
        assert not net.dp.tcp_connect(sg.netns, other.ip(), PORT)

        # out of the group: the controller's security handler takes the port out of deny-all
        net.cluster.server.store.patch(
            "pods",
            "default",
            "sg-a",
            {"metadata": {"annotations": {SECURITY_GROUPS: None}}},
        )
        net.reaches(peer.netns, sg.ip())
        net.reaches(sg.netns, peer.ip(6))
        assert net.dp.tcp_connect(peer.netns, sg.ip(), PORT)


def test_turning_port_security_on_and_off_on_a_running_pod(net: Net) -> None:
    target = net.create("pst-target")
    pod = net.create("pst-a")
    _spoof(net, pod, "10.16.0.203")
    net.reaches(pod.netns, target.ip(), source="10.16.0.203")  # off: the spoof goes through

    def set_port_security(value: str | None) -> None:
        net.cluster.server.store.patch(
            "pods",
            "default",
            "pst-a",
            {"metadata": {"annotations": {PORT_SECURITY_ANNOTATION: value}}},
        )

    set_port_security("true")
    net.goes_silent(pod.netns, target.ip(), source="10.16.0.203")
    net.reaches(pod.netns, target.ip(), source=pod.ip())  # its own address still works
    set_port_security(None)
    net.reaches(pod.netns, target.ip(), source="10.16.0.203")
