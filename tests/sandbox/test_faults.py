"""Fault injection: each fault fires only for matching requests, and before any state change,
except a lost answer, which is withheld after the request was served."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch

from controller.sandbox.apiserver.server import ApiServer
from tests.sandbox.helpers import RawWatch, pod

NS = "default"


def test_fail_next_n_matching_requests(server: ApiServer, core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    server.faults.fail_next(2, status=503, verb="list", resource="pods")
    for _ in range(2):
        with pytest.raises(client.ApiException) as err:
            core.list_namespaced_pod(NS)
        assert err.value.status == 503
        status = json.loads(err.value.body)
        assert (status["kind"], status["reason"]) == ("Status", "ServiceUnavailable")
    assert core.read_namespaced_pod("p", NS).metadata.name == "p"  # other verbs unaffected
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["p"]
    assert server.faults.pending == 0


def test_injected_error_changes_no_state(server: ApiServer, core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    rv = server.store.resource_version
    server.faults.fail_next(1, status=500, method="DELETE")
    with pytest.raises(client.ApiException) as err:
        core.delete_namespaced_pod("p", NS)
    assert err.value.status == 500
    assert server.store.get("pods", NS, "p")["metadata"]["name"] == "p"
    assert server.store.resource_version == rv
    core.delete_namespaced_pod("p", NS)
    assert server.store.list("pods", NS) == []


def test_faults_match_subresources_and_names(server: ApiServer, core: Any) -> None:
    core.create_namespaced_pod(NS, pod("a"))
    core.create_namespaced_pod(NS, pod("b"))
    server.faults.fail_next(1, status=409, resource="pods/status", name="b")
    core.patch_namespaced_pod("b", NS, {"metadata": {"labels": {"x": "y"}}})  # main resource
    core.patch_namespaced_pod_status("a", NS, {"status": {"phase": "Running"}})  # other name
    with pytest.raises(client.ApiException) as err:
        core.patch_namespaced_pod_status("b", NS, {"status": {"phase": "Running"}})
    assert err.value.status == 409


def test_dropped_connection_on_create_surfaces_and_creates_nothing(
    server: ApiServer, core: Any
) -> None:
    server.faults.drop_connections(1, verb="create")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_pod(NS, pod("p"))
    assert server.store.list("pods", NS) == []
    core.create_namespaced_pod(NS, pod("p"))
    assert [r.code for r in server.request_log if r.verb == "create"][-2:] == [0, 201]


def test_lost_answer_on_create_surfaces_though_the_pod_was_created(
    server: ApiServer, core: Any
) -> None:
    server.faults.lose_answers(1, verb="create", resource="pods")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.create_namespaced_pod(NS, pod("p"))
    assert [p["metadata"]["name"] for p in server.store.list("pods", NS)] == ["p"]
    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_pod(NS, pod("p"))  # the retry meets what the first did
    assert err.value.status == 409
    assert server.faults.pending == 0


def test_dropped_read_is_retried_by_urllib3(server: ApiServer, core: Any) -> None:
    server.faults.drop_connections(1, verb="list", resource="namespaces")
    names = {n.metadata.name for n in core.list_namespace().items}
    assert "default" in names
    assert [r.code for r in server.request_log if r.resource == "namespaces"] == [0, 200]


def test_latency_delays_the_answer(server: ApiServer, core: Any) -> None:
    server.faults.add_latency(30.0, n=1, verb="create")
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_namespaced_config_map(
            NS, {"metadata": {"name": "slow"}}, _request_timeout=(5, 0.3)
        )
    fast = core.create_namespaced_config_map(NS, {"metadata": {"name": "fast"}})
    assert fast.metadata.name == "fast"


def test_drop_watches_breaks_open_streams(server: ApiServer, core: Any) -> None:
    with RawWatch(core.list_namespaced_pod, NS, resource_version="0") as w:
        assert server.store.wait_for_watchers("pods", 1)
        assert server.faults.drop_watches("pods") == 1
        with pytest.raises(urllib3.exceptions.ProtocolError):
            w.next()
    assert server.store.wait_for_watchers("pods", 0)


def test_force_gone_next_watch(server: ApiServer, core: Any) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    server.faults.force_gone_next_watch("pods")
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(
            core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=5
        ):
            pass
    assert err.value.status == 410
    core.create_namespaced_pod(NS, pod("p"))
    with RawWatch(core.list_namespaced_pod, NS, resource_version=rv) as w:
        assert w.next()["type"] == "ADDED"  # only the next watch was affected


def test_expire_watches_sends_410_to_open_streams(server: ApiServer, core: Any) -> None:
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    with RawWatch(core.list_namespaced_pod, NS, resource_version=rv) as w:
        assert server.store.wait_for_watchers("pods", 1)
        assert server.faults.expire_watches("pods") == 1
        event = w.next()
        assert w.rest() == []
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


def test_clear_forgets_pending_faults(server: ApiServer, core: Any) -> None:
    server.faults.fail_next(5)
    server.faults.drop_connections(5)
    server.faults.clear()
    assert server.faults.pending == 0
    assert core.list_namespaced_pod(NS).items == []


def test_bad_fault_arguments_are_refused(server: ApiServer) -> None:
    with pytest.raises(ValueError, match="status"):
        server.faults.fail_next(1, status=200)
    with pytest.raises(ValueError, match="n must be"):
        server.faults.fail_next(0)
    with pytest.raises(ValueError, match="negative"):
        server.faults.add_latency(-1)


def test_restart_keeps_state_and_port(server: ApiServer, core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    url = server.url
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    with RawWatch(core.list_namespaced_pod, NS, resource_version=rv) as w:
        assert server.store.wait_for_watchers("pods", 1)
        server.stop()
        with pytest.raises(urllib3.exceptions.ProtocolError):
            w.next()
    server.start()
    assert server.url == url
    server.store.create("pods", {**pod("q"), "metadata": {"name": "q", "namespace": NS}})
    with RawWatch(core.list_namespaced_pod, NS, resource_version=rv) as w:
        assert w.next()["object"]["metadata"]["name"] == "q"
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["p", "q"]
