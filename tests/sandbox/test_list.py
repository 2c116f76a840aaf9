"""List conformance: pagination over a consistent snapshot, selectors, resourceVersion semantics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.apiserver.server import ApiServer

NS = "default"


def _cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": {"v": name}}


def _names(result: Any) -> list[str]:
    return [i.metadata.name for i in result.items]


def test_pages_come_from_one_snapshot(core: Any) -> None:
    for i in range(7):
        core.create_namespaced_config_map(NS, _cm(f"cm{i}"))
    first = core.list_namespaced_config_map(NS, limit=3)
    assert _names(first) == ["cm0", "cm1", "cm2"]
    assert first.metadata.remaining_item_count == 4
    snapshot_rv = first.metadata.resource_version
    # Writes between pages must not show up in the rest of the list.
    core.delete_namespaced_config_map("cm4", NS)
    core.create_namespaced_config_map(NS, _cm("cm35"))
    core.patch_namespaced_config_map("cm5", NS, {"data": {"v": "changed"}})
    second = core.list_namespaced_config_map(NS, limit=3, _continue=first.metadata._continue)
    third = core.list_namespaced_config_map(NS, limit=3, _continue=second.metadata._continue)
    assert _names(second) == ["cm3", "cm4", "cm5"]
    assert second.items[2].data == {"v": "cm5"}
    assert _names(third) == ["cm6"]
    assert third.metadata._continue is None
    assert {second.metadata.resource_version, third.metadata.resource_version} == {snapshot_rv}
    assert "cm35" in _names(core.list_namespaced_config_map(NS))


def test_exact_page_boundary_has_no_continue(core: Any) -> None:
    for i in range(4):
        core.create_namespaced_config_map(NS, _cm(f"cm{i}"))
    first = core.list_namespaced_config_map(NS, limit=2)
    second = core.list_namespaced_config_map(NS, limit=2, _continue=first.metadata._continue)
    assert _names(second) == ["cm2", "cm3"] and second.metadata._continue is None


def test_expired_continue_token_is_410_with_a_fresh_token(server: ApiServer, core: Any) -> None:
    for i in range(4):
        core.create_namespaced_config_map(NS, _cm(f"cm{i}"))
    first = core.list_namespaced_config_map(NS, limit=2)
    core.create_namespaced_config_map(NS, _cm("late"))
    server.store.compact()
    with pytest.raises(client.ApiException) as err:
        core.list_namespaced_config_map(NS, limit=2, _continue=first.metadata._continue)
    assert err.value.status == 410
    status = json.loads(err.value.body)
    assert status["reason"] == "Expired" and status["metadata"]["continue"]
    rest = core.list_namespaced_config_map(NS, _continue=status["metadata"]["continue"])
    assert _names(rest) == ["cm2", "cm3", "late"]


def test_resource_version_zero_ignores_the_limit(core: Any) -> None:
    # kube-apiserver serves rv "0" from its watch cache, whole: no pages, no continue token.
    for i in range(4):
        core.create_namespaced_config_map(NS, _cm(f"cm{i}"))
    whole = core.list_namespaced_config_map(NS, limit=2, resource_version="0")
    assert _names(whole) == ["cm0", "cm1", "cm2", "cm3"]
    assert whole.metadata._continue is None and whole.metadata.remaining_item_count is None
    paged = core.list_namespaced_config_map(NS, limit=2, resource_version="")
    assert len(paged.items) == 2 and paged.metadata._continue


def test_bad_continue_token_is_400(core: Any) -> None:
    with pytest.raises(client.ApiException) as err:
        core.list_namespaced_config_map(NS, _continue="not-a-token")
    assert err.value.status == 400


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web,tier=front", ["a"]),
        ("app!=web", ["c", "d"]),
        ("app in (web,db)", ["a", "b", "c"]),
        ("app notin (web)", ["c", "d"]),
        ("tier", ["a", "c"]),
        ("!tier", ["b", "d"]),
        ("", ["a", "b", "c", "d"]),
    ],
)
def test_label_selectors(core: Any, selector: str, expected: list[str]) -> None:
    core.create_namespaced_config_map(NS, _cm("a", {"app": "web", "tier": "front"}))
    core.create_namespaced_config_map(NS, _cm("b", {"app": "web"}))
    core.create_namespaced_config_map(NS, _cm("c", {"app": "db", "tier": "back"}))
    core.create_namespaced_config_map(NS, _cm("d"))
    assert _names(core.list_namespaced_config_map(NS, label_selector=selector)) == expected


def test_selectors_with_pagination(core: Any) -> None:
    for i in range(6):
        core.create_namespaced_config_map(NS, _cm(f"cm{i}", {"even": str(i % 2 == 0).lower()}))
    page = core.list_namespaced_config_map(NS, label_selector="even=true", limit=2)
    assert _names(page) == ["cm0", "cm2"]
    assert page.metadata.remaining_item_count is None  # never counted under a selector
    rest = core.list_namespaced_config_map(
        NS, label_selector="even=true", limit=2, _continue=page.metadata._continue
    )
    assert _names(rest) == ["cm4"] and rest.metadata._continue is None


def test_field_selectors(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    spec = {"containers": [{"name": "c", "image": "i"}]}
    core.create_namespaced_pod(NS, {"metadata": {"name": "a"}, "spec": {**spec, "nodeName": "n1"}})
    core.create_namespaced_pod(NS, {"metadata": {"name": "b"}, "spec": spec})
    core.create_namespaced_pod("other", {"metadata": {"name": "a"}, "spec": spec})
    everywhere = core.list_pod_for_all_namespaces
    assert _names(everywhere(field_selector="spec.nodeName=n1")) == ["a"]
    assert _names(everywhere(field_selector="spec.nodeName=")) == ["b", "a"]
    assert [
        (p.metadata.namespace, p.metadata.name)
        for p in everywhere(field_selector="metadata.name=a,metadata.namespace!=default").items
    ] == [("other", "a")]
    with pytest.raises(client.ApiException) as err:
        everywhere(field_selector="spec.bogus=1")
    assert err.value.status == 400 and "field label not supported" in err.value.body
    with pytest.raises(client.ApiException) as bad_label:
        everywhere(label_selector="a in (b")
    assert bad_label.value.status == 400


def test_resource_version_semantics(server: ApiServer, core: Any) -> None:
    core.create_namespaced_config_map(NS, _cm("a"))
    at = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, _cm("b"))
    core.delete_namespaced_config_map("a", NS)
    exact = core.list_namespaced_config_map(NS, resource_version=at, resource_version_match="Exact")
    assert _names(exact) == ["a"] and exact.metadata.resource_version == at
    not_older = core.list_namespaced_config_map(
        NS, resource_version=at, resource_version_match="NotOlderThan"
    )
    assert _names(not_older) == ["b"]
    assert _names(core.list_namespaced_config_map(NS, resource_version="0")) == ["b"]
    with pytest.raises(client.ApiException) as future:
        core.list_namespaced_config_map(NS, resource_version="999999")
    assert future.value.status == 504 and "ResourceVersionTooLarge" in future.value.body
    with pytest.raises(client.ApiException) as no_rv:
        core.list_namespaced_config_map(NS, resource_version_match="Exact")
    assert no_rv.value.status == 400
    server.store.compact()
    with pytest.raises(client.ApiException) as expired:
        core.list_namespaced_config_map(NS, resource_version=at, resource_version_match="Exact")
    assert expired.value.status == 410


def test_raw_list_body_shape(core: Any) -> None:
    core.create_namespaced_config_map(NS, _cm("a"))
    resp = core.list_namespaced_config_map(NS, _preload_content=False)
    body = json.loads(resp.data)
    assert (body["kind"], body["apiVersion"]) == ("ConfigMapList", "v1")
    assert int(body["metadata"]["resourceVersion"]) > 0
    assert [i["metadata"]["name"] for i in body["items"]] == ["a"]
    assert "kind" not in body["items"][0] and "apiVersion" not in body["items"][0]


def test_cluster_scoped_custom_objects_list_with_selector(custom: Any) -> None:
    for name, vpc in (("s1", "a"), ("s2", "b"), ("s3", "a")):
        custom.create_cluster_custom_object(
            "kubeovn.io",
            "v1",
            "subnets",
            {"metadata": {"name": name, "labels": {"vpc": vpc}}, "spec": {}},
        )
    out = custom.list_cluster_custom_object("kubeovn.io", "v1", "subnets", label_selector="vpc=a")
    assert out["kind"] == "SubnetList"
    assert {(i["kind"], i["apiVersion"]) for i in out["items"]} == {("Subnet", "kubeovn.io/v1")}
    assert [i["metadata"]["name"] for i in out["items"]] == ["s1", "s3"]
