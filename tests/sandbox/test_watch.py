"""Watch conformance: event order, resume, 410, bookmarks, timeouts, selectors, initial events."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client, watch

from controller.sandbox.apiserver.server import ApiServer
from tests.sandbox.helpers import RawWatch, pod, summary

NS = "default"


def _rv(obj: Any) -> int:
    meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
    rv = meta["resourceVersion"] if isinstance(meta, dict) else meta.resource_version
    return int(rv)


def test_events_arrive_in_order_with_increasing_versions(core: Any) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("b", NS)
    with RawWatch(core.list_namespaced_pod, NS, resource_version=start) as w:
        events = w.take(4)
    assert summary(events) == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    versions = [_rv(e["object"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert events[2]["object"]["metadata"]["labels"] == {"x": "1"}


def test_resume_from_a_version_skips_what_came_before(core: Any) -> None:
    a = core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    with RawWatch(core.list_namespaced_pod, NS, resource_version=a.metadata.resource_version) as w:
        events = w.take(1)
        core.create_namespaced_pod(NS, pod("c"))
        events += w.take(1)
    assert summary(events) == [("ADDED", "b"), ("ADDED", "c")]


@pytest.mark.parametrize("rv", ["0", ""])
def test_watch_without_a_version_starts_with_the_current_state(core: Any, rv: str) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    core.delete_namespaced_pod("a", NS)
    with RawWatch(core.list_namespaced_pod, NS, resource_version=rv) as w:
        first = w.take(1)
        core.create_namespaced_pod(NS, pod("c"))
        events = first + w.take(1)
    assert summary(events) == [("ADDED", "b"), ("ADDED", "c")]


def test_watch_is_scoped_to_its_namespace_and_all_namespaces_see_everything(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    start = core.list_pod_for_all_namespaces().metadata.resource_version
    core.create_namespaced_pod("other", pod("o"))
    core.create_namespaced_pod(NS, pod("d"))
    with RawWatch(core.list_namespaced_pod, NS, resource_version=start) as scoped:
        assert summary(scoped.take(1)) == [("ADDED", "d")]
    with RawWatch(core.list_pod_for_all_namespaces, resource_version=start) as everywhere:
        assert summary(everywhere.take(2)) == [("ADDED", "o"), ("ADDED", "d")]


def test_label_selector_turns_transitions_into_added_and_deleted(core: Any) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("p"))
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_pod("p", NS, {"metadata": {"annotations": {"n": "1"}}})
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"app": "db"}}})
    with RawWatch(
        core.list_namespaced_pod, NS, resource_version=start, label_selector="app=web"
    ) as w:
        events = w.take(3)
    assert summary(events) == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_field_selector_on_node_name(core: Any) -> None:
    start = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod("elsewhere", nodeName="n2"))
    core.create_namespaced_pod(NS, pod("here", nodeName="n1"))
    with RawWatch(
        core.list_namespaced_pod, NS, resource_version=start, field_selector="spec.nodeName=n1"
    ) as w:
        assert summary(w.take(1)) == [("ADDED", "here")]


def test_expired_version_gets_an_error_event_with_410(server: ApiServer, core: Any) -> None:
    old = core.create_namespaced_pod(NS, pod("a")).metadata.resource_version
    core.create_namespaced_pod(NS, pod("b"))
    server.store.compact()
    with RawWatch(core.list_namespaced_pod, NS, resource_version=old) as w:
        event = w.next()
        assert w.rest() == []  # the stream ends after the error
    assert event["type"] == "ERROR"
    status = event["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert "too old resource version" in status["message"]


def test_history_window_bounds_how_far_back_a_watch_can_start() -> None:
    with ApiServer(history_window=3) as small, small.api_client() as small_api:
        core = client.CoreV1Api(small_api)
        first = core.create_namespaced_pod(NS, pod("p0")).metadata.resource_version
        for i in range(1, 5):
            core.create_namespaced_pod(NS, pod(f"p{i}"))
        with pytest.raises(client.ApiException) as err:
            for _ in watch.Watch().stream(
                core.list_namespaced_pod, NS, resource_version=first, timeout_seconds=5
            ):
                pass
        assert err.value.status == 410
        recent = str(small.store.resource_version - 2)
        with RawWatch(core.list_namespaced_pod, NS, resource_version=recent) as w:
            assert summary(w.take(2)) == [("ADDED", "p3"), ("ADDED", "p4")]


def test_bookmarks_carry_only_the_version(core: Any) -> None:
    created = core.create_namespaced_pod(NS, pod("a"))
    with RawWatch(
        core.list_namespaced_pod,
        NS,
        resource_version=created.metadata.resource_version,
        allow_watch_bookmarks=True,
    ) as w:
        event = w.next()
    assert event["type"] == "BOOKMARK"
    obj = event["object"]
    assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
    assert set(obj["metadata"]) == {"resourceVersion"}
    assert _rv(obj) >= int(created.metadata.resource_version)


def test_no_bookmarks_unless_asked(core: Any) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    with RawWatch(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=1) as w:
        assert w.rest() == []  # 5 bookmark intervals pass, none is sent


def test_timeout_seconds_ends_the_stream_cleanly(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    events = list(
        watch.Watch().stream(core.list_namespaced_pod, NS, resource_version="0", timeout_seconds=1)
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "a")]


def test_send_initial_events_ends_with_an_annotated_bookmark(core: Any) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    with RawWatch(
        core.list_namespaced_pod,
        NS,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    ) as w:
        events = [w.next() for _ in range(3)]
    assert summary(events[:2]) == [("ADDED", "a"), ("ADDED", "b")]
    assert events[2]["type"] == "BOOKMARK"
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_stream_deserialises_custom_objects(server: ApiServer, custom: Any) -> None:
    custom.create_cluster_custom_object(
        "kubeovn.io",
        "v1",
        "subnets",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Subnet",
            "metadata": {"name": "s"},
            "spec": {"cidrBlock": "10.0.0.0/24"},
        },
    )
    w = watch.Watch()
    seen = []
    for event in w.stream(
        custom.list_cluster_custom_object,
        "kubeovn.io",
        "v1",
        "subnets",
        resource_version="0",
        timeout_seconds=5,
    ):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        w.stop()
    assert seen == [("ADDED", "s")]


def test_many_watchers_all_see_every_event(server: ApiServer, core: Any) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    results: dict[int, list[tuple[str, str]]] = {}

    def run(i: int) -> None:
        with (
            server.api_client() as own,
            RawWatch(client.CoreV1Api(own).list_namespaced_pod, NS, resource_version=rv) as w,
        ):
            results[i] = summary(w.take(20))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for i in range(10):
        core.create_namespaced_pod(NS, pod(f"p{i}"))
        core.delete_namespaced_pod(f"p{i}", NS)
    for t in threads:
        t.join(10)
    expected = [(kind, f"p{i}") for i in range(10) for kind in ("ADDED", "DELETED")]
    assert results == {i: expected for i in range(4)}


def test_a_client_hanging_up_ends_the_server_side_watch(server: ApiServer, core: Any) -> None:
    w = RawWatch(core.list_namespaced_pod, NS, resource_version="0")
    assert server.store.wait_for_watchers("pods", 1)
    w.close()
    assert server.store.wait_for_watchers("pods", 0)


def test_watch_from_a_future_version_is_504(core: Any) -> None:
    with pytest.raises(client.ApiException) as err:
        core.list_namespaced_pod(NS, watch=True, resource_version="999999", _preload_content=False)
    assert err.value.status == 504
    assert "ResourceVersionTooLarge" in err.value.body
