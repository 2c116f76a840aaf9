"""Label selectors (apimachinery `labels.Parse` and `labels.SelectorFromSet`), for listers.

A selector is parsed once into a `Selector` and then matched against label mappings. The string
syntax is the API server's: comma-separated requirements, each one of `key=value`, `key==value`,
`key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` (exists) or `!key` (does not exist). An
empty selector matches everything. Malformed input raises `SelectorError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from controller.cache.errors import CacheError

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s+(in|notin)\s*\(\s*([^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


class SelectorError(CacheError, ValueError):
    """A label selector string could not be parsed."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects that lack the label, as in apimachinery.
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


EVERYTHING = Selector()


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced parenthesis in selector {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise SelectorError(f"unbalanced parenthesis in selector {text!r}")
    parts.append(text[start:])
    return parts


def _parse_requirement(text: str) -> Requirement:
    if m := _SET_RE.match(text):
        if m.group(1):
            raise SelectorError(f"invalid requirement {text.strip()!r}")
        values = [v.strip() for v in m.group(4).split(",")]
        if any(not _VALUE_RE.match(v) for v in values):
            raise SelectorError(f"invalid value in requirement {text.strip()!r}")
        op: Operator = "in" if m.group(3) == "in" else "notin"
        return Requirement(m.group(2), op, frozenset(values))
    if m := _CMP_RE.match(text):
        cmp: Operator = "!=" if m.group(2) == "!=" else "="
        return Requirement(m.group(1), cmp, frozenset([m.group(3)]))
    if m := _EXISTS_RE.match(text):
        return Requirement(m.group(2), "!" if m.group(1) else "exists")
    raise SelectorError(f"invalid label selector requirement {text.strip()!r}")


def parse(selector: str) -> Selector:
    """Parse the string form of a label selector."""
    if not isinstance(selector, str):
        raise SelectorError(f"selector must be a string, not {type(selector).__name__}")
    if not selector.strip():
        return EVERYTHING
    return Selector(tuple(_parse_requirement(p) for p in _split_top_level(selector)))


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """Equality requirements for every pair of `labels` (empty mapping → everything)."""
    reqs = []
    for key, value in sorted(labels.items()):
        if not isinstance(key, str) or not isinstance(value, str):
            raise SelectorError(f"label {key!r}={value!r} is not a string pair")
        reqs.append(Requirement(key, "=", frozenset([value])))
    return Selector(tuple(reqs))


def as_selector(selector: str | Mapping[str, str] | Selector | None) -> Selector:
    """Accept any of the lister's selector forms."""
    if selector is None:
        return EVERYTHING
    if isinstance(selector, Selector):
        return selector
    if isinstance(selector, str):
        return parse(selector)
    if isinstance(selector, Mapping):
        return selector_from_set(selector)
    raise SelectorError(f"unsupported selector type {type(selector).__name__}")
