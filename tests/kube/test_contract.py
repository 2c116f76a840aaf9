"""One contract, every implementation: FakeKubeApi must behave like the adapter on a server."""

from __future__ import annotations

import pytest

from controller.apiclient.errors import AlreadyExistsError, ConflictError, NotFoundError
from tests.kube.helpers import Harness, ip_cr, pod


def _rv(obj: dict[str, object] | None) -> str:
    assert obj is not None
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    return str(meta["resourceVersion"])


def _annotations(h: Harness, name: str, namespace: str = "default") -> dict[str, str]:
    obj = h.read("pods", namespace, name)
    assert obj is not None
    return dict(obj["metadata"].get("annotations") or {})


# --- pod annotations ---------------------------------------------------------------------------


def test_patch_sets_only_given_keys_and_keeps_foreign_ones(harness: Harness) -> None:
    harness.seed("pods", pod("p1", annotations={"other.io/owner": "someone", "a": "old"}))

    returned = harness.api.patch_pod_annotations(
        "default", "p1", {"a": "new", "ovn.kubernetes.io/allocated": "true"}
    )

    assert _annotations(harness, "p1") == {
        "other.io/owner": "someone",
        "a": "new",
        "ovn.kubernetes.io/allocated": "true",
    }
    assert returned["metadata"]["annotations"] == _annotations(harness, "p1")
    assert returned["metadata"]["resourceVersion"] == _rv(harness.read("pods", "default", "p1"))


def test_patch_creates_the_map_on_a_pod_without_annotations(harness: Harness) -> None:
    harness.seed("pods", pod("bare", namespace="ns1"))

    harness.api.patch_pod_annotations("ns1", "bare", {"k": "v"})

    assert _annotations(harness, "bare", "ns1") == {"k": "v"}


def test_patch_bumps_resource_version_but_a_no_op_patch_does_not(harness: Harness) -> None:
    seeded = harness.seed("pods", pod("p1", annotations={"a": "1"}))
    first = harness.api.patch_pod_annotations("default", "p1", {"a": "2"})
    assert int(_rv(first)) > int(_rv(seeded))

    again = harness.api.patch_pod_annotations("default", "p1", {"a": "2"})

    assert _rv(again) == _rv(first)


def test_patch_of_a_missing_pod_raises_not_found(harness: Harness) -> None:
    with pytest.raises(NotFoundError) as info:
        harness.api.patch_pod_annotations("default", "ghost", {"a": "1"})
    assert info.value.status == 404


def test_resource_version_precondition(harness: Harness) -> None:
    seeded = harness.seed("pods", pod("p1", annotations={"a": "1"}))
    harness.api.patch_pod_annotations("default", "p1", {"b": "2"})  # someone else moved it on

    with pytest.raises(ConflictError) as info:
        harness.api.patch_pod_annotations(
            "default", "p1", {"a": "mine"}, resource_version=_rv(seeded)
        )
    assert info.value.status == 409
    assert _annotations(harness, "p1") == {"a": "1", "b": "2"}

    current = _rv(harness.read("pods", "default", "p1"))
    harness.api.patch_pod_annotations("default", "p1", {"a": "mine"}, resource_version=current)
    assert _annotations(harness, "p1")["a"] == "mine"


def test_delete_annotations_removes_keys_and_tolerates_absent_ones(harness: Harness) -> None:
    harness.seed("pods", pod("p1", annotations={"a": "1", "b": "2", "keep": "x"}))

    harness.api.delete_pod_annotations("default", "p1", ["a", "b", "never-there"])

    assert _annotations(harness, "p1") == {"keep": "x"}
    harness.api.delete_pod_annotations("default", "p1", ["keep"])
    assert _annotations(harness, "p1") == {}


