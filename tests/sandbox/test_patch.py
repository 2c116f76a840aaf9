"""Patches: the pure RFC 6902 / RFC 7386 / strategic merge functions, then each over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.apiserver.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from tests.sandbox.helpers import pod

NS = "default"
DOC = {"a": {"b": [1, 2, 3], "c": "x"}, "d/e": 1, "f~g": 2}


# ---------------------------------------------------------------------------- JSON patch


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        (
            [{"op": "add", "path": "/a/b/1", "value": 9}],
            {**DOC, "a": {"b": [1, 9, 2, 3], "c": "x"}},
        ),
        (
            [{"op": "add", "path": "/a/b/-", "value": 4}],
            {**DOC, "a": {"b": [1, 2, 3, 4], "c": "x"}},
        ),
        ([{"op": "remove", "path": "/a/c"}], {**DOC, "a": {"b": [1, 2, 3]}}),
        ([{"op": "replace", "path": "/d~1e", "value": 5}], {**DOC, "d/e": 5}),
        ([{"op": "move", "from": "/f~0g", "path": "/h"}], {"a": DOC["a"], "d/e": 1, "h": 2}),
        ([{"op": "copy", "from": "/a/c", "path": "/z"}], {**DOC, "z": "x"}),
        (
            [{"op": "test", "path": "/a/c", "value": "x"}, {"op": "remove", "path": "/a/b/0"}],
            {**DOC, "a": {"b": [2, 3], "c": "x"}},
        ),
    ],
)
def test_json_patch_operations(ops: list[Any], expected: Any) -> None:
    before = json.dumps(DOC)
    assert apply_json_patch(DOC, ops) == expected
    assert json.dumps(DOC) == before  # the input is untouched


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/a/c", "value": "y"}],
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/a/b/7", "value": 1}],
        [{"op": "add", "path": "/x/y", "value": 1}],
        [{"op": "move", "from": "/a", "path": "/a/b/c"}],
    ],
)
def test_json_patch_failures(ops: list[Any]) -> None:
    with pytest.raises(PatchError):
        apply_json_patch(DOC, ops)


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add"},
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "a", "value": 1}],
        [{"path": "/a"}],
    ],
)
def test_malformed_json_patch(ops: Any) -> None:
    with pytest.raises(ValueError, match=r"."):
        apply_json_patch(DOC, ops)


# ---------------------------------------------------------------------------- merge patch


def test_merge_patch_rfc7386_examples() -> None:
    assert apply_merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert apply_merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert apply_merge_patch({"a": "b"}, {"a": None}) == {}
    assert apply_merge_patch({"a": "b", "b": "c"}, {"a": None}) == {"b": "c"}
    assert apply_merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert apply_merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert apply_merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert apply_merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert apply_merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}
    assert apply_merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}


# ---------------------------------------------------------------------------- strategic merge

POD = {
    "metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1"}},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "v1",
                "env": [{"name": "A", "value": "1"}],
                "ports": [{"containerPort": 80}],
            },
            {"name": "side", "image": "s1"},
        ],
        "tolerations": [{"key": "t1"}],
    },
}


def test_strategic_merge_merges_lists_by_key() -> None:
    patched = apply_strategic_merge_patch(
        POD,
        {
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "v2",
                        "env": [{"name": "B", "value": "2"}],
                        "ports": [{"containerPort": 443}],
                    },
                    {"name": "new", "image": "n"},
                ]
            }
        },
    )
    containers = patched["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "side", "new"]
    assert containers[0]["image"] == "v2"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert containers[0]["ports"] == [{"containerPort": 80}, {"containerPort": 443}]


def test_strategic_merge_replaces_lists_without_a_merge_key() -> None:
    patched = apply_strategic_merge_patch(POD, {"spec": {"tolerations": [{"key": "t2"}]}})
    assert patched["spec"]["tolerations"] == [{"key": "t2"}]


def test_strategic_merge_directives() -> None:
    deleted = apply_strategic_merge_patch(
        POD, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["app"]
    replaced = apply_strategic_merge_patch(
        POD, {"spec": {"containers": [{"name": "only", "image": "o"}, {"$patch": "replace"}]}}
    )
    assert replaced["spec"]["containers"] == [{"name": "only", "image": "o"}]
    whole_map = apply_strategic_merge_patch(
        POD, {"metadata": {"labels": {"y": "2", "$patch": "replace"}}}
    )
    assert whole_map["metadata"]["labels"] == {"y": "2"}
    gone = apply_strategic_merge_patch(POD, {"metadata": {"labels": {"$patch": "delete"}}})
    assert "labels" not in gone["metadata"]
    retained = apply_strategic_merge_patch(
        {"spec": {"a": 1, "b": 2}}, {"spec": {"$retainKeys": ["b", "c"], "c": 3}}
    )
    assert retained == {"spec": {"b": 2, "c": 3}}


def test_strategic_merge_finalizers_are_a_set() -> None:
    added = apply_strategic_merge_patch(POD, {"metadata": {"finalizers": ["b", "a"]}})
    assert added["metadata"]["finalizers"] == ["a", "b"]
    removed = apply_strategic_merge_patch(
        added,
        {
            "metadata": {
                "$deleteFromPrimitiveList/finalizers": ["a"],
                "$setElementOrder/finalizers": ["b"],
            }
        },
    )
    assert removed["metadata"]["finalizers"] == ["b"]


def test_strategic_merge_null_deletes_and_input_is_untouched() -> None:
    before = json.dumps(POD)
    patched = apply_strategic_merge_patch(POD, {"metadata": {"labels": {"x": None}}})
    assert patched["metadata"]["labels"] == {}
    assert json.dumps(POD) == before


# ---------------------------------------------------------------------------- over HTTP


def test_three_patch_kinds_on_a_pod(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p", labels={"a": "1"}))
    smp = core.patch_namespaced_pod(
        "p", NS, {"spec": {"containers": [{"name": "app", "image": "busybox:2"}]}}
    )  # a dict body goes as strategic merge
    assert [(c.name, c.image) for c in smp.spec.containers] == [("app", "busybox:2")]
    merged = core.patch_namespaced_pod(
        "p",
        NS,
        {"metadata": {"labels": {"a": None, "b": "2"}}},
        _content_type="application/merge-patch+json",
    )
    assert merged.metadata.labels == {"b": "2"}
    jp = core.patch_namespaced_pod(
        "p", NS, [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]
    )
    assert jp.metadata.annotations == {"k": "v"}
    with pytest.raises(client.ApiException) as failed_test:
        core.patch_namespaced_pod("p", NS, [{"op": "test", "path": "/metadata/name", "value": "q"}])
    assert failed_test.value.status == 422


def test_patch_with_stale_resource_version_conflicts(core: Any) -> None:
    created = core.create_namespaced_pod(NS, pod("p"))
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_pod(
            "p",
            NS,
            {
                "metadata": {
                    "labels": {"a": "2"},
                    "resourceVersion": created.metadata.resource_version,
                }
            },
        )
    assert err.value.status == 409


def test_patch_cannot_rename(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_pod("p", NS, {"metadata": {"name": "q"}})
    assert err.value.status == 422


def test_custom_resources_refuse_strategic_merge(custom: Any) -> None:
    custom.create_cluster_custom_object(
        "kubeovn.io", "v1", "ips", {"metadata": {"name": "ip1"}, "spec": {"ipAddress": "10.0.0.2"}}
    )
    with pytest.raises(client.ApiException) as err:
        custom.patch_cluster_custom_object(
            "kubeovn.io",
            "v1",
            "ips",
            "ip1",
            {"spec": {"ipAddress": "10.0.0.3"}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415
    assert json.loads(err.value.body)["reason"] == "UnsupportedMediaType"
    merged = custom.patch_cluster_custom_object(
        "kubeovn.io", "v1", "ips", "ip1", {"spec": {"macAddress": "m"}}
    )
    assert merged["spec"] == {"ipAddress": "10.0.0.2", "macAddress": "m"}
    jp = custom.patch_cluster_custom_object(
        "kubeovn.io",
        "v1",
        "ips",
        "ip1",
        [{"op": "replace", "path": "/spec/ipAddress", "value": "10.0.0.9"}],
        _content_type="application/json-patch+json",
    )
    assert jp["spec"]["ipAddress"] == "10.0.0.9"


def test_server_side_apply_is_refused(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_pod(
            "p",
            NS,
            {"metadata": {"labels": {"a": "b"}}},
            _content_type="application/apply-patch+yaml",
            field_manager="me",
        )
    assert err.value.status == 415


def test_status_subresource_on_a_custom_resource(custom: Any) -> None:
    group = ("kubeovn.io", "v1", "subnets")
    created = custom.create_cluster_custom_object(
        *group,
        {
            "metadata": {"name": "s"},
            "spec": {"cidrBlock": "10.0.0.0/24"},
            "status": {"v4availableIPs": 1},
        },
    )
    assert "status" not in created  # dropped on create, as with a status subresource
    main = custom.patch_cluster_custom_object(
        *group, "s", {"spec": {"gateway": "10.0.0.1"}, "status": {"v4availableIPs": 7}}
    )
    assert main["spec"]["gateway"] == "10.0.0.1" and "status" not in main
    assert main["metadata"]["generation"] == 2
    status = custom.patch_cluster_custom_object_status(
        *group,
        "s",
        {
            "spec": {"cidrBlock": "changed"},
            "status": {"v4availableIPs": 7},
            "metadata": {"labels": {"ignored": "yes"}},
        },
    )
    assert status["status"] == {"v4availableIPs": 7}
    assert status["spec"]["cidrBlock"] == "10.0.0.0/24"
    assert "labels" not in status["metadata"] and status["metadata"]["generation"] == 2
    status["status"]["v4usingIPs"] = 1
    replaced = custom.replace_cluster_custom_object_status(*group, "s", status)
    assert replaced["status"] == {"v4availableIPs": 7, "v4usingIPs": 1}
    assert custom.get_cluster_custom_object_status(*group, "s")["status"] == replaced["status"]


def test_status_subresource_on_a_pod(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    running = core.patch_namespaced_pod_status(
        "p", NS, {"status": {"phase": "Running", "podIP": "10.0.0.5"}}
    )
    assert (running.status.phase, running.status.pod_ip) == ("Running", "10.0.0.5")
    ignored = core.patch_namespaced_pod(
        "p", NS, {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}}
    )
    assert ignored.status.phase == "Running" and ignored.metadata.labels == {"a": "b"}


def test_resources_without_status_have_no_status_endpoint(custom: Any) -> None:
    custom.create_cluster_custom_object("kubeovn.io", "v1", "ips", {"metadata": {"name": "i"}})
    with pytest.raises(client.ApiException) as err:
        custom.patch_cluster_custom_object_status(
            "kubeovn.io", "v1", "ips", "i", {"status": {"a": 1}}
        )
    assert err.value.status == 404
