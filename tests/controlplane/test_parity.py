"""The same requests against the emulator and the real kube-apiserver must get the same answers:
the behaviours the controller relies on (conflicts, patch errors, delete answers, update rules).
A case failing on one plane only is a difference to fix in the emulator (or to list in its
README); see test_server.py for what only the real server does (schema validation, pruning)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.controlplane import RealControlPlane

pytestmark = pytest.mark.realcp

Raw = Callable[..., tuple[int, Any]]
MERGE = "application/merge-patch+json"


def raw_client(api: Any) -> Raw:
    def call(method: str, path: str, body: Any = None, ct: str = "application/json") -> Any:
        headers = {"Accept": "application/json", "Content-Type": ct}
        _, url, headers, _, _ = api.param_serialize(
            method, path, header_params=headers, auth_settings=["BearerToken"]
        )
        resp = api.call_api(method, url, header_params=headers, body=body)
        data = resp.read()
        return resp.status, json.loads(data) if data else None

    return call


@pytest.fixture(params=["emulator", "real"])
def raw(request: pytest.FixtureRequest) -> Iterator[Raw]:
    if request.param == "emulator":
        with ApiServer() as server, server.api_client() as api:
            if not server.store.list("namespaces"):
                server.store.create("namespaces", {"metadata": {"name": "default"}})
            yield raw_client(api)
    else:
        plane: RealControlPlane = request.getfixturevalue("real_control_plane")
        with plane.api_client() as api:
            yield raw_client(api)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def subnet(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": name},
        "spec": {"cidrBlock": "10.88.0.0/24", "protocol": "IPv4"},
    }


def test_custom_resource_delete_answers_a_status(raw: Raw) -> None:
    name = unique("s")
    assert raw("POST", "/apis/kubeovn.io/v1/subnets", subnet(name))[0] == 201
    code, body = raw("DELETE", f"/apis/kubeovn.io/v1/subnets/{name}")
    assert (code, body["kind"], body["status"]) == (200, "Status", "Success")


def test_pod_delete_answers_the_pod(raw: Raw) -> None:
    name = unique("p")
    pod = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert raw("POST", "/api/v1/namespaces/default/pods", pod)[0] == 201
    code, body = raw("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")
    assert (code, body["kind"], body["metadata"]["name"]) == (200, "Pod", name)


@pytest.mark.parametrize(
    "path, body",
    [
        ("/apis/kubeovn.io/v1/subnets", subnet("x")),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            {"metadata": {"name": "x"}, "spec": {"holderIdentity": "a"}},
        ),
    ],
    ids=["subnet", "lease"],
)
def test_update_without_resource_version_is_invalid(raw: Raw, path: str, body: Any) -> None:
    name = unique("u")
    body = {**body, "metadata": {"name": name}}
    assert raw("POST", path, body)[0] == 201
    code, status = raw("PUT", f"{path}/{name}", body)
    assert (code, status["reason"]) == (422, "Invalid")
    assert "metadata.resourceVersion" in status["message"]
    raw("DELETE", f"{path}/{name}")


def test_configmap_update_without_resource_version_is_allowed(raw: Raw) -> None:
    name = unique("c")
    body = {"metadata": {"name": name}, "data": {"a": "1"}}
    path = "/api/v1/namespaces/default/configmaps"
    assert raw("POST", path, body)[0] == 201
    code, updated = raw("PUT", f"{path}/{name}", {**body, "data": {"a": "2"}})
    assert (code, updated["data"]) == (200, {"a": "2"})
    raw("DELETE", f"{path}/{name}")


def test_patch_errors(raw: Raw) -> None:
    name = unique("c")
    path = "/api/v1/namespaces/default/configmaps"
    raw("POST", path, {"metadata": {"name": name}})
    stale = {"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}}
    assert raw("PATCH", f"{path}/{name}", stale, MERGE)[0] == 409
    wrong_type = {"metadata": {"annotations": {"a": 5}}}
    assert raw("PATCH", f"{path}/{name}", wrong_type, MERGE)[0] == 422
    failed_test = [{"op": "test", "path": "/metadata/name", "value": "other"}]
    assert raw("PATCH", f"{path}/{name}", failed_test, "application/json-patch+json")[0] == 422
    code, again = raw("POST", path, {"metadata": {"name": name}})
    assert (code, again["reason"]) == (409, "AlreadyExists")
    raw("DELETE", f"{path}/{name}")


def test_strategic_merge_patch_on_a_custom_resource_is_unsupported(raw: Raw) -> None:
    name = unique("s")
    raw("POST", "/apis/kubeovn.io/v1/subnets", subnet(name))
    patch = {"metadata": {"labels": {"a": "b"}}}
    ct = "application/strategic-merge-patch+json"
    assert raw("PATCH", f"/apis/kubeovn.io/v1/subnets/{name}", patch, ct)[0] == 415
    raw("DELETE", f"/apis/kubeovn.io/v1/subnets/{name}")


def test_list_items_of_built_in_kinds_carry_no_kind(raw: Raw) -> None:
    name = unique("c")
    path = "/api/v1/namespaces/default/configmaps"
    raw("POST", path, {"metadata": {"name": name}})
    _, listed = raw("GET", path)
    item = next(i for i in listed["items"] if i["metadata"]["name"] == name)
    assert "kind" not in item and "apiVersion" not in item
    assert listed["kind"] == "ConfigMapList"
    raw("DELETE", f"{path}/{name}")


def test_pod_generation_follows_spec_changes(raw: Raw) -> None:
    name = unique("g")
    path = "/api/v1/namespaces/default/pods"
    pod = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    _, created = raw("POST", path, pod)
    assert created["metadata"]["generation"] == 1
    _, annotated = raw("PATCH", f"{path}/{name}", {"metadata": {"annotations": {"a": "b"}}}, MERGE)
    assert annotated["metadata"]["generation"] == 1
    _, changed = raw("PATCH", f"{path}/{name}", {"spec": {"activeDeadlineSeconds": 60}}, MERGE)
    assert changed["metadata"]["generation"] == 2
    raw("DELETE", f"{path}/{name}?gracePeriodSeconds=0")
