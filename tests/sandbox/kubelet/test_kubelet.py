"""The sandbox kubelet against the API server emulator: nodes, pod start-up, graceful deletion,
bad input. Time moves only through the FakeClock; every other wait has a deadline."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import NOT_READY_TAINT, SandboxKubelet, SimNode
from controller.testing.clock import FakeClock
from tests.sandbox.kubelet.conftest import NODES
from tests.sandbox.kubelet.helpers import (
    NS,
    RecordingWiring,
    allocation,
    annotate,
    events,
    gone,
    pod,
    running,
    stepping,
    synced,
    wait_for_events,
)


def test_nodes_registered_ready_with_address_and_capacity(
    server: ApiServer, kubelet: SandboxKubelet
) -> None:
    for sim in NODES:
        node = server.store.get("nodes", None, sim.name)
        status = node["status"]
        assert {"type": "InternalIP", "address": sim.internal_ip} in status["addresses"]
        ready = [c for c in status["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert status["capacity"]["cpu"] == (sim.cpu or str(os.cpu_count()))
        assert status["allocatable"]["pods"] == status["capacity"]["pods"] == sim.pods
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == sim.name


def test_existing_node_is_updated_and_untainted(server: ApiServer) -> None:
    server.store.create(
        "nodes",
        {
            "metadata": {"name": "node-a"},
            "spec": {
                "taints": [
                    {"key": NOT_READY_TAINT, "effect": "NoSchedule"},
                    {"key": "keep", "effect": "NoSchedule"},
                ]
            },
        },
    )
    api = server.api_client()
    with SandboxKubelet(api, [SimNode("node-a", "172.18.0.9")], clock=FakeClock()):
        node = server.store.get("nodes", None, "node-a")
    api.close()
    assert [t["key"] for t in node["spec"]["taints"]] == ["keep"]
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "172.18.0.9"}


def test_pod_runs_once_allocated_and_routed(
    server: ApiServer, kubelet: SandboxKubelet, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("web"))
    assert synced(server, kubelet, "web")["status"]["phase"] == "Pending"
    annotate(server, "web", allocation(routed=False))
    # allocated but not routed: kube-ovn's CNI still refuses the default interface
    assert synced(server, kubelet, "web")["status"]["phase"] == "Pending"
    assert wiring.wired == []
    annotate(server, "web", {"ovn.kubernetes.io/routed": "true"})
    status = running(server, "web")["status"]
    assert status["podIP"] == "10.16.0.5"
    assert status["podIPs"] == [{"ip": "10.16.0.5"}]
    assert status["hostIP"] == "172.18.0.2"
    assert status["hostIPs"] == [{"ip": "172.18.0.2"}]
    assert status["startTime"]
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == ready["ContainersReady"] == "True"
    assert [c["name"] for c in status["containerStatuses"]] == ["app", "side"]
    assert all(c["ready"] and "running" in c["state"] for c in status["containerStatuses"])
    assert wiring.wired == ["web"]


def test_dual_stack_pod_ips(server: ApiServer, kubelet: SandboxKubelet) -> None:
    server.store.create(
        "pods",
        pod(
            "dual", "node-b", annotations=allocation("10.16.0.7,fd00::7", "10.16.0.0/16,fd00::/120")
        ),
    )
    status = running(server, "dual")["status"]
    assert status["podIPs"] == [{"ip": "10.16.0.7"}, {"ip": "fd00::7"}]
    assert status["hostIP"] == "172.18.0.3"


def test_never_allocated_stays_pending(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("idle"))
    synced(server, kubelet, "idle")
    clock.step(3600)
    current = synced(server, kubelet, "idle")
    assert current["status"]["phase"] == "Pending"
    assert "podIP" not in current["status"]
    assert wiring.wired == []


def test_pods_of_other_nodes_and_unscheduled_pods_are_left_alone(
    server: ApiServer, kubelet: SandboxKubelet
) -> None:
    server.store.create("pods", pod("elsewhere", "node-z", annotations=allocation()))
    server.store.create("pods", pod("unscheduled", "", annotations=allocation()))
    for name in ("elsewhere", "unscheduled"):
        assert synced(server, kubelet, name)["status"]["phase"] == "Pending"


def test_host_network_pod_runs_with_the_node_address(
    server: ApiServer, kubelet: SandboxKubelet, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("host", hostNetwork=True))
    status = running(server, "host")["status"]
    assert status["podIP"] == status["hostIP"] == "172.18.0.2"
    assert wiring.wired == []


@pytest.mark.parametrize("sigterm_exit", [None])  # containers that ignore SIGTERM
def test_graceful_delete_finished_after_the_grace_period(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("term", grace=30, annotations=allocation()))
    uid = running(server, "term")["metadata"]["uid"]
    server.store.delete("pods", NS, "term")
    terminating = synced(server, kubelet, "term")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    clock.step(29)
    assert synced(server, kubelet, "term")["metadata"]["uid"] == uid
    assert wiring.unwired == []  # networked until its containers are killed
    clock.step(1)
    gone(server, "term")
    deletes = [r for r in server.request_log if r.verb == "delete" and r.resource == "pods"]
    assert len(deletes) == 1
    assert wiring.unwired == ["term"]


@pytest.mark.parametrize("sigterm_exit", [None])
def test_shorter_second_delete_wins(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock
) -> None:
    server.store.create("pods", pod("short", grace=300, annotations=allocation()))
    running(server, "short")
    server.store.delete("pods", NS, "short")
    synced(server, kubelet, "short")
    server.store.delete("pods", NS, "short", grace_period_seconds=5)
    assert synced(server, kubelet, "short")["metadata"]["deletionGracePeriodSeconds"] == 5
    clock.step(5)
    gone(server, "short")


@pytest.mark.parametrize("sigterm_exit", [None])
def test_recreated_pod_is_not_deleted_by_the_old_ones_final_delete(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock
) -> None:
    server.store.create("pods", pod("sts-0", grace=10, annotations=allocation()))
    running(server, "sts-0")
    server.store.delete("pods", NS, "sts-0")
    synced(server, kubelet, "sts-0")
    # the old incarnation goes (force delete), a new one with the same name comes
    server.store.delete("pods", NS, "sts-0", grace_period_seconds=0)
    new_uid = server.store.create("pods", pod("sts-0", grace=10, annotations=allocation()))[
        "metadata"
    ]["uid"]
    clock.step(10)
    assert running(server, "sts-0")["metadata"]["uid"] == new_uid
    assert synced(server, kubelet, "sts-0")["metadata"].get("deletionTimestamp") is None


def test_immediately_deleted_pod_is_unwired(
    server: ApiServer, kubelet: SandboxKubelet, wiring: RecordingWiring
) -> None:
    server.store.create("pods", pod("quick", annotations=allocation()))
    running(server, "quick")
    server.store.delete("pods", NS, "quick", grace_period_seconds=0)
    gone(server, "quick")
    assert kubelet.wait_synced(NS, "quick", "")
    assert wiring.unwired == ["quick"]


def test_wiring_failure_is_reported_and_retried(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock, wiring: RecordingWiring
) -> None:
    wiring.fail = "port never bound"
    server.store.create("pods", pod("flaky", annotations=allocation()))
    synced(server, kubelet, "flaky")
    [event] = events(server, "flaky", "FailedCreatePodSandBox")
    assert event["type"] == "Warning" and "port never bound" in event["message"]
    assert server.store.get("pods", NS, "flaky")["status"]["phase"] == "Pending"
    clock.step(0.5)  # a retry fails with a new sandbox: its own Event
    wait_for_events(server, "flaky", "FailedCreatePodSandBox", 2)
    wiring.fail = None
    stepping(clock, lambda: server.store.get("pods", NS, "flaky")["status"]["phase"] == "Running")


@pytest.mark.parametrize(
    "bad",
    [
        {"ovn.kubernetes.io/ip_address": "not-an-ip"},
        {"ovn.kubernetes.io/ip_address": "10.99.0.5"},  # outside its cidr
        {"ovn.kubernetes.io/mac_address": "zz:zz"},
        {"ovn.kubernetes.io/ip_address": ""},
        {"k8s.v1.cni.cncf.io/networks": "a/b/c"},
    ],
)
def test_garbage_annotations_give_an_event_and_no_crash(
    server: ApiServer, kubelet: SandboxKubelet, bad: dict[str, str]
) -> None:
    server.store.create("pods", pod("garbage", annotations={**allocation(), **bad}))
    synced(server, kubelet, "garbage")
    [event] = events(server, "garbage", "FailedCreatePodSandBox")
    assert event["source"]["component"] == "kubelet"
    assert server.store.get("pods", NS, "garbage")["status"]["phase"] == "Pending"
    # the threads are alive: the next pod starts
    server.store.create("pods", pod("fine", annotations=allocation("10.16.0.9")))
    running(server, "fine")
    # and fixing the annotations starts the pod
    annotate(server, "garbage", {**allocation("10.16.0.10"), "k8s.v1.cni.cncf.io/networks": None})
    running(server, "garbage")


def _nad(server: ApiServer, name: str, config: dict[str, Any]) -> None:
    import json

    server.store.create(
        "network-attachment-definitions",
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"config": json.dumps(config)},
        },
    )


def test_attachment_networks_are_waited_for(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock
) -> None:
    ovn = f"att.{NS}.ovn"
    ipam = f"mac.{NS}"
    _nad(server, "att", {"cniVersion": "0.3.1", "type": "kube-ovn", "provider": ovn})
    _nad(
        server,
        "mac",
        {"cniVersion": "0.3.1", "type": "macvlan", "ipam": {"type": "kube-ovn", "provider": ipam}},
    )
    _nad(server, "other", {"cniVersion": "0.3.1", "type": "bridge", "ipam": {"type": "host-local"}})
    server.store.create(
        "pods",
        pod(
            "multi", annotations={**allocation(), "k8s.v1.cni.cncf.io/networks": "att, mac, other"}
        ),
    )
    assert synced(server, kubelet, "multi")["status"]["phase"] == "Pending"
    annotate(server, "multi", allocation("172.30.0.2", "172.30.0.0/24", provider=ovn, routed=False))
    assert synced(server, kubelet, "multi")["status"]["phase"] == "Pending"
    annotate(
        server, "multi", allocation("172.31.0.2", "172.31.0.0/24", provider=ipam, routed=False)
    )
    # net1/net2 carry no default route, so they need no `routed`; `other` is not kube-ovn's
    status = running(server, "multi")["status"]
    assert status["podIP"] == "10.16.0.5"


def test_missing_nad_is_retried_until_it_exists(
    server: ApiServer, kubelet: SandboxKubelet, clock: FakeClock
) -> None:
    server.store.create(
        "pods", pod("late", annotations={**allocation(), "k8s.v1.cni.cncf.io/networks": "late-net"})
    )
    synced(server, kubelet, "late")
    assert "not found" in events(server, "late", "FailedCreatePodSandBox")[0]["message"]
    _nad(server, "late-net", {"type": "kube-ovn", "provider": f"late-net.{NS}.ovn"})
    annotate(
        server,
        "late",
        allocation("172.30.0.3", "172.30.0.0/24", provider=f"late-net.{NS}.ovn", routed=False),
    )
    clock.step(10)
    running(server, "late")


def test_multus_default_network_needs_its_provider_routed(
    server: ApiServer, kubelet: SandboxKubelet
) -> None:
    prov = f"def.{NS}.ovn"
    _nad(server, "def", {"type": "kube-ovn", "provider": prov})
    server.store.create(
        "pods",
        pod(
            "mdef",
            annotations={
                "v1.multus-cni.io/default-network": "def",
                **allocation("172.33.0.4", "172.33.0.0/24", provider=prov, routed=False),
            },
        ),
    )
    assert synced(server, kubelet, "mdef")["status"]["phase"] == "Pending"
    annotate(server, "mdef", {f"{prov}.kubernetes.io/routed": "true"})
    assert running(server, "mdef")["status"]["podIP"] == "172.33.0.4"


def test_restart_of_the_api_server_is_survived(server: ApiServer, kubelet: SandboxKubelet) -> None:
    server.store.create("pods", pod("before", annotations=allocation()))
    running(server, "before")
    server.stop()
    server.start()
    server.store.create("pods", pod("after", annotations=allocation("10.16.0.11")))
    running(server, "after", timeout=20)


def test_stop_ends_every_thread(server: ApiServer) -> None:
    before = set(threading.enumerate())
    api = server.api_client()
    kl = SandboxKubelet(api, NODES, clock=FakeClock()).start()
    kl.stop()
    api.close()
    # the emulator's own per-connection threads end with their connection; not ours to join
    left = [
        t.name
        for t in set(threading.enumerate()) - before
        if t.is_alive() and "process_request" not in t.name
    ]
    assert left == []
