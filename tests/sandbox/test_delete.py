"""Deletion: finalizers, graceful pod deletion, preconditions, namespaces, delete collection."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.apiserver.server import ApiServer
from tests.sandbox.helpers import RawWatch, pod, summary

NS = "default"


def test_finalizers_hold_an_object_until_removed(core: Any) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c", "finalizers": ["x/y"]}})
    start = core.list_namespaced_config_map(NS).metadata.resource_version
    core.delete_namespaced_config_map("c", NS)
    held = core.read_namespaced_config_map("c", NS)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    core.delete_namespaced_config_map("c", NS)  # deleting again changes nothing
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_config_map(
            "c",
            NS,
            {"metadata": {"finalizers": None, "labels": {"a": "b"}}, "data": {"k": "v"}},
            _content_type="application/merge-patch+json",
        )
        core.read_namespaced_config_map("c", NS)
    assert err.value.status == 404
    with RawWatch(core.list_namespaced_config_map, NS, resource_version=start) as w:
        events = w.take(2)
    assert summary(events) == [("MODIFIED", "c"), ("DELETED", "c")]
    assert events[1]["object"]["data"] == {"k": "v"}  # the final state is what was deleted


def test_no_new_finalizers_while_deleting(core: Any) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c", "finalizers": ["a"]}})
    core.delete_namespaced_config_map("c", NS)
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_config_map(
            "c",
            NS,
            {"metadata": {"finalizers": ["a", "b"]}},
            _content_type="application/merge-patch+json",
        )
    assert err.value.status == 422


def test_pods_go_at_once_by_default(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    deleted = core.delete_namespaced_pod("p", NS)
    assert deleted.metadata.name == "p"  # pods answer with the deleted object
    with pytest.raises(client.ApiException) as err:
        core.read_namespaced_pod("p", NS)
    assert err.value.status == 404


@pytest.fixture
def graceful() -> Iterator[tuple[ApiServer, Any]]:
    with ApiServer(immediate_pod_delete=False) as srv, srv.api_client() as api:
        yield srv, client.CoreV1Api(api)


def test_graceful_pod_deletion_waits_for_finalize(graceful: tuple[ApiServer, Any]) -> None:
    server, core = graceful
    core.create_namespaced_pod(NS, pod("p", terminationGracePeriodSeconds=20, nodeName="n1"))
    core.delete_namespaced_pod("p", NS)
    terminating = core.read_namespaced_pod("p", NS)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 20
    core.delete_namespaced_pod("p", NS, grace_period_seconds=5)  # shortening is allowed
    assert core.read_namespaced_pod("p", NS).metadata.deletion_grace_period_seconds == 5
    assert server.store.finalize_delete("pods", NS, "p") is True
    with pytest.raises(client.ApiException):
        core.read_namespaced_pod("p", NS)


def test_unscheduled_or_finished_pods_go_at_once(graceful: tuple[ApiServer, Any]) -> None:
    # kube-apiserver's pod strategy: no node runs them, so there is no grace period to wait out
    server, core = graceful
    core.create_namespaced_pod(NS, pod("unscheduled", terminationGracePeriodSeconds=20))
    core.create_namespaced_pod(NS, pod("done", terminationGracePeriodSeconds=20, nodeName="n1"))
    server.store.patch("pods", NS, "done", {"status": {"phase": "Succeeded"}}, subresource="status")
    for name in ("unscheduled", "done"):
        core.delete_namespaced_pod(name, NS)
    assert core.list_namespaced_pod(NS).items == []


def test_graceful_pod_with_zero_grace_goes_at_once(graceful: tuple[ApiServer, Any]) -> None:
    _, core = graceful
    core.create_namespaced_pod(NS, pod("p"))
    core.delete_namespaced_pod("p", NS, body={"gracePeriodSeconds": 0})
    assert core.list_namespaced_pod(NS).items == []


def test_finalize_delete_leaves_objects_with_finalizers(graceful: tuple[ApiServer, Any]) -> None:
    server, core = graceful
    core.create_namespaced_pod(NS, {**pod("p"), "metadata": {"name": "p", "finalizers": ["keep"]}})
    core.delete_namespaced_pod("p", NS)
    assert server.store.finalize_delete("pods", NS, "p") is False
    assert core.read_namespaced_pod("p", NS).metadata.deletion_grace_period_seconds == 0
    core.patch_namespaced_pod("p", NS, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert core.list_namespaced_pod(NS).items == []


def test_delete_preconditions(core: Any) -> None:
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}})
    for pre in ({"uid": "not-the-uid"}, {"resourceVersion": "1"}):
        with pytest.raises(client.ApiException) as err:
            core.delete_namespaced_config_map("c", NS, body={"preconditions": pre})
        assert err.value.status == 409
    resp = core.delete_namespaced_config_map(
        "c",
        NS,
        body={
            "preconditions": {
                "uid": created.metadata.uid,
                "resourceVersion": created.metadata.resource_version,
            }
        },
        _preload_content=False,
    )
    status = json.loads(resp.data)
    assert (status["kind"], status["status"]) == ("Status", "Success")
    assert status["details"]["name"] == "c"


def test_deleting_a_namespace_deletes_its_contents(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_pod("team", pod("p"))
    core.create_namespaced_config_map("team", {"metadata": {"name": "c", "finalizers": ["f"]}})
    core.create_namespaced_config_map(NS, {"metadata": {"name": "survivor"}})
    core.delete_namespace("team")
    assert core.list_namespaced_pod("team").items == []
    ns = core.read_namespace("team")
    assert ns.status.phase == "Terminating"  # the finalized config map is still there
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod("team", pod("q"))
    assert err.value.status == 403
    core.patch_namespaced_config_map(
        "c",
        "team",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    assert "team" not in {n.metadata.name for n in core.list_namespace().items}
    assert core.read_namespaced_config_map("survivor", NS).metadata.name == "survivor"


def test_delete_collection_with_selector(core: Any) -> None:
    for i in range(4):
        core.create_namespaced_config_map(
            NS, {"metadata": {"name": f"c{i}", "labels": {"odd": str(i % 2)}}}
        )
    resp = core.delete_collection_namespaced_config_map(
        NS, label_selector="odd=1", _preload_content=False
    )
    assert [i["metadata"]["name"] for i in json.loads(resp.data)["items"]] == ["c1", "c3"]
    names = [c.metadata.name for c in core.list_namespaced_config_map(NS).items]
    assert names == ["c0", "c2"]


def test_dry_run_changes_nothing(core: Any) -> None:
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}}, dry_run="All")
    assert created.metadata.name == "c"
    assert core.list_namespaced_config_map(NS).items == []
    core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}})
    core.delete_namespaced_config_map("c", NS, dry_run="All")
    assert core.read_namespaced_config_map("c", NS).metadata.name == "c"
