"""Label and field selectors, parsed once per request and matched against raw object dicts.

Label selectors accept the full apimachinery syntax: `k`, `!k`, `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, joined by commas. Field selectors accept `f=v`,
`f==v` and `f!=v` joined by commas, over the field labels a resource supports (always
`metadata.name` and `metadata.namespace`). A malformed selector raises `ValueError` with a message
the HTTP layer turns into a 400 BadRequest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JsonDict = dict[str, Any]

_KEY_RE = re.compile(
    r"^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # exists, !, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        if self.op in ("!=", "notin"):
            return not has or value not in self.values
        if not has:
            return False
        try:
            number = int(str(value))
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.op == "gt" else number < bound


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unable to parse requirement: unbalanced ')' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append(text[start:])
    return parts


def _check_key(key: str, whole: str) -> str:
    if not key or len(key) > 316 or not _KEY_RE.match(key):
        raise ValueError(f"unable to parse requirement: invalid label key {key!r} in {whole!r}")
    return key


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse a label selector string; the empty selector (no requirements) matches everything."""
    if not text or not text.strip():
        return ()
    reqs: list[Requirement] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise ValueError(f"unable to parse requirement: empty requirement in {text!r}")
        m = _SET_RE.match(part)
        if m:
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            if not values and m.group(2) == "in":
                raise ValueError(f"unable to parse requirement: empty value set in {part!r}")
            reqs.append(Requirement(_check_key(m.group(1), text), m.group(2), values))
            continue
        if part.startswith("!"):
            reqs.append(Requirement(_check_key(part[1:].strip(), text), "!"))
            continue
        for token, op in (("==", "="), ("!=", "!="), ("=", "="), (">", "gt"), ("<", "lt")):
            if token in part:
                key, _, value = part.partition(token)
                value = value.strip()
                if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", value):
                    raise ValueError(f"unable to parse requirement: {value!r} is not an integer")
                reqs.append(Requirement(_check_key(key.strip(), text), op, (value,)))
                break
        else:
            reqs.append(Requirement(_check_key(part, text), "exists"))
    return tuple(reqs)


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
                    raise ValueError(f'field label not supported: {path}')
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
    return Selector(namespace, parse_label_selector(label_selector),
                    parse_field_selector(field_selector, allowed))

