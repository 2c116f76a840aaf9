"""The chart on the real control plane, next to kube-ovn v1.8.18's own `kube-ovn-controller`
Service and ServiceMonitor: after kube-ovn's Deployment is replaced by the chart's, their selectors
still find the controller's pods, and kubectl-ko's controller checks pass.

The chart is rendered (Helm's Go SDK), kube-ovn's two objects are applied in the release
namespace, then the chart's manifests except its Service (on a real install Helm's `lookup`
leaves kube-ovn's existing Service alone; the rendered one is checked to be the same). The
Deployment is run by the real kube-controller-manager and kube-scheduler; a sandbox kubelet plays
the nodes (hostNetwork pods: Running and Ready as a kubelet reports them). Checked as kube-ovn's
tooling asks:

* kubectl-ko `checkDeployment kube-ovn-controller`: readyReplicas == updatedReplicas == replicas
  == availableReplicas;
* `kubectl logs -l app=kube-ovn-controller`: the label selector lists the chart's pods;
* kube-ovn's Service: its selector lists the same Running pods, its `metrics` port is a port of
  theirs; kube-ovn's ServiceMonitor: its selector and namespace selector pick that Service and
  its endpoint port name exists on it.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.cluster.controlplane import RealControlPlane, render_chart
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode
from controller.testing.wait import wait_for
from tests.chart import kube_ovn_objects as kube_ovn

pytestmark = pytest.mark.realcp

SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
REPLICAS = 2
TIMEOUT = 120.0


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _wait(what: str, cond: Any) -> Any:
    return wait_for(cond, TIMEOUT, message=what, interval=0.2)


def test_kube_ovns_service_monitor_and_kubectl_ko_find_the_charts_controller(
    real_control_plane: RealControlPlane,
) -> None:
    run = uuid.uuid4().hex[:6]
    namespace = f"dropin-{run}"
    pin = {"kubernetes.io/os": "linux", "dropin-run": run}  # only this test's nodes
    manifests = render_chart(
        {
            "replicaCount": REPLICAS,
            "crds": {"install": False},  # the plane has the chart's CRDs already
            "nodeSelector": pin,
            "priorityClassName": "",
        },
        release=f"dropin-{run}",
        namespace=namespace,
    )
    theirs_service = kube_ovn.service(namespace)
    theirs_monitor = kube_ovn.service_monitor(namespace, namespace)
    ours_service = next(m for m in manifests if m["kind"] == "Service")
    # what the chart would install if kube-ovn had no Service: the same selector, name and port
    assert ours_service["metadata"]["name"] == theirs_service["metadata"]["name"]
    assert ours_service["spec"]["selector"] == theirs_service["spec"]["selector"]
    assert {p["name"]: p["port"] for p in ours_service["spec"]["ports"]} == {
        p["name"]: p["port"] for p in theirs_service["spec"]["ports"]
    }

    plane = real_control_plane
    plane.apply([SERVICE_MONITOR_CRD])
    plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    plane.apply([theirs_service, theirs_monitor])
    rest = [copy.deepcopy(m) for m in manifests if m["kind"] != "Service"]
    plane.apply(rest)

    nodes = [
        SimNode(f"dropin-{run}-{i}", f"172.31.{i}.{10 + i}", labels={"dropin-run": run})
        for i in range(REPLICAS)
    ]
    with plane.api_client() as api, SandboxKubelet(api, nodes):
        try:
            _check(api, namespace)
        finally:
            _clean_up(api, namespace, manifests, nodes)


def _clean_up(api: Any, namespace: str, manifests: list[Any], nodes: list[SimNode]) -> None:
    """Leave the shared plane as it was, while the kubelet still finishes pod deletions."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    apps.delete_namespaced_deployment(
        kube_ovn.CONTROLLER, namespace, propagation_policy="Foreground"
    )
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    core.delete_namespace(namespace)

    def gone() -> bool:
        return namespace not in {n.metadata.name for n in core.list_namespace().items}

    _wait(f"namespace {namespace} deleted", gone)
    for m in manifests:
        name = m["metadata"]["name"]
        if m["kind"] == "ClusterRole":
            rbac.delete_cluster_role(name)
        elif m["kind"] == "ClusterRoleBinding":
            rbac.delete_cluster_role_binding(name)
    for node in nodes:
        core.delete_node(node.name)


def _check(api: Any, namespace: str) -> None:
    """kubectl-ko's checks and the selectors of kube-ovn's Service and ServiceMonitor."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)

    # kubectl-ko checkDeployment kube-ovn-controller
    def deployment_ready() -> dict[str, Any] | None:
        status = apps.read_namespaced_deployment_status(kube_ovn.CONTROLLER, namespace).to_dict()[
            "status"
        ]
        camel = {
            "readyReplicas": status.get("ready_replicas"),
            "updatedReplicas": status.get("updated_replicas"),
            "replicas": status.get("replicas"),
            "availableReplicas": status.get("available_replicas"),
        }
        return camel if kube_ovn.check_deployment(camel) else None

    status = _wait("kubectl-ko's checkDeployment kube-ovn-controller", deployment_ready)
    assert status["readyReplicas"] == REPLICAS

    # kubectl logs -l app=kube-ovn-controller
    by_label = core.list_namespaced_pod(namespace, label_selector="app=kube-ovn-controller")
    ours = sorted(p.metadata.name for p in by_label.items)
    assert len(ours) == REPLICAS
    assert all(p.metadata.labels["app.kubernetes.io/name"] == "kube-ovn-pod-controller"
               for p in by_label.items)  # fmt: skip

    # kube-ovn's Service selects them (what its endpoints would list), port `metrics`
    service = core.read_namespaced_service(kube_ovn.CONTROLLER, namespace)
    selected = core.list_namespaced_pod(
        namespace, label_selector=_selector(service.spec.selector)
    ).items
    assert sorted(p.metadata.name for p in selected) == ours
    assert all(p.status.phase == "Running" for p in selected)
    for pod in selected:
        ports = {p.name: p.container_port for c in pod.spec.containers for p in c.ports or []}
        for port in service.spec.ports:
            assert ports.get(port.name) == port.port, (pod.metadata.name, port.name)

    # kube-ovn's ServiceMonitor selects that Service, on a port the Service has
    monitor = custom.get_namespaced_custom_object(
        "monitoring.coreos.com", "v1", namespace, "servicemonitors", kube_ovn.CONTROLLER
    )
    assert namespace in monitor["spec"]["namespaceSelector"]["matchNames"]
    services = core.list_namespaced_service(
        namespace, label_selector=_selector(monitor["spec"]["selector"]["matchLabels"])
    ).items
    assert [s.metadata.name for s in services] == [kube_ovn.CONTROLLER]
    names = {p.name for p in services[0].spec.ports}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= names
