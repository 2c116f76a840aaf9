"""Label and field selectors, parsed once per request and matched against raw object dicts.

Label selectors accept the full apimachinery syntax: `k`, `!k`, `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, joined by commas; they are parsed and matched by
the cache's parser (controller/cache/labels.py), the one the controller's listers use. Field
selectors accept `f=v`, `f==v` and `f!=v` joined by commas, over the field labels a resource
supports (always `metadata.name` and `metadata.namespace`). A malformed selector raises
`ValueError` with a message the HTTP layer turns into a 400 BadRequest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.cache import labels
from controller.cache.labels import Requirement, SelectorError

JsonDict = dict[str, Any]


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse a label selector string; the empty selector (no requirements) matches everything.

    The parser is the cache's (controller/cache/labels.py); this wrapper only words its errors
    like the API server does.
    """
    try:
        return labels.parse(text or "").requirements
    except SelectorError as e:
        raise ValueError(f"unable to parse requirement: {e}") from None


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: str
    equal: bool
    value: str


def parse_field_selector(
    text: str | None, allowed: tuple[str, ...]
) -> tuple[FieldRequirement, ...]:
    """Parse a field selector, refusing field labels outside `allowed` like a real apiserver."""
    if not text or not text.strip():
        return ()
    reqs: list[FieldRequirement] = []
    for raw in text.split(","):
        part = raw.strip()
        for token, equal in (("!=", False), ("==", True), ("=", True)):
            if token in part:
                path, _, value = part.partition(token)
                path = path.strip()
                if path not in allowed:
                    raise ValueError(f"field label not supported: {path}")
                reqs.append(FieldRequirement(path, equal, value.strip()))
                break
        else:
            raise ValueError(f"invalid selector: {part!r}; can't understand {part!r}")
    return tuple(reqs)


def field_value(obj: JsonDict, path: str) -> str:
    """The string form of a dotted field, as field selectors compare it ("" when absent)."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed namespace + label + field filter over raw objects."""

    namespace: str | None = None
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldRequirement, ...] = ()

    @property
    def is_everything(self) -> bool:
        return self.namespace is None and not self.labels and not self.fields

    def matches(self, obj: JsonDict) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.labels:
            labels = meta.get("labels") or {}
            if not all(r.matches(labels) for r in self.labels):
                return False
        return all((field_value(obj, f.path) == f.value) == f.equal for f in self.fields)


def build_selector(
    namespace: str | None,
    label_selector: str | None,
    field_selector: str | None,
    field_labels: tuple[str, ...],
) -> Selector:
    allowed = ("metadata.name", "metadata.namespace", *field_labels)
    return Selector(
        namespace,
        parse_label_selector(label_selector),
        parse_field_selector(field_selector, allowed),
    )
