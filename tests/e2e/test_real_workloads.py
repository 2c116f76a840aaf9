"""Real workloads on the real control plane: pods made by kube-controller-manager, bound by
kube-scheduler, run and finished by the sandbox kubelet, networked by the controller (running as
the chart's ServiceAccount).

* a StatefulSet's pod deleted and re-created by the StatefulSet controller keeps its address
  (IP CR and port kept meanwhile); scaled down, the ordinals beyond the replicas are released;
* a Deployment's pods come and go: the ones scaled away lose port, IP CR and address, new ones
  get fresh, unique addresses;
* deleting a namespace deletes its pods (gracefully, finished by the kubelet) and the
  controller cleans up every IP CR and port.

Each ends with the consistency audit settled.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION
from tests.e2e.conftest import Cluster, launch_controller, open_real_cluster
from tests.e2e.helpers import get_or_none, ipam_released, running, wait_for
from tests.e2e.workloads import allocated, gone, lsp, no_lsp, quiet, settled
from tests.fixtures.realbed import RealBed

pytestmark = [pytest.mark.e2e, pytest.mark.realcp]

TIMEOUT = 60.0


@pytest.fixture
def real(real_bed: RealBed) -> Iterator[tuple[Cluster, Controller, Any]]:
    with open_real_cluster(real_bed) as cluster:
        ctl = running(launch_controller(cluster))
        try:
            yield cluster, ctl, real_bed.admin
        finally:
            ctl.stop()


def _namespace(cluster: Cluster, name: str) -> None:
    cluster.server.store.create("namespaces", {"metadata": {"name": name}})


def _template(app: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "terminationGracePeriodSeconds": 1,
        },
    }


def _pods(cluster: Cluster, namespace: str, app: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in cluster.server.store.list("pods", namespace)
        if (p["metadata"].get("labels") or {}).get("app") == app
        and not p["metadata"].get("deletionTimestamp")
    }


def _running_ips(cluster: Cluster, namespace: str, app: str, count: int) -> dict[str, str]:
    """name -> address of the `count` pods of `app`, once each is allocated and Running."""

    def ready() -> dict[str, str] | None:
        pods = _pods(cluster, namespace, app)
        ips = {
            name: (p["metadata"].get("annotations") or {}).get(IP_ADDRESS_ANNOTATION, "")
            for name, p in pods.items()
            if p["status"].get("phase") == "Running"
        }
        return ips if len(pods) == count and len(ips) == count and all(ips.values()) else None

    return wait_for(ready, timeout=TIMEOUT, message=f"{count} {app} pods running in {namespace}")


def test_statefulset_pod_recreated_by_kcm_keeps_its_address(
    real: tuple[Cluster, Controller, Any],
) -> None:
    cluster, ctl, admin = real
    ns = "rw-sts"
    _namespace(cluster, ns)
    apps = client.AppsV1Api(admin)
    sts = {
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 3,
            "serviceName": "web",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "web"}},
            "template": _template("web"),
        },
    }
    apps.create_namespaced_stateful_set(ns, sts)
    before = _running_ips(cluster, ns, "web", 3)
    assert len(set(before.values())) == 3
    old_uid = cluster.server.store.get("pods", ns, "web-1")["metadata"]["uid"]
    cluster.server.store.immediate_pod_delete = False  # a graceful delete the kubelet finishes
    cluster.server.store.delete("pods", ns, "web-1")

    def recreated() -> bool:
        pod = get_or_none(cluster.server, "pods", ns, "web-1")  # absent for a moment
        return pod is not None and pod["metadata"]["uid"] != old_uid

    wait_for(recreated, timeout=TIMEOUT, message="web-1 re-created by the StatefulSet controller")
    after = _running_ips(cluster, ns, "web", 3)
    assert after == before  # every ordinal, the re-created one included, kept its address
    assert (
        cluster.server.store.get("ips", None, f"web-1.{ns}")["spec"]["ipAddress"] == before["web-1"]
    )
    quiet(ctl)
    settled(cluster)

    apps.patch_namespaced_stateful_set_scale("web", ns, {"spec": {"replicas": 1}})
    for name in ("web-1", "web-2"):
        gone(cluster, "pods", name, ns)
        no_lsp(cluster, f"{name}.{ns}")
        gone(cluster, "ips", f"{name}.{ns}")
        wait_for(partial(ipam_released, ctl, f"{ns}/{name}"), message=f"{name} freed")
    lsp(cluster, f"web-0.{ns}")
    quiet(ctl)
    settled(cluster)


def test_deployment_pods_come_and_go_and_free_their_addresses(
    real: tuple[Cluster, Controller, Any],
) -> None:
    cluster, ctl, admin = real
    ns = "rw-deploy"
    _namespace(cluster, ns)
    apps = client.AppsV1Api(admin)
    deploy = {
        "metadata": {"name": "app", "namespace": ns},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "app"}},
            "template": _template("app"),
        },
    }
    apps.create_namespaced_deployment(ns, deploy)
    first = _running_ips(cluster, ns, "app", 3)
    apps.patch_namespaced_deployment_scale("app", ns, {"spec": {"replicas": 1}})
    survivors = _running_ips(cluster, ns, "app", 1)
    removed = set(first) - set(survivors)
    assert len(removed) == 2
    for name in removed:
        gone(cluster, "pods", name, ns)
        no_lsp(cluster, f"{name}.{ns}")
        gone(cluster, "ips", f"{name}.{ns}")
        wait_for(partial(ipam_released, ctl, f"{ns}/{name}"), message=f"{name} freed")
    apps.patch_namespaced_deployment_scale("app", ns, {"spec": {"replicas": 4}})
    again = _running_ips(cluster, ns, "app", 4)
    assert len(set(again.values())) == 4, f"an address is held twice: {again}"
    quiet(ctl)
    settled(cluster)


def test_namespace_deletion_cleans_up_its_pods_networks(
    real: tuple[Cluster, Controller, Any],
) -> None:
    cluster, ctl, _ = real
    ns = "rw-gone"
    _namespace(cluster, ns)
    store = cluster.server.store
    for name in ("a", "b"):
        store.create(
            "pods",
            {
                "metadata": {"name": name, "namespace": ns, "labels": {"app": "plain"}},
                "spec": _template("plain")["spec"],
            },
        )
    for name in ("a", "b"):
        allocated(cluster, name, namespace=ns)
        lsp(cluster, f"{name}.{ns}")
    _running_ips(cluster, ns, "plain", 2)
    store.delete("namespaces", None, ns)
    wait_for(
        lambda: ns not in {n["metadata"]["name"] for n in store.list("namespaces")},
        timeout=TIMEOUT,
        message=f"namespace {ns} deleted by the namespace controller",
    )
    for name in ("a", "b"):
        no_lsp(cluster, f"{name}.{ns}")
        gone(cluster, "ips", f"{name}.{ns}")
        # the address is released after the IP CR's delete returns: waited for, not read once
        wait_for(partial(ipam_released, ctl, f"{ns}/{name}"), message=f"{name} freed")
    quiet(ctl)
    settled(cluster)
