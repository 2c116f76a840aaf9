"""The CNI stand-in on its own: wiring is idempotent, unwiring a pod never wired is a no-op, a
port that never binds is a clear error within its deadline, and nothing is left behind."""

from __future__ import annotations

import copy

import pytest

from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.ovn.cni import CniWiring, netns_exists
from tests.dataplane.helpers import Net


def test_wiring_twice_changes_nothing_and_unwire_removes_everything(net: Net) -> None:
    probe = net.create("idem-probe")
    pod = net.create("idem-a")
    before = net.cni.interfaces()
    net.cni.wire(pod.obj)  # as the kubelet may after a restart
    assert net.cni.interfaces() == before
    addrs = net.dp.exec_in(
        pod.netns, ["ip", "-o", "addr", "show", "dev", "eth0", "scope", "global"]
    )
    assert len(addrs.splitlines()) == 2, addrs  # one per family, not doubled
    net.reaches(probe.netns, pod.ip())

    host = net.cni.wired_ports()["idem-a.default"]
    net.cni.unwire(pod.obj)
    assert not netns_exists(pod.netns)
    assert host not in net.cni.interfaces()
    net.cni.unwire(pod.obj)  # again: nothing to do
    net.silent(probe.netns, pod.ip())
    net.cni.wire(pod.obj)  # and back
    net.reaches(probe.netns, pod.ip())


def test_a_port_that_never_binds_is_a_clear_error(net: Net) -> None:
    pod = net.create("nobind-a")
    ghost = copy.deepcopy(pod.obj)
    ghost["metadata"]["uid"] = "ghost-uid"
    ghost["metadata"]["name"] = "ghost"  # no such logical switch port in the NB
    quick = CniWiring(net.dp, bind_timeout=1.0)
    with pytest.raises(WiringError, match=r"port ghost.default .* not bound after 1.0s"):
        quick.wire(ghost)
    quick.unwire(ghost)
    assert not netns_exists(quick.pod_netns(ghost))


def test_a_pod_not_allocated_yet_is_refused_without_side_effects(net: Net) -> None:
    pod = {"metadata": {"name": "raw", "namespace": "default", "uid": "raw-uid"}, "spec": {}}
    with pytest.raises(WiringError, match="not allocated yet"):
        net.cni.wire(pod)
    assert not netns_exists(net.cni.pod_netns(pod))
