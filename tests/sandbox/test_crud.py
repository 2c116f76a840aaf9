"""CRUD conformance through the official client, for every served resource type."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from controller.sandbox.apiserver.resources import RESOURCES
from controller.sandbox.apiserver.server import ApiServer
from tests.sandbox.helpers import pod

NS = "default"


@dataclass(frozen=True)
class Typed:
    """create/read/list/replace/delete through one typed API class (CoreV1Api, AppsV1Api, ...)."""

    api: str
    suffix: str
    namespaced: bool
    body: dict[str, Any]

    def _fn(self, clients: dict[str, Any], verb: str) -> Any:
        return getattr(clients[self.api], f"{verb}_{self.suffix}")

    def _ns(self) -> tuple[str, ...]:
        return (NS,) if self.namespaced else ()

    def create(self, clients: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        out = self._fn(clients, "create")(*self._ns(), body)
        return clients["api"].sanitize_for_serialization(out)

    def read(self, clients: dict[str, Any], name: str) -> dict[str, Any]:
        out = self._fn(clients, "read")(name, *self._ns())
        return clients["api"].sanitize_for_serialization(out)

    def list_names(self, clients: dict[str, Any]) -> list[str]:
        out = self._fn(clients, "list")(*self._ns())
        return [i.metadata.name for i in out.items]

    def replace(self, clients: dict[str, Any], name: str, body: dict[str, Any]) -> dict[str, Any]:
        out = self._fn(clients, "replace")(name, *self._ns(), body)
        return clients["api"].sanitize_for_serialization(out)

    def delete(self, clients: dict[str, Any], name: str) -> None:
        self._fn(clients, "delete")(name, *self._ns())


@dataclass(frozen=True)
class Custom:
    group: str
    plural: str
    namespaced: bool
    body: dict[str, Any]

    def _args(self) -> tuple[str, ...]:
        if self.namespaced:
            return (self.group, "v1", NS, self.plural)
        return (self.group, "v1", self.plural)

    def _fn(self, clients: dict[str, Any], verb: str) -> Any:
        scope = "namespaced" if self.namespaced else "cluster"
        name = f"{verb}_{scope}_custom_object"
        return getattr(clients["custom"], name)

    def create(self, clients: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        return self._fn(clients, "create")(*self._args(), body)

    def read(self, clients: dict[str, Any], name: str) -> dict[str, Any]:
        return self._fn(clients, "get")(*self._args(), name)

    def list_names(self, clients: dict[str, Any]) -> list[str]:
        out = self._fn(clients, "list")(*self._args())
        return [i["metadata"]["name"] for i in out["items"]]

    def replace(self, clients: dict[str, Any], name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._fn(clients, "replace")(*self._args(), name, body)

    def delete(self, clients: dict[str, Any], name: str) -> None:
        self._fn(clients, "delete")(*self._args(), name)


CASES: dict[str, Typed | Custom] = {
    "pods": Typed("core", "namespaced_pod", True, pod("x")),
    "namespaces": Typed("core", "namespace", False, {"metadata": {"name": "x"}}),
    "nodes": Typed("core", "node", False, {"metadata": {"name": "x"}}),
    "configmaps": Typed(
        "core", "namespaced_config_map", True, {"metadata": {"name": "x"}, "data": {"k": "v"}}
    ),
    "events": Typed(
        "core",
        "namespaced_event",
        True,
        {
            "metadata": {"name": "x"},
            "reason": "Test",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS},
        },
    ),
    "services": Typed(
        "core",
        "namespaced_service",
        True,
        {"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}},
    ),
    "statefulsets": Typed(
        "apps",
        "namespaced_stateful_set",
        True,
        {
            "metadata": {"name": "x"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "serviceName": "s",
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod("t")["spec"]},
            },
        },
    ),
    "leases": Typed(
        "coordination",
        "namespaced_lease",
        True,
        {"metadata": {"name": "x"}, "spec": {"holderIdentity": "me"}},
    ),
    "subnets": Custom(
        "kubeovn.io",
        "subnets",
        False,
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Subnet",
            "metadata": {"name": "x"},
            "spec": {"cidrBlock": "10.16.0.0/16"},
        },
    ),
    "ips": Custom(
        "kubeovn.io",
        "ips",
        False,
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "IP",
            "metadata": {"name": "x"},
            "spec": {"ipAddress": "10.16.0.2"},
        },
    ),
    "vlans": Custom(
        "kubeovn.io",
        "vlans",
        False,
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Vlan",
            "metadata": {"name": "x"},
            "spec": {"id": 10},
        },
    ),
    "vpcs": Custom(
        "kubeovn.io",
        "vpcs",
        False,
        {"apiVersion": "kubeovn.io/v1", "kind": "Vpc", "metadata": {"name": "x"}, "spec": {}},
    ),
    "security-groups": Custom(
        "kubeovn.io",
        "security-groups",
        False,
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "SecurityGroup",
            "metadata": {"name": "x"},
            "spec": {"allowSameGroupTraffic": True},
        },
    ),
    "network-attachment-definitions": Custom(
        "k8s.cni.cncf.io",
        "network-attachment-definitions",
        True,
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "x"},
            "spec": {"config": "{}"},
        },
    ),
    "virtualmachines": Custom(
        "kubevirt.io",
        "virtualmachines",
        True,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "x"},
            "spec": {"running": True},
        },
    ),
    "virtualmachineinstances": Custom(
        "kubevirt.io",
        "virtualmachineinstances",
        True,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "x"},
            "spec": {},
        },
    ),
}


@pytest.fixture
def clients(api: Any, core: Any, custom: Any, apps: Any, coordination: Any) -> dict[str, Any]:
    return {"api": api, "core": core, "custom": custom, "apps": apps, "coordination": coordination}


def test_every_served_resource_has_a_crud_case() -> None:
    assert {r.plural for r in RESOURCES} == set(CASES)


@pytest.mark.parametrize("resource", sorted(CASES))
def test_crud_round_trip(resource: str, clients: dict[str, Any]) -> None:
    case = CASES[resource]
    created = case.create(clients, case.body)
    meta = created["metadata"]
    assert meta["name"] == "x"
    assert meta["uid"] and meta["creationTimestamp"] and int(meta["resourceVersion"]) > 0
    assert case.read(clients, "x")["metadata"]["uid"] == meta["uid"]
    assert "x" in case.list_names(clients)

    with pytest.raises(client.ApiException) as exists:
        case.create(clients, case.body)
    assert exists.value.status == 409
    assert '"reason":"AlreadyExists"' in exists.value.body

    current = case.read(clients, "x")
    current["metadata"].setdefault("labels", {})["edited"] = "yes"
    replaced = case.replace(clients, "x", current)
    assert replaced["metadata"]["labels"]["edited"] == "yes"
    assert int(replaced["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])

    stale = dict(current, metadata={**current["metadata"], "labels": {"edited": "again"}})
    with pytest.raises(client.ApiException) as conflict:
        case.replace(clients, "x", stale)  # carries the superseded resourceVersion
    assert conflict.value.status == 409
    assert '"reason":"Conflict"' in conflict.value.body

    case.delete(clients, "x")
    with pytest.raises(client.ApiException) as missing:
        case.read(clients, "x")
    assert missing.value.status == 404
    assert '"reason":"NotFound"' in missing.value.body
    assert "x" not in case.list_names(clients)


def test_kubeconfig_is_loaded_by_the_official_loader(server: ApiServer, tmp_path: Path) -> None:
    path = server.write_kubeconfig(tmp_path / "sub" / "kubeconfig")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    assert cfg.host == server.url
    with client.ApiClient(cfg) as api_client:
        names = {n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items}
    assert {"default", "kube-system"} <= names
    assert path.stat().st_mode & 0o777 == 0o600


def test_discovery(api: Any) -> None:
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    core_resources = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert core_resources["pods"].namespaced and core_resources["pods"].kind == "Pod"
    assert "pods/status" in core_resources
    assert not core_resources["nodes"].namespaced
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert {"apps", "coordination.k8s.io", "kubeovn.io", "k8s.cni.cncf.io", "kubevirt.io"} <= set(
        groups
    )
    apps = client.AppsV1Api(api).get_api_resources()
    assert {r.name for r in apps.resources} == {
        "statefulsets",
        "statefulsets/status",
        "statefulsets/scale",
    }


def test_unknown_paths_answer_a_status(server: ApiServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{server.url}/api/v1/widgets", timeout=5)
    assert err.value.code == 404
    assert b'"kind":"Status"' in err.value.read()
    with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as resp:
        assert resp.read() == b"ok"


def test_generate_name(core: Any) -> None:
    first = core.create_namespaced_pod(
        NS, {"metadata": {"generateName": "web-"}, "spec": pod("")["spec"]}
    )
    second = core.create_namespaced_pod(
        NS, {"metadata": {"generateName": "web-"}, "spec": pod("")["spec"]}
    )
    assert first.metadata.name.startswith("web-") and len(first.metadata.name) == 9
    assert first.metadata.name != second.metadata.name


def test_create_validation(core: Any) -> None:
    with pytest.raises(client.ApiException) as no_ns:
        core.create_namespaced_pod("nowhere", pod("p"))
    assert no_ns.value.status == 404 and 'namespaces \\"nowhere\\" not found' in no_ns.value.body
    with pytest.raises(client.ApiException) as bad_name:
        core.create_namespaced_pod(NS, pod("Bad_Name"))
    assert bad_name.value.status == 422
    with pytest.raises(client.ApiException) as no_name:
        core.create_namespaced_pod(NS, {"metadata": {}, "spec": pod("p")["spec"]})
    assert no_name.value.status == 422
    with pytest.raises(client.ApiException) as with_rv:
        core.create_namespaced_pod(NS, {"metadata": {"name": "p", "resourceVersion": "3"}})
    assert with_rv.value.status == 400


def test_replace_name_mismatch_is_bad_request(core: Any) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    with pytest.raises(client.ApiException) as err:
        core.replace_namespaced_config_map("a", NS, {"metadata": {"name": "b"}})
    assert err.value.status == 400


def test_noop_update_keeps_the_resource_version(core: Any) -> None:
    created = core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    same = core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    assert same.metadata.resource_version == created.metadata.resource_version
    changed = core.patch_namespaced_config_map("a", NS, {"data": {"k": "w"}})
    assert int(changed.metadata.resource_version) > int(created.metadata.resource_version)


def test_in_process_store_and_http_agree(server: ApiServer, core: Any) -> None:
    server.store.create(
        "pods",
        {
            "metadata": {"name": "seeded", "namespace": NS},
            "spec": pod("")["spec"],
            "status": {"phase": "Running"},
        },
    )
    got = core.read_namespaced_pod("seeded", NS)
    assert got.status.phase == "Running"  # in-process creates keep the given status
    core.patch_namespaced_pod("seeded", NS, {"metadata": {"labels": {"a": "b"}}})
    assert server.store.get("pods", NS, "seeded")["metadata"]["labels"] == {"a": "b"}
    http_created = core.create_namespaced_pod(
        NS, {**pod("viahttp"), "status": {"phase": "Running"}}
    )
    assert http_created.status.phase == "Pending"  # HTTP creates drop status, then default it


def test_request_log_records_verbs(server: ApiServer, core: Any) -> None:
    core.create_namespaced_pod(NS, pod("p"))
    core.read_namespaced_pod("p", NS)
    core.list_namespaced_pod(NS)
    core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Running"}})
    core.delete_namespaced_pod("p", NS)
    used = server.verbs_used()
    assert {
        ("", "pods", "create"),
        ("", "pods", "get"),
        ("", "pods", "list"),
        ("", "pods/status", "patch"),
        ("", "pods", "delete"),
    } <= used
    last = server.request_log[-1]
    assert (last.method, last.namespace, last.name, last.code) == ("DELETE", NS, "p", 200)


def test_protocol_errors_answer_a_status(server: ApiServer) -> None:
    for method in ("OPTIONS", "BREW"):
        req = urllib.request.Request(f"{server.url}/api/v1/pods", method=method)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code in (405, 501)
        status = json.loads(err.value.read())
        assert status["kind"] == "Status" and status["code"] == err.value.code


def test_request_hook_and_bounded_log() -> None:
    with ApiServer(request_log_limit=2) as small, small.api_client() as api:
        seen: list[tuple[str, int]] = []
        small.add_request_hook(lambda rec: seen.append((rec.verb, rec.code)))
        small_core = client.CoreV1Api(api)
        small_core.list_namespace()
        small_core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}})
        small_core.read_namespaced_config_map("c", NS)
        assert seen == [("list", 200), ("create", 201), ("get", 200)]
        assert [r.verb for r in small.request_log] == ["create", "get"]
        assert ("", "namespaces", "list") in small.verbs_used()


@pytest.mark.parametrize("resource", sorted(CASES))
def test_update_without_resource_version(resource: str, clients: dict[str, Any]) -> None:
    # Leases and custom resources refuse an unconditional update, as their real registries do.
    case = CASES[resource]
    case.create(clients, case.body)
    current = case.read(clients, "x")
    del current["metadata"]["resourceVersion"]
    current["metadata"].setdefault("labels", {})["edited"] = "yes"
    rt = next(r for r in RESOURCES if r.plural == resource)
    if rt.unconditional_update:
        assert case.replace(clients, "x", current)["metadata"]["labels"]["edited"] == "yes"
    else:
        with pytest.raises(client.ApiException) as err:
            case.replace(clients, "x", current)
        assert err.value.status == 422
        assert "metadata.resourceVersion" in err.value.body
    case.delete(clients, "x")
