"""The three PATCH flavours a Kubernetes apiserver accepts, applied to plain JSON values.

* `apply_json_patch`: RFC 6902 (add, remove, replace, move, copy, test; `-` appends).
* `apply_merge_patch`: RFC 7386 (objects merge recursively, `null` deletes, anything else
  replaces, arrays included).
* `apply_strategic_merge_patch`: the common subset of Kubernetes' strategic merge patch for
  built-in kinds. Maps merge as in a merge patch. Lists whose field is known to carry a
  `patchMergeKey` (containers, volumes, env, ports, conditions, ...: see `MERGE_KEYS`) merge
  element-wise by that key; `metadata.finalizers` merges as a set of strings. Directives:
  `$patch: replace` and `$patch: delete` on maps and list elements, `$retainKeys`,
  `$deleteFromPrimitiveList/<field>`, and `$setElementOrder/<field>` (accepted, ordering ignored).
  Every other list is replaced whole. Not emulated: per-kind schemas (a field name has one merge
  key wherever it appears), `$patch: merge`, and element ordering.

All functions are pure: they never mutate their inputs and raise `PatchError` on a patch that
cannot apply (the HTTP layer answers 422) or `ValueError` on a malformed patch document (400).
"""

from __future__ import annotations

import copy
from typing import Any

from controller.sandbox.apiserver.resources import ApiError, ResourceType

Json = Any

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def check_patch_type(rt: ResourceType, patch_type: str) -> None:
    """A 415 `ApiError` unless `rt` accepts patches of `patch_type` (a media type)."""
    if patch_type == STRATEGIC_MERGE_PATCH and not rt.builtin:
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media "
            f"types include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
        )
    if patch_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media "
            f"types include: {JSON_PATCH}, {MERGE_PATCH}"
            + (f", {STRATEGIC_MERGE_PATCH}" if rt.builtin else ""),
        )


class PatchError(Exception):
    """The patch is well formed but does not apply to this object."""


# Field name -> patchMergeKey, for the built-in list fields the emulator merges by key. `ports`
# is resolved per element: containerPort for container ports, port for service ports.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "addresses": "type",
    "taints": "key",
    "topologySpreadConstraints": "topologyKey",
    "podIPs": "ip",
    "hostIPs": "ip",
    "resourceClaims": "name",
    "ports": "",
}
# Lists of strings the strategic merge patch treats as sets.
PRIMITIVE_MERGE_LISTS = frozenset({"finalizers"})


# ---------------------------------------------------------------------------- RFC 6902


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise ValueError(f"json patch path must be a string, got {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"json patch path {path!r} must start with '/'")
    return [_unescape(t) for t in path[1:].split("/")]


def _index(container: list[Json], token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    limit = len(container) if for_add else len(container) - 1
    if idx > limit:
        raise PatchError(f"array index {idx} out of bounds")
    return idx


def _parent(doc: Json, tokens: list[str]) -> Json:
    cur = doc
    for token in tokens[:-1]:
        if isinstance(cur, dict):
            if token not in cur:
                raise PatchError(f"path component {token!r} does not exist")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, for_add=False)]
        else:
            raise PatchError(f"cannot traverse into {type(cur).__name__} at {token!r}")
    return cur


def _get(doc: Json, tokens: list[str]) -> Json:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {'/'.join(tokens)!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchError(f"path {'/'.join(tokens)!r} does not exist")


def _add(doc: Json, tokens: list[str], value: Json) -> Json:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchError(f"cannot add to {type(parent).__name__}")
    return doc


def _remove(doc: Json, tokens: list[str]) -> tuple[Json, Json]:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {'/'.join(tokens)!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_add=False))
    raise PatchError(f"path {'/'.join(tokens)!r} does not exist")


