"""The object builders: only the fields asked for, fresh dicts, models parsed by from_dict."""

from __future__ import annotations

from controller.core.model import Pod
from controller.testing import builders, models


def test_pod_holds_only_the_fields_asked_for() -> None:
    assert builders.pod("a", None, containers=None) == {"metadata": {"name": "a"}, "spec": {}}
    full = builders.pod(
        "a",
        "ns",
        annotations={"k": "v"},
        labels={"app": "x"},
        owner=("apps/v1", "StatefulSet", "web"),
        owner_uid="o",
        uid="u",
        resource_version="7",
        deletion_timestamp="2026-01-01T12:00:00Z",
        grace_period=30,
        node="n1",
        phase="Running",
        typed=True,
        hostNetwork=True,
    )
    assert full == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"app": "x"},
            "annotations": {"k": "v"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "o"}
            ],
            "deletionTimestamp": "2026-01-01T12:00:00Z",
            "deletionGracePeriodSeconds": 30,
        },
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "hostNetwork": True,
            "nodeName": "n1",
        },
        "status": {"phase": "Running"},
    }


def test_results_share_nothing_with_inputs_or_each_other() -> None:
    annotations = {"k": "v"}
    first = builders.pod("a", annotations=annotations, status={"podIPs": [{"ip": "1"}]})
    annotations["k"] = "changed"
    first["spec"]["containers"][0]["name"] = "changed"
    first["status"]["podIPs"].append({"ip": "2"})
    second = builders.pod("a", status={"podIPs": [{"ip": "1"}]})
    assert first["metadata"]["annotations"] == {"k": "v"}
    assert second["spec"]["containers"] == [{"name": "app", "image": "busybox"}]
    assert second["status"] == {"podIPs": [{"ip": "1"}]}


def test_owner_mapping_is_taken_as_the_whole_reference() -> None:
    ref = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm1"}
    assert builders.pod("a", owner=ref)["metadata"]["ownerReferences"] == [ref]


def test_subnet_node_namespace_nad() -> None:
    assert builders.subnet(
        "s", "10.0.0.0/24", gateway="10.0.0.1", exclude_ips=["10.0.0.1"], available=5, typed=True
    ) == {
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": "s"},
        "spec": {"cidrBlock": "10.0.0.0/24", "gateway": "10.0.0.1", "excludeIps": ["10.0.0.1"]},
        "status": {"v4availableIPs": 5, "v6availableIPs": 5},
    }
    assert builders.node("n", "1.2.3.4") == {
        "metadata": {"name": "n"},
        "status": {"addresses": [{"type": "InternalIP", "address": "1.2.3.4"}]},
    }
    assert builders.namespace("ns", labels={"a": "b"}) == {
        "metadata": {"name": "ns", "labels": {"a": "b"}}
    }
    assert builders.nad("n", "ns", {"type": "macvlan"}) == {
        "metadata": {"name": "n", "namespace": "ns"},
        "spec": {"config": '{"type": "macvlan"}'},
    }


def test_models_come_from_the_models_own_parser() -> None:
    pod = models.sts_pod(node_name="n1")
    assert isinstance(pod, Pod)
    assert (pod.name, pod.namespace, pod.node_name) == ("web-1", "default", "n1")
    subnet = models.subnet(cidr="10.1.0.0/24")
    assert subnet.gateway == "10.1.0.1"
    assert models.node("n", "1.2.3.4", tunnel_ip="100.64.0.2").name == "n"
    assert models.namespace("x", None).name == "x"


def test_allocated_annotations_per_provider() -> None:
    assert builders.allocated("10.16.0.5", "00:00:00:00:00:05") == {
        "ovn.kubernetes.io/allocated": "true",
        "ovn.kubernetes.io/ip_address": "10.16.0.5",
        "ovn.kubernetes.io/mac_address": "00:00:00:00:00:05",
        "ovn.kubernetes.io/logical_switch": "ovn-default",
    }
    got = builders.allocated("10.1.0.2", "m", "s1", provider="n.ns", cidr="10.1.0.0/24")
    assert got["n.ns.kubernetes.io/logical_switch"] == "s1"
    assert got["n.ns.kubernetes.io/cidr"] == "10.1.0.0/24"


def test_allocated_gateway_routed_and_resource_versions() -> None:
    got = builders.allocated(
        "10.16.0.5", "m", cidr="10.16.0.0/16", gateway="10.16.0.1", routed=True
    )
    assert got["ovn.kubernetes.io/gateway"] == "10.16.0.1"
    assert got["ovn.kubernetes.io/routed"] == "true"
    assert "ovn.kubernetes.io/routed" not in builders.allocated("10.16.0.5", "m")
    assert builders.subnet("s", "10.0.0.0/24", resource_version="4")["metadata"] == {
        "name": "s",
        "resourceVersion": "4",
    }
    assert builders.node("n", resource_version="5")["metadata"] == {
        "name": "n",
        "resourceVersion": "5",
    }
