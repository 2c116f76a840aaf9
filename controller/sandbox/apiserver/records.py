"""The stored form of an object and what a list returns: values shared by the store, its
watches and the HTTP layer.

Each stored object keeps its JSON serialization, built once at write time, so list bodies and
watch events are assembled by joining bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from controller.sandbox.apiserver.resources import JsonDict

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Stored:
    """One version of one object: the dict (never mutated) and its JSON bytes."""

    obj: JsonDict
    raw: bytes
    rv: int

    @staticmethod
    def of(obj: JsonDict) -> Stored:
        # kind and apiVersion go first, so a list can cut them off its items by slicing bytes.
        ordered = {"kind": obj["kind"], "apiVersion": obj["apiVersion"]}
        ordered.update(obj)
        return Stored(ordered, dumps(ordered), int(obj["metadata"]["resourceVersion"]))

    def list_item(self, prefix: bytes) -> bytes:
        """The JSON without its leading `"kind":..,"apiVersion":..,` (`prefix`), if present."""
        if self.raw.startswith(prefix):
            return b"{" + self.raw[len(prefix) :]
        return self.raw


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[Stored]
    resource_version: int
    continue_token: str | None
    remaining: int | None


def stamped(old: Stored, rv: int, **meta_updates: Any) -> Stored:
    """`old` at resourceVersion `rv`, with these metadata fields set."""
    obj = json.loads(old.raw)
    obj["metadata"]["resourceVersion"] = str(rv)
    obj["metadata"].update(meta_updates)
    return Stored.of(obj)
