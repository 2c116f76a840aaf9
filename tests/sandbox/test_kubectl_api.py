"""The requests kubectl makes, answered as kube-apiserver answers them: server-side Tables
(`Accept: ...;as=Table;v=v1;g=meta.k8s.io`), OpenAPI v3 discovery that tells kubectl the server
validates (`fieldValidation`), strict validation of the custom resources against the chart's
CRD schemas, and the scheduler stand-in that binds pods made without a node."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.apiserver.tables import human_duration, wants_table
from controller.sandbox.cluster.scheduler import PodScheduler
from controller.sandbox.cluster.workloads import POD_NAME_LABEL, StatefulSetController

# What kubectl get sends.
TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


def _request(
    server: ApiServer, path: str, *, accept: str = "application/json", body: Any = None
) -> tuple[int, Any]:
    req = urllib.request.Request(
        server.url + path,
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Accept": accept, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _pod(name: str, *, ready: bool | None, deleting: bool = False) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]},
    }
    if ready is not None:
        pod["status"] = {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 2},
                {"name": "b", "ready": ready, "restartCount": 1},
            ],
        }
    if deleting:
        pod["metadata"]["finalizers"] = ["test/keep"]
    return pod


def test_wants_table_reads_kubectls_accept_header() -> None:
    assert wants_table(TABLE)
    assert not wants_table("application/json")
    assert not wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (400 * 86400, "400d"),
    ],
)
def test_ages_print_as_kubernetes_prints_them(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_pods_table_has_kubectls_columns_and_ready_from_the_containers(
    server: ApiServer,
) -> None:
    store = server.store
    store.create("pods", _pod("both-ready", ready=True))
    store.create("pods", _pod("one-ready", ready=False))
    store.create("pods", _pod("pending", ready=None))
    store.create("pods", _pod("going", ready=None, deleting=True))
    store.delete("pods", "default", "going", grace_period_seconds=0)
    code, table = _request(server, "/api/v1/namespaces/default/pods", accept=TABLE)
    assert code == 200 and table["kind"] == "Table"
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]
    cells = {row["cells"][0]: row["cells"][1:4] for row in table["rows"]}
    assert cells == {
        "both-ready": ["2/2", "Running", 3],
        "one-ready": ["1/2", "Running", 3],
        "pending": ["0/2", "Pending", 0],
        "going": ["0/2", "Terminating", 0],
    }
    meta = table["rows"][0]["object"]
    assert meta["kind"] == "PartialObjectMetadata" and meta["metadata"]["namespace"] == "default"


def test_a_single_get_and_include_object(server: ApiServer) -> None:
    server.store.create("pods", _pod("p", ready=True))
    path = "/api/v1/namespaces/default/pods/p"
    code, table = _request(server, path + "?includeObject=Object", accept=TABLE)
    assert code == 200 and len(table["rows"]) == 1
    assert table["rows"][0]["object"]["spec"]["containers"][0]["name"] == "a"
    _, plain = _request(server, path)
    assert plain["kind"] == "Pod"


def test_custom_resources_print_their_crds_printer_columns(server: ApiServer) -> None:
    server.store.create(
        "subnets",
        {
            "metadata": {"name": "s"},
            "spec": {"cidrBlock": "10.9.0.0/24", "protocol": "IPv4", "excludeIps": ["10.9.0.1"]},
            "status": {"v4availableIPs": 252},
        },
    )
    _, table = _request(server, "/apis/kubeovn.io/v1/subnets", accept=TABLE)
    names = [c["name"] for c in table["columnDefinitions"]]
    # Name, then the CRD's additionalPrinterColumns; no Age when the CRD declares columns
    assert names[:5] == ["Name", "Provider", "Vpc", "Protocol", "CIDR"] and "Age" not in names
    row = dict(zip(names, table["rows"][0]["cells"], strict=True))
    assert row["CIDR"] == "10.9.0.0/24" and row["V4Available"] == 252
    assert row["ExcludeIPs"] == '["10.9.0.1"]' and row["Vpc"] is None


def test_events_table(server: ApiServer) -> None:
    server.store.create(
        "events",
        {
            "metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "default"},
            "type": "Warning",
            "reason": "AcquireAddressFailed",
            "message": "no address",
            "lastTimestamp": "2026-01-01T00:00:00Z",
        },
    )
    _, table = _request(server, "/api/v1/namespaces/default/events", accept=TABLE)
    names = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert names == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert table["rows"][0]["cells"][1:5] == [
        "Warning",
        "AcquireAddressFailed",
        "pod/web-0",
        "no address",
    ]


def test_openapi_v3_tells_kubectl_the_server_validates(server: ApiServer) -> None:
    code, root = _request(server, "/openapi/v3")
    assert code == 200 and {"api/v1", "apis/kubeovn.io/v1"} <= set(root["paths"])
    code, doc = _request(server, root["paths"]["apis/kubeovn.io/v1"]["serverRelativeURL"])
    assert code == 200
    patch = doc["paths"]["/apis/kubeovn.io/v1/subnets/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "kubeovn.io",
        "version": "v1",
        "kind": "Subnet",
    }
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
    assert (
        "/api/v1/namespaces/{namespace}/pods/{name}"
        in _request(server, "/openapi/v3/api/v1")[1]["paths"]
    )
    assert _request(server, "/openapi/v3/apis/nothing/v1")[0] == 404


def test_strict_validation_refuses_unknown_fields_of_a_custom_resource(server: ApiServer) -> None:
    typo = {
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": "typo"},
        "spec": {"cidrBlok": "10.8.0.0/24"},
    }
    code, status = _request(server, "/apis/kubeovn.io/v1/subnets?fieldValidation=Strict", body=typo)
    assert code == 400 and status["reason"] == "BadRequest"
    assert status["message"] == (
        'Subnet in version "v1" cannot be handled as a Subnet: '
        'strict decoding error: unknown field "spec.cidrBlok"'
    )
    # without Strict (kubectl --validate=false) the field is accepted, as the real server prunes
    assert _request(server, "/apis/kubeovn.io/v1/subnets", body=typo)[0] == 201
    good = {**typo, "metadata": {"name": "good"}, "spec": {"cidrBlock": "10.8.0.0/24"}}
    assert (
        _request(server, "/apis/kubeovn.io/v1/subnets?fieldValidation=Strict", body=good)[0] == 201
    )


def test_the_scheduler_binds_pods_without_a_node_round_robin(server: ApiServer) -> None:
    store = server.store
    for name in ("a", "b", "c"):
        store.create("pods", _pod(name, ready=None))
    other = _pod("elsewhere", ready=None)
    other["spec"]["schedulerName"] = "my-scheduler"
    store.create("pods", other)
    pinned = _pod("pinned", ready=None)
    pinned["spec"]["nodeName"] = "n9"
    store.create("pods", pinned)
    scheduler = PodScheduler(store, ["n1", "n2"])
    assert scheduler.schedule_pending() == 3
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in store.list("pods")}
    assert nodes == {"a": "n1", "b": "n2", "c": "n1", "elsewhere": None, "pinned": "n9"}
    assert scheduler.schedule_pending() == 0


def test_the_scheduler_thread_binds_a_pod_created_later(server: ApiServer) -> None:
    scheduler = PodScheduler(server.store, ["n1"]).start()
    try:
        server.store.create("pods", _pod("late", ready=None))
        server.store.wait_for(
            "pods",
            "default",
            "late",
            lambda pod: bool(((pod or {}).get("spec") or {}).get("nodeName")),
            timeout=10,
        )
    finally:
        scheduler.stop()


def _sts(replicas: int) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def _patch(server: ApiServer, path: str, body: Any) -> tuple[int, Any]:
    req = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_scale_subresource_as_kubectl_scale_uses_it(server: ApiServer) -> None:
    server.store.create("statefulsets", _sts(2))
    _, resources = _request(server, "/apis/apps/v1")
    scale = next(r for r in resources["resources"] if r["name"] == "statefulsets/scale")
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    path = "/apis/apps/v1/namespaces/default/statefulsets/web/scale"
    code, got = _request(server, path)
    assert code == 200 and got["kind"] == "Scale"
    assert got["spec"] == {"replicas": 2} and got["status"]["selector"] == "app=web"
    code, got = _patch(server, path, {"spec": {"replicas": 5}})
    assert code == 200 and got["spec"]["replicas"] == 5
    assert server.store.get("statefulsets", "default", "web")["spec"]["replicas"] == 5
    assert _patch(server, path, {"spec": {"replicas": -1}})[0] == 422
    assert _request(server, "/api/v1/namespaces/default/pods/x/scale")[0] == 404


def test_the_statefulset_controller_keeps_ordinals_and_status(server: ApiServer) -> None:
    store = server.store
    store.create("statefulsets", _sts(3))
    controller = StatefulSetController(store)
    controller.sync_all()
    pods = {p["metadata"]["name"]: p for p in store.list("pods", "default")}
    assert sorted(pods) == ["web-0", "web-1", "web-2"]
    web1 = pods["web-1"]
    assert web1["metadata"]["labels"] == {"app": "web", POD_NAME_LABEL: "web-1"}
    assert web1["spec"]["hostname"] == "web-1" and web1["spec"]["subdomain"] == "web"
    assert web1["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
    store.patch(
        "pods",
        "default",
        "web-0",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        subresource="status",
    )
    store.patch("statefulsets", "default", "web", {"spec": {"replicas": 1}})
    controller.sync_all()
    controller.sync_all()  # the status of the pass after the deletes
    assert [p["metadata"]["name"] for p in store.list("pods", "default")] == ["web-0"]
    status = store.get("statefulsets", "default", "web")["status"]
    assert (status["replicas"], status["readyReplicas"]) == (1, 1)
