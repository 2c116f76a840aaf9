"""Reading an API object's raw JSON into typed fields (pure, no I/O).

`FieldReader` reads one object's fields by dotted path with Kubernetes' defaults for missing
ones and raises `MalformedObjectError` naming the object and the field for a wrong type or
syntax; `FrozenDict` is the immutable, hashable string map the models hold (annotations,
labels); `parse_time` / `format_time` read and write `metav1.Time`.
"""

from __future__ import annotations

import functools
from collections.abc import ItemsView, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, overload

from controller.core.errors import MalformedObjectError

_T = TypeVar("_T")


class FrozenDict(Mapping[str, str]):
    """An immutable, hashable str -> str mapping (equal to any Mapping with the same items)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, str] | None = None) -> None:
        self._data: dict[str, str] = dict(data or {})
        self._hash: int | None = None

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # NOTE: the Mapping mixins go through __getitem__ and a KeyError per miss; annotations
    # are read this way for every pod on every pass.
    def __contains__(self, key: object) -> bool:
        return key in self._data

    def items(self) -> ItemsView[str, str]:
        return self._data.items()  # a read-only view

    @overload
    def get(self, key: str, /) -> str | None: ...

    @overload
    def get(self, key: str, /, default: str | _T) -> str | _T: ...

    def get(self, key: str, /, default: object = None) -> object:
        return self._data.get(key, default)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, str]]]:
        return (FrozenDict, (self._data,))

    def to_dict(self) -> dict[str, str]:
        """A fresh mutable copy."""
        return dict(self._data)


EMPTY: FrozenDict = FrozenDict()


# --- tolerant field readers ------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _split_path(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


class FieldReader:
    """Reads typed fields out of one raw object, naming it in every error."""

    def __init__(self, kind: str, raw: object, *, prefix: str = "") -> None:
        if not isinstance(raw, Mapping):
            where = f" field {prefix}" if prefix else ""
            raise MalformedObjectError(
                f"{kind}:{where} expected an object, got {type(raw).__name__}"
            )
        self.kind = kind
        self.prefix = prefix
        meta = raw.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        self.label = f"{kind} {name!r}" if isinstance(name, str) else kind
        self.raw: Mapping[str, Any] = raw

    def child(self, path: str, item: object) -> FieldReader:
        """A reader over a nested object (a list element), reporting errors under `path`."""
        sub = FieldReader(self.label, item, prefix=f"{self.prefix}{path}")
        sub.label = self.label
        return sub

    def fail(self, path: str, expected: str, value: object) -> MalformedObjectError:
        full = f"{self.prefix}.{path}" if self.prefix else path
        return MalformedObjectError(
            f"{self.label}: field {full} must be {expected}, got {type(value).__name__} {value!r}"
        )

    def get(self, path: str) -> object:
        """The value at a dotted path, None when any part is missing or null."""
        node: object = self.raw
        parts = _split_path(path)
        for index, part in enumerate(parts):
            # NOTE: `type(...) is dict` first: an ABC isinstance check on every step of every
            # field was most of the cost of parsing an object (all pods, on every pass).
            if type(node) is not dict and not isinstance(node, Mapping):
                raise self.fail(".".join(parts[:index]), "an object", node)
            node = node.get(part)
            if node is None:
                return None
        return node

    def obj(self, path: str) -> Mapping[str, Any]:
        value = self.get(path)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, "an object", value)
        return value

    def string(self, path: str, default: str = "") -> str:
        value = self.get(path)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, "a string", value)
        return value

    def boolean(self, path: str, default: bool = False) -> bool:
        value = self.get(path)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(path, "a boolean", value)
        return value

    def integer(self, path: str) -> int | None:
        value = self.get(path)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, "an integer", value)
        return value

    def number(self, path: str) -> float:
        value = self.get(path)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, "a number", value)
        return float(value)

    def str_map(self, path: str) -> FrozenDict:
        value = self.get(path)
        if value is None:
            return EMPTY
        if (type(value) is not dict and not isinstance(value, Mapping)) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.fail(path, "a map of strings", value)
        return FrozenDict(value)

    def str_list(self, path: str) -> tuple[str, ...]:
        value = self.get(path)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(path, "a list of strings", value)
        return tuple(value)

    def items(self, path: str) -> list[Any]:
        value = self.get(path)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, "a list", value)
        return value

    def time(self, path: str) -> datetime | None:
        value = self.get(path)
        if value is None:
            return None
        if isinstance(value, str):
            parsed = parse_time(value)
            if parsed is not None:
                return parsed
        raise self.fail(path, "an RFC 3339 time", value)


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 timestamp as a timezone-aware UTC datetime; None when malformed."""
    candidate = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """The API server's `metav1.Time` form: second precision, "Z" suffix."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
