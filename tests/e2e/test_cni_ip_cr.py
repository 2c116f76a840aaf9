"""The seam of the IP CR between the controller and kube-ovn's CNI daemon, on both planes.

kube-ovn v1.8's controller allocates a pod before the scheduler binds it, so the IP CR it writes
has `spec.nodeName: ""`; the daemon's CNI ADD on the pod's node then writes the node (and the
subnet label, and empty attach lists) into the CR (pkg/daemon/handler.go `UpdateIPCr`, v1.8.18).
Here the daemon stand-in's own code (`CniDaemon.add`, reading and writing through the official
client) runs against the API with a wiring that only plans (the data plane is the dataplane
tier's), and the controller must keep what the daemon wrote: a restarted controller's start-up
(InitIPAM writes IP CRs back when they differ) and its audit leave the CR as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from controller.sandbox.ovn.cni_daemon import ApiObjects, CniDaemon, CniRequest
from controller.sandbox.ovn.cni_plan import NicPlan, plan_pod_nic
from controller.testing import builders
from tests.e2e.conftest import Cluster, RealServer, StartController
from tests.e2e.helpers import NODE, get_or_none, running, wait_for
from tests.e2e.workloads import allocated, routed, settled

pytestmark = pytest.mark.e2e

NS = "default"
SUBNET = "ovn-default"
NOBODY = "kop-nobody"  # a schedulerName no scheduler serves: the test binds the pod itself


class PlanOnlyWiring:
    """The daemon's wiring without a data plane: plans the interface from the annotations."""

    def wire_container(
        self, pod: Mapping[str, Any], netns: str, container_id: str, ifname: str, provider: str
    ) -> NicPlan:
        return plan_pod_nic(pod, provider, ifname)

    def unwire_container(self, container_id: str, ifname: str) -> None:
        return None

    def check_container(
        self, pod: Mapping[str, Any], netns: str, container_id: str, ifname: str, provider: str
    ) -> NicPlan:
        return plan_pod_nic(pod, provider, ifname)

    def set_subnets(self, subnets: list[Mapping[str, Any]]) -> None:
        return None

    def prepare_node(self, name: str) -> str:
        return ""

    def ensure_node(self, name: str) -> bool:
        return True


def bind(cluster: Cluster, name: str, node: str) -> None:
    """Bind the pod as a scheduler does: the Binding subresource on the real plane; on the
    emulator (which has none) the same patch its scheduler stand-in makes."""
    if isinstance(cluster.server, RealServer):
        api = cluster.server.api_client()
        try:
            body = k8s_client.V1Binding(
                metadata=k8s_client.V1ObjectMeta(name=name),
                target=k8s_client.V1ObjectReference(kind="Node", name=node),
            )
            core = k8s_client.CoreV1Api(api)
            core.create_namespaced_binding(NS, body, _preload_content=False)
        finally:
            api.close()
        return
    cluster.server.store.patch("pods", NS, name, {"spec": {"nodeName": node}})


def ip_cr(cluster: Cluster, name: str) -> dict[str, Any]:
    return wait_for(lambda: get_or_none(cluster.server, "ips", None, name), message=f"IP CR {name}")


def test_the_daemon_records_its_node_and_the_controller_keeps_it(
    cluster: Cluster, start_controller: StartController, tmp_path: Path
) -> None:
    first = running(start_controller(identity="controller-a"), "first controller started")
    store = cluster.server.store
    store.create("pods", builders.pod("late", NS, schedulerName=NOBODY))
    allocated(cluster, "late")
    before = ip_cr(cluster, f"late.{NS}")
    # allocated while unscheduled: the controller has no node to write
    assert before["spec"]["nodeName"] == ""
    bind(cluster, "late", NODE)
    ann = routed(cluster, "late")

    api = cluster.server.api_client()
    try:
        objects = ApiObjects(api)
        daemon = CniDaemon(
            PlanOnlyWiring(), objects, tmp_path / "cni.sock", NODE, ips=objects, poll=0.2
        )
        answer = daemon.add(CniRequest("late", NS, "c" * 64, "/var/run/netns/late"))
    finally:
        api.close()
    assert answer["address"] == ann["ovn.kubernetes.io/ip_address"]

    after = store.get("ips", None, f"late.{NS}")
    want = copy.deepcopy(before)
    want["metadata"]["labels"][SUBNET] = ""
    want["spec"].update(nodeName=NODE, attachIps=[], attachSubnets=[], attachMacs=[])
    assert after["metadata"]["labels"] == want["metadata"]["labels"]
    assert after["spec"] == want["spec"]

    # a new leader's start-up rebuilds IPAM from the CRs and writes back those that differ:
    # this one it leaves as the daemon wrote it (not a byte, not a resourceVersion)
    first.stop()
    running(start_controller(identity="controller-b"), "second controller started")
    settled(cluster)
    kept = store.get("ips", None, f"late.{NS}")
    assert kept["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]
    assert kept["spec"]["nodeName"] == NODE and kept["metadata"]["labels"][SUBNET] == ""
