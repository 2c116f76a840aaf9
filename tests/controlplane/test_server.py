"""The real kube-apiserver: its version, and what it does with the chart's CRDs (validation,
pruning, the status subresource)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.sandbox.cluster.controlplane import RealControlPlane, pinned_versions

pytestmark = pytest.mark.realcp

GROUP, VERSION = "kubeovn.io", "v1"


def subnet(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Subnet",
        "metadata": {"name": name},
        "spec": {"cidrBlock": "10.77.0.0/24", "protocol": "IPv4", **spec},
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_version_is_the_pinned_one(admin: Any) -> None:
    k8s, _ = pinned_versions()
    info = client.VersionApi(admin).get_code()
    assert info.git_version == k8s
    assert (info.major, info.minor) == ("1", k8s.split(".")[1])


def test_components_run_as_separate_processes(real_control_plane: RealControlPlane) -> None:
    names = [c.name for c in real_control_plane.components]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    assert len({c.pid for c in real_control_plane.components}) == 4
    assert all(c.running for c in real_control_plane.components)


def test_subnet_violating_the_schema_is_rejected(admin: Any) -> None:
    api = client.CustomObjectsApi(admin)
    bad = subnet(unique("bad"), natOutgoing="yes", policyRoutingPriority=0)
    with pytest.raises(ApiException) as err:
        api.create_cluster_custom_object(GROUP, VERSION, "subnets", bad)
    assert err.value.status == 422
    assert "spec.natOutgoing" in err.value.body
    assert "spec.policyRoutingPriority" in err.value.body


def test_unknown_fields_are_pruned(admin: Any) -> None:
    api = client.CustomObjectsApi(admin)
    name = unique("prune")
    body = subnet(name, notInTheSchema="x")
    body["topLevelExtra"] = {"a": 1}
    try:
        created = api.create_cluster_custom_object(GROUP, VERSION, "subnets", body)
        read = api.get_cluster_custom_object(GROUP, VERSION, "subnets", name)
        for obj in (created, read):
            assert "notInTheSchema" not in obj["spec"]
            assert "topLevelExtra" not in obj
            assert obj["spec"]["cidrBlock"] == "10.77.0.0/24"
    finally:
        api.delete_cluster_custom_object(GROUP, VERSION, "subnets", name)


def test_subnet_status_subresource(admin: Any) -> None:
    api = client.CustomObjectsApi(admin)
    name = unique("status")
    body = subnet(name)
    body["status"] = {"v4availableIPs": 7}
    try:
        created = api.create_cluster_custom_object(GROUP, VERSION, "subnets", body)
        assert "status" not in created or "v4availableIPs" not in created["status"]
        patched = api.patch_cluster_custom_object_status(
            GROUP, VERSION, "subnets", name, {"status": {"v4availableIPs": 253}}
        )
        assert patched["status"]["v4availableIPs"] == 253
        # A status write leaves the spec alone and does not bump the generation.
        assert patched["metadata"]["generation"] == created["metadata"]["generation"]
        # A write to the main resource keeps the stored status.
        patched["spec"]["gateway"] = "10.77.0.1"
        patched["status"]["v4availableIPs"] = 1
        updated = api.replace_cluster_custom_object(GROUP, VERSION, "subnets", name, patched)
        assert updated["status"]["v4availableIPs"] == 253
        assert updated["spec"]["gateway"] == "10.77.0.1"
        assert updated["metadata"]["generation"] == created["metadata"]["generation"] + 1
    finally:
        api.delete_cluster_custom_object(GROUP, VERSION, "subnets", name)


def test_ip_has_no_status_subresource(admin: Any) -> None:
    api = client.CustomObjectsApi(admin)
    name = unique("ip")
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "IP",
        "metadata": {"name": name},
        "spec": {"podName": "p", "namespace": "default", "subnet": "s", "v4IpAddress": "10.77.0.9"},
    }
    try:
        api.create_cluster_custom_object(GROUP, VERSION, "ips", body)
        with pytest.raises(ApiException) as err:
            api.patch_cluster_custom_object_status(GROUP, VERSION, "ips", name, {"status": {}})
        assert err.value.status == 404
    finally:
        api.delete_cluster_custom_object(GROUP, VERSION, "ips", name)


def test_watched_foreign_crds_are_served(admin: Any, namespace: str) -> None:
    api = client.CustomObjectsApi(admin)
    nad = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "attach", "namespace": namespace},
        "spec": {"config": '{"cniVersion": "0.3.1", "type": "kube-ovn"}'},
    }
    api.create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", nad
    )
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": namespace},
        "spec": {"running": True, "template": {"spec": {}}},
    }
    api.create_namespaced_custom_object("kubevirt.io", "v1", namespace, "virtualmachines", vm)
    got = api.get_namespaced_custom_object("kubevirt.io", "v1", namespace, "virtualmachines", "vm")
    assert got["spec"]["running"] is True  # preserve-unknown-fields: nothing pruned
