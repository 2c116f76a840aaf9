"""Packets through the controller's repairs: a pod whose logical switch port vanished from the NB
stops answering and answers again at the same address once the inspection re-created the port;
a pod deleted and at once re-created under the same name (another UID) keeps answering after the
old pod's delete has been handled."""

from __future__ import annotations

import subprocess

from controller.core.constants import IP_ADDRESS_ANNOTATION
from tests.dataplane.helpers import Net
from tests.e2e.workloads import quiet


def test_a_lost_port_is_recreated_and_the_pod_answers_again(net: Net) -> None:
    probe = net.create("lost-probe")
    pod = net.create("lost-a")
    net.reaches(probe.netns, pod.ip())
    subprocess.run(
        ["ovn-nbctl", f"--db={net.cluster.nb_server.remote}", "lsp-del", pod.eth0.port],
        check=True,
        capture_output=True,
    )
    net.goes_silent(probe.netns, pod.ip())
    # the inspection (every second here) re-adds the pod: same address, same MAC
    net.reaches(probe.netns, pod.ip(), timeout=30)
    net.reaches(probe.netns, pod.ip(6))
    ann = net.cluster.server.store.get("pods", "default", "lost-a")["metadata"]["annotations"]
    assert ann[IP_ADDRESS_ANNOTATION] == ",".join((pod.ip(4), pod.ip(6)))


def test_a_pod_recreated_under_its_name_survives_the_old_ones_delete(net: Net) -> None:
    assert net.ctl is not None
    probe = net.create("flip-probe")
    old = net.create("flip")
    net.reaches(probe.netns, old.ip())
    net.cluster.server.store.delete("pods", "default", "flip")
    new = net.create("flip")
    assert new.obj["metadata"]["uid"] != old.obj["metadata"]["uid"]
    quiet(net.ctl)
    net.reaches(probe.netns, new.ip())
    net.reaches(new.netns, probe.ip())
