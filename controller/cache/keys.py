"""Object keys, as client-go tools/cache computes them.

An object's key is `namespace/name`, or just `name` for cluster-scoped objects
(`meta_namespace_key_func`). Objects are the raw JSON dicts of the API server. When an informer
misses a delete (its watch broke and the relist no longer has the object) it delivers a
`DeletedFinalStateUnknown` tombstone instead of the object; `meta_namespace_key_func` refuses
tombstones, so stores and delete handlers use `deletion_handling_meta_namespace_key_func`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.cache.errors import KeyFuncError

#: Raw API objects as decoded from JSON.
Object = dict[str, Any]
KeyFunc = Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class ExplicitKey:
    """A key passed where an object is expected; it is its own key."""

    key: str


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """An object deleted while the informer was disconnected: its key and last known state.

    `obj` may be stale (the object could have changed before it was deleted) or None.
    """

    key: str
    obj: Object | None


def unwrap_tombstone(obj: Any) -> Any:
    """A delete notification's object: the tombstone's last known state (may be None), else
    the object itself."""
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def object_meta(obj: object) -> Mapping[str, Any]:
    """The `metadata` mapping of a raw object; KeyFuncError if it has none."""
    if type(obj) is dict:  # fast path: JSON-decoded objects (isinstance on ABCs is slow)
        meta = obj.get("metadata")
        if type(meta) is dict:
            return meta
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        raise KeyFuncError(f"object has no meta: {obj!r:.200}")
    return meta


def raw_field(obj: object, name: str) -> Mapping[str, Any]:
    """The mapping under `name` of a raw object (`metadata`, `spec`, ...), or an empty one when
    either is not a mapping (never raises: for readers that skip malformed objects)."""
    value = obj.get(name) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def meta_str(obj: object, field: str) -> str:
    """A string field of a raw object's `metadata`, or "" when absent or malformed (never raises:
    for event handlers and listers that must skip malformed objects rather than fail)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    value = meta.get(field) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def object_name(obj: object) -> str:
    """`metadata.name` of a raw object, or "" when it has none (never raises)."""
    return meta_str(obj, "name")


def replaced(old: object, new: object) -> bool:
    """Whether an update's two objects are different incarnations (both have a UID and they
    differ): a relist after a lost watch shows an object deleted and re-created under its
    name as one update, as client-go's informers do, and a handler that compares only specs
    takes the successor for the object it already handled."""
    old_uid, new_uid = meta_str(old, "uid"), meta_str(new, "uid")
    return bool(old_uid and new_uid and old_uid != new_uid)


def meta_namespace_key_func(obj: object) -> str:
    """`namespace/name`, or `name` when the namespace is empty."""
    if type(obj) is dict:
        meta = obj.get("metadata")
        if type(meta) is dict:
            name = meta.get("name")
            namespace = meta.get("namespace")
            if type(name) is str and (namespace is None or type(namespace) is str):
                return f"{namespace}/{name}" if namespace else name
    if isinstance(obj, ExplicitKey):
        return obj.key
    if isinstance(obj, str):
        return obj
    meta = object_meta(obj)
    name = meta.get("name") or ""
    namespace = meta.get("namespace") or ""
    if not isinstance(name, str) or not isinstance(namespace, str):
        raise KeyFuncError(f"object has a non-string name or namespace: {obj!r:.200}")
    return f"{namespace}/{name}" if namespace else name


def deletion_handling_meta_namespace_key_func(obj: object) -> str:
    """Like `meta_namespace_key_func`, but a tombstone yields its recorded key."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return meta_namespace_key_func(obj)


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """`(namespace, name)` of a key; `""` gives `("", "")`; more than one `/` is an error."""
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise KeyFuncError(f'unexpected key format: "{key}"')


def resource_version(obj: object) -> str:
    """`metadata.resourceVersion` of an object, `""` when absent or not an object."""
    return meta_str(obj, "resourceVersion")


def has_meta(obj: object) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("metadata"), Mapping)
