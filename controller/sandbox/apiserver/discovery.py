"""Discovery: the API groups and resources served, the server version, health and OpenAPI
paths, answered as a real kube-apiserver answers them (what the client and kubectl read first).
"""

from __future__ import annotations

from typing import Any

from controller.sandbox.apiserver import openapi, resources
from controller.sandbox.apiserver.records import dumps
from controller.sandbox.apiserver.resources import JsonDict
from controller.sandbox.apiserver.routes import method_not_allowed, not_found_path

SERVER_VERSION: JsonDict = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def discovery_resources(group: str, version: str) -> JsonDict:
    out: list[JsonDict] = []
    for rt in resources.in_group_version(group, version):
        entry: JsonDict = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        out.append(entry)
        if rt.has_status:
            out.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if rt.has_scale:
            out.append(
                {
                    "name": f"{rt.plural}/scale",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": out,
    }


def api_group(name: str, versions: list[str]) -> JsonDict:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def _json_answer(obj: Any) -> tuple[int, bytes, str]:
    return 200, dumps(obj), "application/json"


def discovery_answer(method: str, path: str, host: str, port: int) -> tuple[int, bytes, str]:
    """(status, body, content type) of a GET on a discovery, version, health or OpenAPI path."""
    if method != "GET":
        raise method_not_allowed(method, path)
    path = path.rstrip("/") or "/"
    if path in ("/healthz", "/livez", "/readyz"):
        return 200, b"ok", "text/plain; charset=utf-8"
    if path == "/version":
        return _json_answer(SERVER_VERSION)
    if path == "/openapi/v3":
        return _json_answer(openapi.root())
    if path.startswith("/openapi/v3/"):
        doc = openapi.group_version_doc(path.removeprefix("/openapi/v3/"))
        if doc is None:
            raise not_found_path()
        return _json_answer(doc)
    if path == "/api":
        return _json_answer(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{host}:{port}"}
                ],
            }
        )
    if path == "/api/v1":
        return _json_answer(discovery_resources("", "v1"))
    groups = resources.groups()
    if path == "/apis":
        return _json_answer(
            {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [api_group(g, v) for g, v in groups.items()],
            }
        )
    parts = [p for p in path.split("/") if p]
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
        return _json_answer(
            {"kind": "APIGroup", "apiVersion": "v1", **api_group(parts[1], groups[parts[1]])}
        )
    if (
        len(parts) == 3
        and parts[0] == "apis"
        and parts[1] in groups
        and parts[2] in groups[parts[1]]
    ):
        return _json_answer(discovery_resources(parts[1], parts[2]))
    raise not_found_path()
