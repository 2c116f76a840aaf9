"""What kube-controller-manager and kube-scheduler do on the real plane: a StatefulSet's pods
are created (and re-created) and bound to a Ready node, ownerReferences are garbage-collected,
a namespace deletion completes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.helpers import wait_for

pytestmark = pytest.mark.realcp

TIMEOUT = 60.0


@pytest.fixture
def ready_node(admin: Any) -> Iterator[str]:
    """A Node with allocatable capacity whose status says Ready (nobody heartbeats it)."""
    core = client.CoreV1Api(admin)
    name = f"node-{uuid.uuid4().hex[:6]}"
    core.create_node({"metadata": {"name": name, "labels": {"realcp-test": name}}})
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    now = "2026-01-01T00:00:00Z"
    status = {
        "capacity": capacity,
        "allocatable": capacity,
        "addresses": [{"type": "InternalIP", "address": "172.18.0.9"}],
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
        ],
    }  # fmt: skip
    core.patch_node_status(name, {"status": status})
    yield name
    core.delete_node(name)


def statefulset(name: str, replicas: int, node_label: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            # Parallel: without a kubelet no pod ever becomes Ready, which OrderedReady waits for.
            "podManagementPolicy": "Parallel",
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"realcp-test": node_label},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def pods(core: Any, namespace: str, app: str) -> dict[str, Any]:
    listed = core.list_namespaced_pod(namespace, label_selector=f"app={app}")
    return {p.metadata.name: p for p in listed.items}


def test_statefulset_pods_are_created_bound_and_recreated(
    admin: Any, namespace: str, ready_node: str
) -> None:
    core, apps = client.CoreV1Api(admin), client.AppsV1Api(admin)
    apps.create_namespaced_stateful_set(namespace, statefulset("web", 2, ready_node))

    def bound() -> dict[str, Any] | None:
        got = pods(core, namespace, "web")
        ok = sorted(got) == ["web-0", "web-1"] and all(
            p.spec.node_name == ready_node for p in got.values()
        )
        return got if ok else None

    first = wait_for(bound, TIMEOUT, "web-0 and web-1 bound to the node")
    for p in first.values():
        assert p.metadata.owner_references[0].kind == "StatefulSet"
        assert p.metadata.labels["statefulset.kubernetes.io/pod-name"] == p.metadata.name
    # No kubelet: a deleted pod needs the kubelet's final delete with grace 0.
    core.delete_namespaced_pod("web-1", namespace, grace_period_seconds=0)

    def recreated() -> bool:
        got = bound()
        return got is not None and got["web-1"].metadata.uid != first["web-1"].metadata.uid

    wait_for(recreated, TIMEOUT, "web-1 re-created under its own name and bound again")
    apps.delete_namespaced_stateful_set("web", namespace)
    # The garbage collector deletes the pods the StatefulSet owned (gracefully: they stay
    # terminating until deleted with grace 0, the kubelet's part).
    wait_for(
        lambda: all(p.metadata.deletion_timestamp for p in pods(core, namespace, "web").values()),
        TIMEOUT,
        "the owned pods deleted by the garbage collector",
    )
    for name in pods(core, namespace, "web"):
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def test_deployment_pods_are_created_by_replicaset(admin: Any, namespace: str) -> None:
    core, apps = client.CoreV1Api(admin), client.AppsV1Api(admin)
    labels = {"app": "dep"}
    body = {
        "metadata": {"name": "dep"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                # Matches no node: pending, unbound pods go at once when deleted.
                "spec": {
                    "nodeSelector": {"realcp-test": "none"},
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }
    apps.create_namespaced_deployment(namespace, body)
    got = wait_for(
        lambda: p if len(p := pods(core, namespace, "dep")) == 3 else None,
        TIMEOUT,
        "three pods of the deployment",
    )
    owners = {p.metadata.owner_references[0].kind for p in got.values()}
    assert owners == {"ReplicaSet"}


def test_garbage_collector_follows_owner_references(admin: Any, namespace: str) -> None:
    core = client.CoreV1Api(admin)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "dependent", "ownerReferences": [ref]}}
    )
    core.delete_namespaced_config_map("owner", namespace)

    def gone() -> bool:
        try:
            core.read_namespaced_config_map("dependent", namespace)
        except ApiException as e:
            return e.status == 404
        return False

    wait_for(gone, TIMEOUT, "the dependent ConfigMap garbage-collected")


def test_namespace_deletion_completes(admin: Any) -> None:
    core = client.CoreV1Api(admin)
    name = f"gone-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, {"metadata": {"name": "cm"}})
    core.create_namespaced_pod(
        name,
        {
            "metadata": {"name": "unbound"},
            "spec": {
                "nodeSelector": {"realcp-test": "none"},
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        },
    )
    core.delete_namespace(name)
    assert core.read_namespace(name).status.phase == "Terminating"

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as e:
            return e.status == 404
        return False

    wait_for(gone, TIMEOUT, f"namespace {name} deleted by the namespace controller")
