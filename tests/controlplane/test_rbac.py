"""The controller's ServiceAccount under the real RBAC authorizer: the chart's rendered
ClusterRole/Role grant what they list and nothing else."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from controller.sandbox.cluster.controlplane import RealControlPlane, render_chart

pytestmark = pytest.mark.realcp

NAMESPACE = "kube-system"


@pytest.fixture(scope="module")
def chart_manifests() -> list[dict[str, Any]]:
    return render_chart(namespace=NAMESPACE)


@pytest.fixture(scope="module")
def controller_api(
    real_control_plane: RealControlPlane, chart_manifests: list[dict[str, Any]]
) -> Iterator[Any]:
    with tempfile.TemporaryDirectory(prefix="rbac") as d:
        path = real_control_plane.write_controller_kubeconfig(
            Path(d) / "controller.kubeconfig", chart_manifests
        )
        api = config.new_client_from_config(config_file=str(path))
        try:
            yield api
        finally:
            api.close()


def lock_name(chart_manifests: list[dict[str, Any]], resource: str) -> str:
    """The one name the Role grants get/update of for `resource` (the Lease, the ConfigMap)."""
    role = next(m for m in chart_manifests if m["kind"] == "Role")
    names = [
        n
        for rule in role["rules"]
        if resource in rule.get("resources", [])
        for n in rule.get("resourceNames", [])
    ]
    assert len(names) == 1, names
    return str(names[0])


def lease_name(chart_manifests: list[dict[str, Any]]) -> str:
    return lock_name(chart_manifests, "leases")


def status_of(call: Any, *args: Any, **kwargs: Any) -> int:
    try:
        call(*args, **kwargs)
    except ApiException as e:
        return int(e.status)
    return 200


def test_the_token_authenticates_as_the_service_account(
    controller_api: Any, chart_manifests: list[dict[str, Any]]
) -> None:
    account = next(m for m in chart_manifests if m["kind"] == "ServiceAccount")["metadata"]
    review = client.AuthenticationV1Api(controller_api).create_self_subject_review({})
    user = review.status.user_info
    assert user.username == f"system:serviceaccount:{account['namespace']}:{account['name']}"
    assert "system:serviceaccounts" in user.groups


def test_what_the_chart_grants_succeeds(
    controller_api: Any, chart_manifests: list[dict[str, Any]]
) -> None:
    core = client.CoreV1Api(controller_api)
    custom = client.CustomObjectsApi(controller_api)
    assert status_of(core.list_pod_for_all_namespaces, limit=1) == 200
    assert status_of(core.list_node, limit=1) == 200
    assert status_of(core.list_namespaced_config_map, NAMESPACE, limit=1) == 200
    assert status_of(custom.list_cluster_custom_object, "kubeovn.io", "v1", "ips") == 200
    name = lease_name(chart_manifests)
    lease = {"metadata": {"name": name, "namespace": NAMESPACE}}
    coordination = client.CoordinationV1Api(controller_api)
    assert status_of(coordination.create_namespaced_lease, NAMESPACE, lease) in (200, 409)
    assert status_of(coordination.read_namespaced_lease, name, NAMESPACE) == 200
    # kube-ovn v1.8's lock, held beside the Lease so that an old kube-ovn-controller waits
    cm_name = lock_name(chart_manifests, "configmaps")
    lock = {"metadata": {"name": cm_name, "namespace": NAMESPACE}}
    assert status_of(core.create_namespaced_config_map, NAMESPACE, lock) in (200, 409)
    assert status_of(core.read_namespaced_config_map, cm_name, NAMESPACE) == 200


def test_what_the_chart_does_not_grant_is_forbidden(
    controller_api: Any, chart_manifests: list[dict[str, Any]]
) -> None:
    core = client.CoreV1Api(controller_api)
    custom = client.CustomObjectsApi(controller_api)
    coordination = client.CoordinationV1Api(controller_api)
    forbidden = {
        "list secrets": status_of(core.list_secret_for_all_namespaces, limit=1),
        "create pods": status_of(
            core.create_namespaced_pod, "default", {"metadata": {"name": "x"}}
        ),
        "delete subnets": status_of(
            custom.delete_cluster_custom_object, "kubeovn.io", "v1", "subnets", "ovn-default"
        ),
        "configmaps outside the release namespace": status_of(
            core.list_namespaced_config_map, "default", limit=1
        ),
        "another lease": status_of(coordination.read_namespaced_lease, "other", NAMESPACE),
    }
    assert forbidden == dict.fromkeys(forbidden, 403)
