"""Packets against SecurityGroup rules: what the controller's ACLs let through on a real OVN data
plane (ICMP and TCP, IPv4 and IPv6).

Each test puts a pod into security groups (port security on, the groups named in its
annotation), creates the SecurityGroup objects, waits until their status says they were applied,
and sends packets from pods outside the groups (no port security, so no ACL of their own). Every
"silent" check sits next to a positive control that proves the path works, and a change that
should stop traffic is polled with a deadline (`goes_silent`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    PORT_SECURITY_ANNOTATION,
    SECURITY_GROUP_ANNOTATION_TEMPLATE,
)
from controller.core.security_group import rules_md5
from controller.sandbox.processes import stop_process
from tests.dataplane.helpers import Net, WiredPod
from tests.e2e.helpers import get_or_none, rewrite, wait_for

SECURITY_GROUPS = SECURITY_GROUP_ANNOTATION_TEMPLATE.format(provider="ovn")


def rule(priority: int, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ipVersion": "ipv4",
        "protocol": "all",
        "priority": priority,
        "remoteType": "address",
        "policy": "allow",
    }
    return {**base, **kw}


def apply_sg(net: Net, name: str, **spec: Any) -> None:
    """Create or replace the SecurityGroup `name`; return once its status reports this spec."""
    server = net.cluster.server
    if get_or_none(server, "security-groups", None, name) is None:
        server.store.create("security-groups", {"metadata": {"name": name}, "spec": spec})
    else:  # the controller writes the group's status too: a plain read-then-update may 409
        rewrite(server, "security-groups", None, name, lambda sg: sg.update(spec=spec))

    def applied() -> bool:
        obj = get_or_none(net.cluster.server, "security-groups", None, name) or {}
        st = obj.get("status") or {}
        return (
            st.get("ingressMd5") == rules_md5(spec.get("ingressRules"))
            and st.get("egressMd5") == rules_md5(spec.get("egressRules"))
            and st.get("allowSameGroupTraffic") is bool(spec.get("allowSameGroupTraffic"))
            and st.get("ingressLastSyncSuccess") is True
            and st.get("egressLastSyncSuccess") is True
        )

    wait_for(applied, message=f"security group {name} applied")


def secured(net: Net, name: str, groups: str) -> WiredPod:
    return net.create(name, annotations={PORT_SECURITY_ANNOTATION: "true", SECURITY_GROUPS: groups})


def at(net: Net, name: str, v4: str, v6: str) -> WiredPod:
    """A pod outside every group, at static addresses."""
    return net.create(name, annotations={IP_ADDRESS_ANNOTATION: f"{v4},{v6}"})


def set_groups(net: Net, pod: WiredPod, groups: str) -> None:
    net.cluster.server.store.patch(
        "pods", pod.namespace, pod.name, {"metadata": {"annotations": {SECURITY_GROUPS: groups}}}
    )


@contextlib.contextmanager
def listening(net: Net, pod: WiredPod, *ports: int) -> Iterator[None]:
    procs = [net.dp.tcp_listen(pod.netns, "0.0.0.0", p) for p in ports]
    try:
        for p in ports:
            assert net.dp.tcp_connect(pod.netns, "127.0.0.1", p)  # the listener itself works
        yield
    finally:
        for proc in procs:
            stop_process(proc)


def connects(net: Net, src: WiredPod, dst: WiredPod, port: int, timeout: float = 15.0) -> None:
    wait_for(
        lambda: net.dp.tcp_connect(src.netns, dst.ip(), port),
        timeout=timeout,
        message=f"{src.name} -> {dst.name}:{port}",
    )


def cleanup(net: Net, *pods: WiredPod) -> None:
    for p in pods:
        net.delete(p)


def test_ingress_icmp_from_one_cidr_only_and_a_rule_edit(net: Net) -> None:
    apply_sg(
        net,
        "sgp-icmp",
        ingressRules=[
            rule(10, protocol="icmp", remoteAddress="10.16.50.0/24"),
            rule(10, protocol="icmp", ipVersion="ipv6", remoteAddress="fd00:10:16::50:0/112"),
        ],
    )
    target = secured(net, "sgp-icmp-target", "sgp-icmp")
    inside = at(net, "sgp-icmp-in", "10.16.50.10", "fd00:10:16::50:10")
    outside = at(net, "sgp-icmp-out", "10.16.60.10", "fd00:10:16::60:10")
    net.reaches(inside.netns, target.ip())
    net.reaches(inside.netns, target.ip(6))
    net.silent(outside.netns, target.ip())
    net.silent(outside.netns, target.ip(6))
    net.reaches(outside.netns, inside.ip())  # positive control for the outside pod
    with listening(net, target, 8080):
        # only ICMP is allowed, from inside too
        assert not net.dp.tcp_connect(inside.netns, target.ip(), 8080)

    # the edit moves the allowed CIDR: the outside pod gets in, the inside one no longer
    apply_sg(
        net, "sgp-icmp", ingressRules=[rule(10, protocol="icmp", remoteAddress="10.16.60.0/24")]
    )
    net.reaches(outside.netns, target.ip())
    net.goes_silent(inside.netns, target.ip())
    cleanup(net, target, inside, outside)


def test_egress_drop_to_one_address(net: Net) -> None:
    apply_sg(
        net,
        "sgp-egress",
        egressRules=[
            rule(1, remoteAddress="10.16.51.20", policy="drop"),
            rule(100, remoteAddress="0.0.0.0/0"),
            rule(100, ipVersion="ipv6", remoteAddress="::/0"),
        ],
    )
    pod = secured(net, "sgp-egress-pod", "sgp-egress")
    allowed = at(net, "sgp-egress-ok", "10.16.51.10", "fd00:10:16::51:10")
    blocked = at(net, "sgp-egress-no", "10.16.51.20", "fd00:10:16::51:20")
    # outgoing is allowed and its replies come back (allow-related); nothing comes in unasked
    net.reaches(pod.netns, allowed.ip())
    net.reaches(pod.netns, allowed.ip(6))
    net.reaches(pod.netns, blocked.ip(6))  # the drop names the v4 address only
    net.silent(pod.netns, blocked.ip())
    net.silent(allowed.netns, pod.ip())
    net.reaches(blocked.netns, allowed.ip())  # positive control for the blocked address
    cleanup(net, pod, allowed, blocked)


def test_tcp_on_one_port_range_only(net: Net) -> None:
    apply_sg(
        net,
        "sgp-tcp",
        ingressRules=[
            rule(5, protocol="tcp", remoteAddress="0.0.0.0/0", portRangeMin=8080, portRangeMax=8081)
        ],
    )
    server = secured(net, "sgp-tcp-server", "sgp-tcp")
    client = at(net, "sgp-tcp-client", "10.16.52.10", "fd00:10:16::52:10")
    with listening(net, server, 8080, 8081, 9090):
        connects(net, client, server, 8080)
        connects(net, client, server, 8081)
        assert not net.dp.tcp_connect(client.netns, server.ip(), 9090)
        net.silent(client.netns, server.ip())  # no ICMP rule
    cleanup(net, server, client)


def test_allow_same_group_traffic_on_and_off(net: Net) -> None:
    apply_sg(net, "sgp-same", allowSameGroupTraffic=True)
    a = secured(net, "sgp-same-a", "sgp-same")
    b = secured(net, "sgp-same-b", "sgp-same")
    outsider = at(net, "sgp-same-x", "10.16.53.10", "fd00:10:16::53:10")
    net.reaches(a.netns, b.ip())
    net.reaches(b.netns, a.ip(6))
    net.silent(outsider.netns, a.ip())
    net.reaches(outsider.netns, "10.16.0.1")  # positive control: the outsider's gateway
    apply_sg(net, "sgp-same", allowSameGroupTraffic=False)
    net.goes_silent(a.netns, b.ip())
    net.silent(b.netns, a.ip(6))
    apply_sg(net, "sgp-same", allowSameGroupTraffic=True)
    net.reaches(a.netns, b.ip())
    cleanup(net, a, b, outsider)


def test_leaving_a_group_keeps_what_the_other_groups_allow(net: Net) -> None:
    apply_sg(
        net, "sgp-from-a", ingressRules=[rule(10, protocol="icmp", remoteAddress="10.16.54.10")]
    )
    apply_sg(
        net, "sgp-from-b", ingressRules=[rule(10, protocol="icmp", remoteAddress="10.16.54.20")]
    )
    pod = secured(net, "sgp-two", "sgp-from-a,sgp-from-b")
    a = at(net, "sgp-two-a", "10.16.54.10", "fd00:10:16::54:10")
    b = at(net, "sgp-two-b", "10.16.54.20", "fd00:10:16::54:20")
    c = at(net, "sgp-two-c", "10.16.54.30", "fd00:10:16::54:30")
    net.reaches(a.netns, pod.ip())
    net.reaches(b.netns, pod.ip())  # every group a pod names counts, not only the first
    net.silent(c.netns, pod.ip())
    set_groups(net, pod, "sgp-from-b")
    net.goes_silent(a.netns, pod.ip())
    net.reaches(b.netns, pod.ip())
    net.reaches(a.netns, b.ip())  # positive control for a
    # out of every group: no deny-all any more, everything gets through
    set_groups(net, pod, "")
    net.reaches(c.netns, pod.ip())
    net.reaches(a.netns, pod.ip())
    cleanup(net, pod, a, b, c)


def test_remote_security_group_rule(net: Net) -> None:
    apply_sg(net, "sgp-clients")
    apply_sg(
        net,
        "sgp-db",
        ingressRules=[
            rule(
                1,
                protocol="tcp",
                remoteType="securityGroup",
                remoteSecurityGroup="sgp-clients",
                portRangeMin=5432,
                portRangeMax=5432,
            )
        ],
    )
    # the client group lets its pods out (and replies back in)
    apply_sg(net, "sgp-clients", egressRules=[rule(1, remoteAddress="0.0.0.0/0")])
    db = secured(net, "sgp-db-pod", "sgp-db")
    member = secured(net, "sgp-client-1", "sgp-clients")
    stranger = at(net, "sgp-client-x", "10.16.55.10", "fd00:10:16::55:10")
    with listening(net, db, 5432):
        connects(net, member, db, 5432)
        assert not net.dp.tcp_connect(stranger.netns, db.ip(), 5432)
        net.reaches(stranger.netns, "10.16.0.1")  # positive control for the stranger
    cleanup(net, db, member, stranger)
