"""Manifests as `load` takes them (YAML or JSON documents): objects with apiVersion/kind, or a
`kind: *List` of them, each resolved to its served resource, namespaces first so namespaced
objects may follow in any order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from controller.sandbox.apiserver.resources import (
    JsonDict,
    ResourceType,
    bad_request,
    resource_for_kind,
)


def manifest_objects(documents: Iterable[Any]) -> Iterator[tuple[ResourceType, JsonDict]]:
    """(resource, object) for every object of `documents`, namespaces first; 400 for a
    document that is not an object, and when reached, for a kind nothing serves."""
    objects: list[JsonDict] = []
    for doc in documents:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise bad_request(f"a manifest must be an object, got {type(doc).__name__}")
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            objects.extend(doc["items"])
        else:
            objects.append(doc)
    objects.sort(key=lambda o: o.get("kind") != "Namespace")
    for obj in objects:
        try:
            rt = resource_for_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        except KeyError as exc:
            raise bad_request(str(exc.args[0])) from None
        yield rt, obj
