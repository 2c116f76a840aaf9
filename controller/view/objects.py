"""`CachedObject`: a cached object whose controller formats, diffs or writes back its loose parts.

The Subnet, Namespace and SecurityGroup controllers normalise a spec the way kube-ovn does
(`format_subnet_spec`, the security group planner), compare annotations and status with what
they want, write the object back and name it in Events: they need the parts as the API server
holds them, not a model that already dropped what does not parse. This is that read, typed for
what every handler asks (name, being deleted, spec, status, annotations) with the object itself
for writes and Event references. A part that is not a mapping reads as an empty one; `obj` keeps
it as it is, for the handler that reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.cache.keys import meta_str, raw_field
from controller.kube.api import KubeObject


@dataclass(frozen=True, slots=True)
class CachedObject:
    name: str
    deleting: bool
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    annotations: Mapping[str, Any]
    obj: KubeObject

    @classmethod
    def of(cls, raw: KubeObject) -> CachedObject:
        meta = raw_field(raw, "metadata")
        return cls(
            name=meta_str(raw, "name"),
            deleting=bool(meta.get("deletionTimestamp")),
            spec=raw_field(raw, "spec"),
            status=raw_field(raw, "status"),
            annotations=raw_field(meta, "annotations"),
            obj=raw,
        )
