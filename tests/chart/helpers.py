"""Render the Helm chart with Helm's own Go SDK and take the result apart for assertions.

Contract:

* `render(chart, values)` runs Helm's engine (through `helm_python`, the ctypes binding of
  libhelm's Go SDK) exactly as `helm template` would, including the values.schema.json check,
  and returns the parsed manifests. Nothing contacts a cluster or the network.
* `validate_k8s(obj)` checks one manifest against the Kubernetes OpenAPI schemas that
  `kubernetes-validate` ships (strict: unknown fields are errors).
* `rbac_permissions(manifests)` flattens every ClusterRole/Role rule into one `Permission` per
  (scope, apiGroup, resource, verb): the form a later test compares with the (verb, resource)
  pairs the controller is recorded using.
* `crd_validator(crd)` turns a CRD's openAPIV3Schema into a JSON-schema validator for custom
  objects. Unknown fields are rejected, where the API server would prune them silently: a field
  the controller writes but the schema lacks would otherwise vanish without a trace.
* `dockerfile_instructions(text)` parses a Dockerfile into (INSTRUCTION, arguments) pairs.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "kube-ovn-pod-controller"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SERVICEMONITOR_SCHEMA = Path(__file__).with_name("servicemonitor.schema.json")

RELEASE = "kopc"
NAMESPACE = "kube-system"
#: The newest Kubernetes minor whose schemas the pinned kubernetes-validate range is sure to ship.
KUBE_VERSION = "1.34"
NOTES = "NOTES.txt"


@dataclass(frozen=True, slots=True)
class Rendered:
    """One `helm template`: the raw files by template path and the parsed objects."""

    files: dict[str, str]
    manifests: list[dict[str, Any]]

    @property
    def notes(self) -> str:
        return next((text for path, text in self.files.items() if path.endswith(NOTES)), "")

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, got {len(found)}"
        return found[0]

    def kinds(self) -> list[str]:
        return sorted(m["kind"] for m in self.manifests)


def render(
    chart: helm_python.Chart,
    values: Mapping[str, Any] | None = None,
    *,
    namespace: str = NAMESPACE,
    release: str = RELEASE,
) -> Rendered:
    files = chart.render(
        values=dict(values) if values is not None else None,
        name=release,
        namespace=namespace,
        is_install=True,
    )
    manifests: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.endswith(NOTES):
            continue
        for doc in yaml.safe_load_all(files[path]):
            if doc is None:
                continue
            assert isinstance(doc, dict), f"{path}: a manifest must be a mapping, got {doc!r}"
            manifests.append(doc)
    return Rendered(files=files, manifests=manifests)


def validate_k8s(obj: Mapping[str, Any], version: str = KUBE_VERSION) -> None:
    """Raise `kubernetes_validate.ValidationError` (or SchemaNotFoundError) on a bad object."""
    kubernetes_validate.validate(dict(obj), version, strict=True)


# --- RBAC --------------------------------------------------------------------------------------
CLUSTER = ""


@dataclass(frozen=True, slots=True, order=True)
class Permission:
    """One granted verb on one resource; `namespace` is "" for cluster-wide grants."""

    namespace: str
    api_group: str
    resource: str
    verb: str
    resource_names: tuple[str, ...] = ()


def rbac_permissions(manifests: Iterable[Mapping[str, Any]]) -> set[Permission]:
    out: set[Permission] = set()
    for m in manifests:
        if m["kind"] not in ("ClusterRole", "Role"):
            continue
        namespace = m["metadata"].get("namespace", "") if m["kind"] == "Role" else CLUSTER
        for rule in m.get("rules") or []:
            names = tuple(sorted(rule.get("resourceNames") or ()))
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        out.add(Permission(namespace, group, resource, verb, names))
    return out


# --- CRDs --------------------------------------------------------------------------------------
def _close_objects(node: Any) -> Any:
    """Copy of an OpenAPI v3 schema where objects with declared properties refuse others."""
    if isinstance(node, dict):
        out = {key: _close_objects(value) for key, value in node.items()}
        if (
            out.get("type") == "object"
            and "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_close_objects(item) for item in node]
    return node


def crd_validator(crd: Mapping[str, Any], version: str = "v1") -> jsonschema.Draft4Validator:
    served = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert served, f"{crd['metadata']['name']} has no version {version}"
    schema = copy.deepcopy(served[0]["schema"]["openAPIV3Schema"])
    schema = _close_objects(schema)
    # Every object also carries the envelope the API server adds to any schema.
    props = schema.setdefault("properties", {})
    group = crd["spec"]["group"]
    props["apiVersion"] = {"enum": [f"{group}/{version}"]}
    props["kind"] = {"enum": [crd["spec"]["names"]["kind"]]}
    props["metadata"] = {"type": "object"}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    # OpenAPI v3.0 schemas are a JSON-schema draft-4 dialect (exclusiveMinimum is a boolean).
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


# --- Deployment --------------------------------------------------------------------------------
def container(rendered: Rendered) -> dict[str, Any]:
    containers = rendered.one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result


def flags(args: Iterable[str]) -> dict[str, str]:
    """`--name=value` arguments as {name: value}; an argument repeated is an error."""
    out: dict[str, str] = {}
    for arg in args:
        assert arg.startswith("--") and "=" in arg, f"not a --flag=value argument: {arg!r}"
        name, _, value = arg[2:].partition("=")
        assert name not in out, f"--{name} given twice"
        out[name] = value
    return out


def load_json(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


# --- Dockerfile --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Instruction:
    name: str
    args: str

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form instruction (ENTRYPOINT ["a", "b"]), else None."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        parsed = json.loads(text)
        assert isinstance(parsed, list) and all(isinstance(p, str) for p in parsed)
        return parsed

    def words(self) -> list[str]:
        return shlex.split(self.args)


def dockerfile_instructions(text: str) -> list[Instruction]:
    """Instructions in order; comments dropped, backslash continuations joined."""
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if not full:
            continue
        name, _, args = full.partition(" ")
        out.append(Instruction(name.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out
