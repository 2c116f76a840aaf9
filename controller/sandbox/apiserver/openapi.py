"""OpenAPI v3 discovery and strict field validation for the API server emulator, as far as
kubectl's `apply`/`create` validation needs them.

kubectl validates by asking the server to (`fieldValidation=Strict` on the request) once the
server's OpenAPI v3 document of the group-version lists the query parameter on the kind's PATCH
operation (k8s.io/cli-runtime pkg/resource/query_param_verifier_v3.go); without a document it
falls back to downloading OpenAPI v2 and fails. So:

* `root(base)` is `/openapi/v3`: one entry per served group-version;
* `group_version_doc(path)` is `/openapi/v3/<api/v1 | apis/G/V>`: every resource's item path with
  a PATCH operation carrying `x-kubernetes-group-version-kind` and the `fieldValidation`
  parameter (no schemas: kubectl then patches built-ins with its compiled-in types and custom
  resources with a JSON merge patch, as against a real server);
* `unknown_fields(rt, obj)` is the strict check: for the custom resources, the fields their
  chart CRD's structural schema does not declare (`x-kubernetes-preserve-unknown-fields`
  honoured), named as the real server names them (`spec.cidrBlok`); built-in kinds are not
  checked (the emulator has no schemas for them).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from controller.sandbox.apiserver import resources
from controller.sandbox.apiserver.resources import JsonDict, ResourceType

CRD_DIR = Path(__file__).resolve().parents[3] / "charts" / "kube-ovn-pod-controller" / "templates"
_HELM_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)


@functools.cache
def chart_crds() -> tuple[JsonDict, ...]:
    """The chart's CustomResourceDefinitions, its Helm template lines dropped."""
    out: list[JsonDict] = []
    for path in sorted(CRD_DIR.glob("crds/*.yaml")):
        text = _HELM_COMMENT.sub("", path.read_text())
        text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("{{"))
        out.extend(
            doc
            for doc in yaml.safe_load_all(text)
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
        )
    return tuple(out)


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _group_versions() -> dict[str, list[ResourceType]]:
    out: dict[str, list[ResourceType]] = {}
    for rt in resources.RESOURCES:
        out.setdefault(_gv_path(rt.group, rt.version), []).append(rt)
    return out


def root() -> JsonDict:
    paths = {}
    for gv in _group_versions():
        digest = hashlib.sha256(repr(group_version_doc(gv)).encode()).hexdigest()[:16].upper()
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}


_FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "description": "Ignore, Warn or Strict: what to do with unknown or duplicate fields",
    "schema": {"type": "string", "uniqueItems": True},
}


@functools.cache
def group_version_doc(gv: str) -> JsonDict | None:
    kinds = _group_versions().get(gv)
    if kinds is None:
        return None
    paths: JsonDict = {}
    for rt in kinds:
        prefix = f"/{gv}/namespaces/{{namespace}}" if rt.namespaced else f"/{gv}"
        paths[f"{prefix}/{rt.plural}/{{name}}"] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "parameters": [_FIELD_VALIDATION],
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": rt.group,
                    "version": rt.version,
                    "kind": rt.kind,
                },
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes API server emulator", "version": "v1"},
        "paths": paths,
    }


@functools.cache
def _crd_schemas() -> dict[tuple[str, str, str], JsonDict]:
    out: dict[tuple[str, str, str], JsonDict] = {}
    for crd in chart_crds():
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(schema, dict):
                kind = (spec.get("names") or {}).get("kind", "")
                out[(spec.get("group", ""), version.get("name", ""), kind)] = schema
    return out


_ALWAYS = ("apiVersion", "kind", "metadata")


def _unknown(schema: Mapping[str, Any], value: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, Mapping) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(props, Mapping) and key in props:
                yield from _unknown(props[key], item, where)
            elif isinstance(extra, Mapping):
                yield from _unknown(extra, item, where)
            elif props is not None and not (not path and key in _ALWAYS):
                yield where
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _unknown(schema["items"], item, f"{path}[{i}]")


def unknown_fields(rt: ResourceType, obj: Any) -> list[str]:
    """The fields of `obj` that the kind's schema does not declare ([] when it has none here)."""
    schema = _crd_schemas().get((rt.group, rt.version, rt.kind))
    if schema is None or not isinstance(obj, dict):
        return []
    return list(_unknown(schema, obj, ""))


def strict_error(rt: ResourceType, fields: list[str]) -> resources.ApiError:
    listed = ", ".join(f'unknown field "{f}"' for f in fields)
    return resources.ApiError(
        400,
        "BadRequest",
        f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
        f"strict decoding error: {listed}",
    )