def apply_json_patch(doc: Json, patch: Json) -> Json:
    """Apply an RFC 6902 operation list to a copy of `doc`."""
    if not isinstance(patch, list):
        raise ValueError("a json patch must be a JSON array of operations")
    result = copy.deepcopy(doc)
    for op in patch:
        if not isinstance(op, dict) or "op" not in op:
            raise ValueError(f"invalid json patch operation {op!r}")
        kind = op["op"]
        tokens = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ValueError(f"json patch {kind!r} operation needs a value")
        if kind == "add":
            result = _add(result, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            result, _ = _remove(result, tokens)
        elif kind == "replace":
            _get(result, tokens)  # must exist
            if tokens:
                result, _ = _remove(result, tokens)
            result = _add(result, tokens, copy.deepcopy(op["value"]))
        elif kind == "move":
            source = _pointer(op.get("from"))
            if tokens[: len(source)] == source and len(tokens) > len(source):
                raise PatchError("cannot move a value into one of its children")
            result, value = _remove(result, source)
            result = _add(result, tokens, value)
        elif kind == "copy":
            value = copy.deepcopy(_get(result, _pointer(op.get("from"))))
            result = _add(result, tokens, value)
        elif kind == "test":
            if _get(result, tokens) != op["value"]:
                raise PatchError(f"testing value {op.get('path')} failed")
        else:
            raise ValueError(f"unknown json patch operation {kind!r}")
    return result


# ---------------------------------------------------------------------------- RFC 7386


def apply_merge_patch(doc: Json, patch: Json) -> Json:
    """Apply an RFC 7386 merge patch; returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------------------- strategic merge

_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def _strip_directives(value: Json) -> Json:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not k.startswith("$") and v is not None
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _merge_key(field: str, items: list[Json]) -> str | None:
    if field not in MERGE_KEYS:
        return None
    key = MERGE_KEYS[field]
    if key:
        return key
    for item in items:  # ports: container ports vs service ports
        if isinstance(item, dict):
            if "containerPort" in item:
                return "containerPort"
            if "port" in item:
                return "port"
    return None


def _merge_list(field: str, original: Json, patch: list[Json]) -> list[Json]:
    if not isinstance(original, list):
        original = []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [
            _strip_directives(p)
            for p in patch
            if not (isinstance(p, dict) and p.get("$patch") == "replace")
        ]
    if field in PRIMITIVE_MERGE_LISTS:
        merged = list(original)
        for item in patch:
            if item not in merged:
                merged.append(item)
        return merged
    key = _merge_key(field, patch + original)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [_strip_directives(p) for p in patch]
    merged = [copy.deepcopy(o) for o in original]
    for item in patch:
        if key not in item:
            raise PatchError(f"map in list {field!r} has no merge key {key!r}")
        idx = next(
            (i for i, o in enumerate(merged) if isinstance(o, dict) and o.get(key) == item[key]),
            None,
        )
        directive = item.get("$patch")
        if directive == "delete":
            if idx is not None:
                merged.pop(idx)
            continue
        if idx is None:
            merged.append(_strip_directives(item))
        else:
            merged[idx] = _merge_map(merged[idx], item)
    return merged


def _merge_map(original: Json, patch: dict[str, Json]) -> Json:
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives(patch)
    if directive is not None and directive not in ("merge", "delete"):
        raise PatchError(f"unknown patch directive {directive!r}")
    result = copy.deepcopy(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    if retain is not None:
        if not isinstance(retain, list):
            raise ValueError("$retainKeys must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(_SET_ORDER):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            target = key[len(_DELETE_PRIMITIVE) :]
            if not isinstance(value, list):
                raise ValueError(f"{key} must be a list")
            if isinstance(result.get(target), list):
                result[target] = [v for v in result[target] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
            else:
                result[key] = _merge_map(result.get(key), value)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def apply_strategic_merge_patch(doc: Json, patch: Json) -> Json:
    """Apply a strategic merge patch (the subset described in the module docstring)."""
    if not isinstance(patch, dict):
        raise ValueError("a strategic merge patch must be a JSON object")
    return _merge_map(doc, patch)
