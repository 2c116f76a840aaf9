"""Label selectors (apimachinery `labels.Parse` and `labels.SelectorFromSet`).

The one parser of the project: the listers use it client side and the API server emulator
(controller/sandbox/apiserver/selectors.py) server side. A selector is parsed once into a
`Selector` and then matched against label mappings. The string syntax is apimachinery's:
comma-separated requirements, each one of `key=value`, `key==value`, `key!=value`, `key in (a,b)`,
`key notin (a,b)`, `key` (exists), `!key` (does not exist), `key>n` or `key<n` (integers). Keys
are qualified names (`prefix/name`), values label values. An empty selector matches everything.
Malformed input raises `SelectorError` (a `ValueError`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from controller.cache.errors import CacheError

Operator = Literal["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_KEY = rf"(?:{_NAME}/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=|>|<)\s*(\S*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")
_INT_RE = re.compile(r"^-?[0-9]+$")
_CMP_OPS: dict[str, Operator] = {"==": "=", "=": "=", "!=": "!=", ">": "gt", "<": "lt"}
# apimachinery's limits: a DNS subdomain prefix, a 63-character name and value.
_MAX_PREFIX, _MAX_NAME = 253, 63


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
        if self.operator in ("!=", "notin"):
            # They match objects that lack the label, as in apimachinery.
            return not present or labels[self.key] not in self.values
        # "gt"/"lt": only a label that is an integer compares.
        value = str(labels[self.key]) if present else ""
        if not _INT_RE.match(value):
            return False
        bound = int(next(iter(self.values)))
        return int(value) > bound if self.operator == "gt" else int(value) < bound


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


def _key(key: str, text: str) -> str:
    prefix, _, name = key.rpartition("/")
    if len(prefix) > _MAX_PREFIX or len(name) > _MAX_NAME:
        raise SelectorError(f"invalid label key {key!r} in requirement {text.strip()!r}")
    return key


def _value(value: str, text: str) -> str:
    if len(value) > _MAX_NAME or not _VALUE_RE.match(value):
        raise SelectorError(f"invalid value {value!r} in requirement {text.strip()!r}")
    return value


def _parse_requirement(text: str) -> Requirement:
    if m := _SET_RE.match(text):
        # As apimachinery: "()" and a trailing comma stand for the empty value.
        values = frozenset(_value(v.strip(), text) for v in m.group(3).split(","))
        op: Operator = "in" if m.group(2) == "in" else "notin"
        return Requirement(_key(m.group(1), text), op, values)
    if m := _CMP_RE.match(text):
        cmp = _CMP_OPS[m.group(2)]
        if cmp in ("gt", "lt"):
            if not _INT_RE.match(m.group(3)):
                raise SelectorError(f"{m.group(3)!r} is not an integer in {text.strip()!r}")
            value = m.group(3)
        else:
            value = _value(m.group(3), text)
        return Requirement(_key(m.group(1), text), cmp, frozenset([value]))
    if m := _EXISTS_RE.match(text):
        return Requirement(_key(m.group(2), text), "!" if m.group(1) else "exists")
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
