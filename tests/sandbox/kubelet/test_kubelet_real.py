"""The sandbox kubelet against the real control plane: the node is schedulable, a pod bound by
kube-scheduler runs once allocated, a graceful delete is finished, garbage gets an Event."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller.sandbox.apiserver.remotestore import RemoteStore
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode
from tests.sandbox.kubelet.helpers import allocation

pytestmark = pytest.mark.realcp

NS = "kubelet-real"
NODE = SimNode("kubelet-real-node", "172.19.0.9")


@pytest.fixture(scope="module")
def bed(real_control_plane: Any) -> Iterator[tuple[RemoteStore, SandboxKubelet]]:
    admin = real_control_plane.api_client()
    store = RemoteStore(admin, immediate_pod_delete=False)
    store.create("namespaces", {"metadata": {"name": NS}})
    kubelet_api = real_control_plane.api_client()
    kubelet = SandboxKubelet(kubelet_api, [NODE]).start()
    try:
        yield store, kubelet
    finally:
        kubelet.stop()
        store.delete("namespaces", None, NS)
        store.delete("nodes", None, NODE.name)
        kubelet_api.close()
        admin.close()


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "terminationGracePeriodSeconds": 1,
            # only our node: other tests' nodes may exist on the shared plane
            "nodeSelector": {"kubernetes.io/hostname": NODE.name},
            **spec,
        },
    }


def test_scheduled_pod_runs_and_graceful_delete_finishes(
    bed: tuple[RemoteStore, SandboxKubelet],
) -> None:
    store, _ = bed
    node = store.get("nodes", None, NODE.name)
    assert not [t for t in node["spec"].get("taints") or [] if "not-ready" in t["key"]]
    store.create("pods", _pod("sched"))
    bound = store.wait_for("pods", NS, "sched", lambda p: bool(p and p["spec"].get("nodeName")))
    assert bound is not None and bound["spec"]["nodeName"] == NODE.name
    assert bound["status"]["phase"] == "Pending"
    store.patch("pods", NS, "sched", {"metadata": {"annotations": allocation("10.16.3.4")}})
    up = store.wait_for(
        "pods", NS, "sched", lambda p: bool(p and p["status"]["phase"] == "Running")
    )
    assert up is not None
    assert up["status"]["podIP"] == "10.16.3.4" and up["status"]["hostIP"] == NODE.internal_ip
    # the real API server takes the status fields a real kubelet writes, and keeps PodScheduled
    assert {"PodScheduled", "Ready"} <= {c["type"] for c in up["status"]["conditions"]}
    assert up["status"]["qosClass"] == "BestEffort"
    assert up["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    lease = store.get("leases", "kube-node-lease", NODE.name)
    assert lease["spec"]["holderIdentity"] == NODE.name
    _, gone = store.delete("pods", NS, "sched")
    assert not gone  # terminating: the kubelet finishes it after the 1 s grace period
    store.wait_for("pods", NS, "sched", lambda p: p is None)


def test_garbage_annotations_give_a_warning_event(
    bed: tuple[RemoteStore, SandboxKubelet],
) -> None:
    store, _ = bed
    bad = {**allocation(), "ovn.kubernetes.io/mac_address": "not-a-mac"}
    created = store.create("pods", _pod("garbage", nodeName=NODE.name))
    store.patch("pods", NS, "garbage", {"metadata": {"annotations": bad}})

    def event() -> bool:
        return any(
            e["involvedObject"]["name"] == "garbage" and e["reason"] == "FailedCreatePodSandBox"
            for e in store.list("events", NS)
        )

    store.wait_for("pods", NS, "garbage", lambda _: event())
    assert store.get("pods", NS, "garbage")["status"]["phase"] == "Pending"
    assert created["metadata"]["uid"]
    store.finalize_delete("pods", NS, "garbage")