def test_bad_annotation_input_is_a_clear_error(harness: Harness) -> None:
    # wrong types on purpose (hence the ignores)
    harness.seed("pods", pod("p1"))
    with pytest.raises(ValueError, match="string"):
        harness.api.patch_pod_annotations("default", "p1", {"a": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        harness.api.patch_pod_annotations("default", "", {"a": "1"})


# --- IP CRs ------------------------------------------------------------------------------------


def test_create_or_update_ip_creates_then_writes_only_on_change(harness: Harness) -> None:
    created = harness.api.create_or_update_ip(ip_cr("p1.default"))
    assert created["spec"]["ipAddress"] == "10.16.0.5"
    assert harness.api.get_ip("p1.default") is not None

    same = harness.api.create_or_update_ip(ip_cr("p1.default"))
    assert _rv(same) == _rv(created)

    moved = harness.api.create_or_update_ip(ip_cr("p1.default", subnet="net2", ip="10.17.0.9"))
    assert int(_rv(moved)) > int(_rv(created))
    stored = harness.read("ips", "", "p1.default")
    assert stored is not None
    assert stored["spec"]["ipAddress"] == "10.17.0.9"
    assert stored["metadata"]["labels"] == {"ovn.kubernetes.io/subnet": "net2", "net2": ""}
    assert stored["metadata"]["uid"] == created["metadata"]["uid"]


@pytest.mark.parametrize("present", [False, True])
def test_create_or_update_ip_likely_absent_is_only_a_hint(harness: Harness, present: bool) -> None:
    if present:
        harness.api.create_or_update_ip(ip_cr("p1.default", ip="10.16.0.9"))

    result = harness.api.create_or_update_ip(ip_cr("p1.default"), likely_absent=True)

    assert result["spec"]["ipAddress"] == "10.16.0.5"
    stored = harness.read("ips", "", "p1.default")
    assert stored is not None and stored["spec"]["ipAddress"] == "10.16.0.5"


def test_ip_delete_get_list(harness: Harness) -> None:
    harness.api.create_or_update_ip(ip_cr("a.default"))
    harness.api.create_or_update_ip(ip_cr("b.default", ip="10.16.0.6"))

    assert sorted(i["metadata"]["name"] for i in harness.api.list_ips()) == [
        "a.default",
        "b.default",
    ]
    assert harness.api.delete_ip("a.default") is True
    assert harness.api.delete_ip("a.default") is False
    assert harness.api.get_ip("a.default") is None
    assert [i["metadata"]["name"] for i in harness.api.list_ips()] == ["b.default"]


def test_ip_body_is_validated(harness: Harness) -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        harness.api.create_or_update_ip({"spec": {}})
    with pytest.raises(ValueError, match="spec"):
        harness.api.create_or_update_ip({"metadata": {"name": "x"}})


# --- subnets, namespaces, nodes ----------------------------------------------------------------


def test_subnet_create_get_status(harness: Harness) -> None:
    body = {"metadata": {"name": "net1"}, "spec": {"cidrBlock": "10.1.0.0/16", "protocol": "IPv4"}}
    harness.api.create_subnet(body)
    with pytest.raises(AlreadyExistsError):
        harness.api.create_subnet(body)

    harness.api.update_subnet_status("net1", {"v4availableIPs": 10, "v4usingIPs": 2})
    harness.api.update_subnet_status("net1", {"v4usingIPs": 3})

    got = harness.api.get_subnet("net1")
    assert got is not None
    assert got["spec"]["cidrBlock"] == "10.1.0.0/16"
    assert got["status"]["v4availableIPs"] == 10
    assert got["status"]["v4usingIPs"] == 3
    assert harness.api.get_subnet("nope") is None
    with pytest.raises(NotFoundError):
        harness.api.update_subnet_status("nope", {"v4usingIPs": 1})


def test_annotate_namespace_and_node(harness: Harness) -> None:
    harness.seed("namespaces", {"metadata": {"name": "ns2", "annotations": {"x": "1"}}})
    harness.seed("nodes", {"metadata": {"name": "node1"}})

    harness.api.annotate_namespace("ns2", {"ovn.kubernetes.io/logical_switch": "net1", "x": None})
    harness.api.annotate_node("node1", {"ovn.kubernetes.io/allocated": "true"})

    ns = harness.read("namespaces", "", "ns2")
    node = harness.read("nodes", "", "node1")
    assert ns is not None and node is not None
    assert ns["metadata"]["annotations"] == {"ovn.kubernetes.io/logical_switch": "net1"}
    assert node["metadata"]["annotations"] == {"ovn.kubernetes.io/allocated": "true"}
    with pytest.raises(NotFoundError):
        harness.api.annotate_node("ghost", {"a": "b"})
    with pytest.raises(NotFoundError):
        harness.api.annotate_namespace("ghost", {"a": "b"})


# --- uncached reads ----------------------------------------------------------------------------


def test_uncached_reads_return_objects_or_none(harness: Harness) -> None:
    harness.seed(
        "statefulsets",
        {"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}},
    )
    harness.seed(
        "configmaps",
        {
            "metadata": {"name": "ovn-external-gw-config", "namespace": "ns1"},
            "data": {"external-gw-addr": "172.18.0.1/16"},
        },
    )
    harness.seed(
        "network-attachment-definitions",
        {"metadata": {"name": "macvlan", "namespace": "default"}, "spec": {"config": "{}"}},
    )
    harness.seed(
        "virtualmachines",
        {"metadata": {"name": "vm1", "namespace": "default"}, "spec": {"running": True}},
    )

    sts = harness.api.get_statefulset("default", "web")
    cm = harness.api.get_configmap("ns1", "ovn-external-gw-config")
    nad = harness.api.get_network_attachment_definition("default", "macvlan")
    vm = harness.api.get_virtual_machine("default", "vm1")
    assert sts is not None and sts["spec"]["replicas"] == 3
    assert cm is not None and cm["data"]["external-gw-addr"] == "172.18.0.1/16"
    assert nad is not None and nad["spec"]["config"] == "{}"
    assert vm is not None and vm["spec"]["running"] is True

    assert harness.api.get_statefulset("default", "gone") is None
    assert harness.api.get_configmap("default", "ovn-external-gw-config") is None
    assert harness.api.get_network_attachment_definition("ns1", "macvlan") is None
    assert harness.api.get_virtual_machine("ns1", "vm1") is None


# --- event sink --------------------------------------------------------------------------------


def test_event_sink_create_and_patch(harness: Harness) -> None:
    body = {
        "metadata": {"name": "p1.abc", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"},
        "type": "Warning",
        "reason": "AcquireAddressFailed",
        "message": "NoAvailableAddress",
        "count": 1,
        "source": {"component": "ovn-controller"},
    }
    harness.sink.create_event("default", body)
    with pytest.raises(AlreadyExistsError):
        harness.sink.create_event("default", body)

    harness.sink.patch_event("default", "p1.abc", {"count": 2})

    stored = harness.read("events", "default", "p1.abc")
    assert stored is not None
    assert stored["count"] == 2
    assert stored["reason"] == "AcquireAddressFailed"
    with pytest.raises(NotFoundError):
        harness.sink.patch_event("default", "missing", {"count": 2})
