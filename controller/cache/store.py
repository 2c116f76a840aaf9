"""A thread-safe, indexed object store (client-go `ThreadSafeStore` and `Indexer`).

`ThreadSafeStore` maps keys to objects and maintains any number of named indices: an index
function maps an object to a list of values (e.g. its namespace) and the index maps each value to
the set of keys whose object yields it. `Indexer` wraps it with a key function so callers hand in
objects rather than keys; it is what informers fill and listers read.

Guarantees:

* every method is atomic with respect to the others (one lock; no user code runs under it except
  index functions);
* `replace` swaps the whole content and rebuilds every index at once, so readers see either the
  old or the new state, never a mix;
* an index function that raises leaves the store unchanged (client-go panics instead);
* `resource_version` follows client-go's `threadSafeMap.rv`: the last added/updated/deleted
  object's resourceVersion, the list RV after `replace`, the bookmark RV after `bookmark`.

Objects are shared, not copied: callers must treat what they get as immutable.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller.cache.errors import IndexerConflictError, UnknownIndexError
from controller.cache.keys import (
    KeyFunc,
    deletion_handling_meta_namespace_key_func,
    has_meta,
    object_meta,
    resource_version,
)

IndexFunc = Callable[[Any], list[str]]
_IndexChanges = list[tuple[dict[str, set[str]], list[str], list[str]]]
Indexers = Mapping[str, IndexFunc]

NAMESPACE_INDEX = "namespace"


def meta_namespace_index_func(obj: Any) -> builtins.list[str]:
    """The namespace index: `[metadata.namespace]` (`[""]` for cluster-scoped objects)."""
    return [str(object_meta(obj).get("namespace") or "")]


class ThreadSafeStore:
    """Key → object map with named indices; see the module docstring for guarantees."""

    def __init__(self, indexers: Indexers | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Any] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._rv = ""

    # -- mutation -------------------------------------------------------------------------

    def add(self, key: str, obj: Any) -> None:
        self.update(key, obj)

    def update(self, key: str, obj: Any) -> None:
        with self._lock:
            old = self._items.get(key)
            changes = self._index_changes(old, obj)
            self._items[key] = obj
            self._apply_index_changes(key, changes)
            if has_meta(obj):
                self._rv = resource_version(obj)

    def delete(self, key: str, obj: Any = None) -> None:
        """Remove `key`; `obj` (the object the server reported deleted) only moves the RV."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._apply_index_changes(key, self._index_changes(old, None))
            if has_meta(obj):
                self._rv = resource_version(obj)

    def replace(self, items: Mapping[str, Any], rv: str) -> None:
        new_items = dict(items)
        indices = {name: self._build_index(fn, new_items) for name, fn in self._indexers.items()}
        with self._lock:
            # NOTE: indexers added while we built the indices above are rebuilt under the lock.
            for name, fn in self._indexers.items():
                if name not in indices:
                    indices[name] = self._build_index(fn, new_items)
            self._items = new_items
            self._indices = indices
            self._rv = rv

    def bookmark(self, rv: str) -> None:
        with self._lock:
            self._rv = rv

    def add_indexers(self, indexers: Indexers) -> None:
        with self._lock:
            conflicts = sorted(set(indexers) & set(self._indexers))
            if conflicts:
                raise IndexerConflictError(f"indexer conflict: {', '.join(conflicts)}")
            built = {n: self._build_index(fn, self._items) for n, fn in indexers.items()}
            self._indexers.update(indexers)
            self._indices.update(built)

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: str) -> Any | None:
        # NOTE: a single dict lookup is atomic under the GIL; no lock keeps hot-path reads cheap.
        return self._items.get(key)

    def list(self) -> builtins.list[Any]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def items(self) -> builtins.list[tuple[str, Any]]:
        with self._lock:
            return list(self._items.items())

    def __len__(self) -> int:
        return len(self._items)

    @property
    def resource_version(self) -> str:
        return self._rv

    def index(self, index_name: str, obj: Any) -> builtins.list[Any]:
        """Objects sharing any indexed value with `obj` under `index_name`."""
        with self._lock:
            fn, index = self._index_of(index_name)
            values = fn(obj)
            keys: set[str] = set()
            for value in values:
                keys |= index.get(value, set())
            return [self._items[k] for k in keys]

    def by_index(self, index_name: str, value: str) -> builtins.list[Any]:
        with self._lock:
            _, index = self._index_of(index_name)
            return [self._items[k] for k in index.get(value, ())]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        with self._lock:
            _, index = self._index_of(index_name)
            return sorted(index.get(value, ()))

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        with self._lock:
            _, index = self._index_of(index_name)
            return list(index)

    def get_indexers(self) -> dict[str, IndexFunc]:
        with self._lock:
            return dict(self._indexers)

    # -- internals (lock held) ------------------------------------------------------------

    def _index_of(self, index_name: str) -> tuple[IndexFunc, dict[str, set[str]]]:
        fn = self._indexers.get(index_name)
        if fn is None:
            raise UnknownIndexError(f"Index with name {index_name} does not exist")
        return fn, self._indices[index_name]

    def _index_changes(self, old: Any, new: Any) -> _IndexChanges:
        # Computed before anything is written so that a failing index function leaves the
        # store untouched.
        changes = []
        for name, fn in self._indexers.items():
            old_values = fn(old) if old is not None else []
            new_values = fn(new) if new is not None else []
            if old_values == new_values:
                continue
            changes.append((self._indices[name], old_values, new_values))
        return changes

    @staticmethod
    def _apply_index_changes(key: str, changes: _IndexChanges) -> None:
        for index, old_values, new_values in changes:
            for value in old_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values:
                index.setdefault(value, set()).add(key)

    @staticmethod
    def _build_index(fn: IndexFunc, items: Mapping[str, Any]) -> dict[str, set[str]]:
        index: dict[str, set[str]] = {}
        for key, obj in items.items():
            for value in fn(obj):
                keys = index.get(value)
                if keys is None:
                    index[value] = {key}
                else:
                    keys.add(key)
        return index


class Indexer:
    """An object-keyed view of a `ThreadSafeStore` (client-go `cache.NewIndexer`)."""

    def __init__(
        self,
        key_func: KeyFunc = deletion_handling_meta_namespace_key_func,
        indexers: Indexers | None = None,
    ) -> None:
        self.key_func = key_func
        self._store = ThreadSafeStore(indexers)

    def add(self, obj: Any) -> None:
        self._store.add(self.key_func(obj), obj)

    def update(self, obj: Any) -> None:
        self._store.update(self.key_func(obj), obj)

    def delete(self, obj: Any) -> None:
        self._store.delete(self.key_func(obj), obj)

    def delete_by_key(self, key: str) -> None:
        self._store.delete(key)

    def replace(self, objs: Iterable[Any], rv: str) -> None:
        key_func = self.key_func
        self._store.replace({key_func(o): o for o in objs}, rv)

    def replace_keyed(self, items: Mapping[str, Any], rv: str) -> None:
        """`replace` with keys the caller already computed with this indexer's key func."""
        self._store.replace(items, rv)

    def bookmark(self, rv: str) -> None:
        self._store.bookmark(rv)

    def get(self, obj: Any) -> Any | None:
        """The stored object with the same key as `obj`, or None."""
        return self._store.get(self.key_func(obj))

    def get_by_key(self, key: str) -> Any | None:
        return self._store.get(key)

    def list(self) -> builtins.list[Any]:
        return self._store.list()

    def list_keys(self) -> builtins.list[str]:
        return self._store.list_keys()

    def items(self) -> builtins.list[tuple[str, Any]]:
        return self._store.items()

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._store.get(key) is not None

    @property
    def resource_version(self) -> str:
        return self._store.resource_version

    def index(self, index_name: str, obj: Any) -> builtins.list[Any]:
        return self._store.index(index_name, obj)

    def by_index(self, index_name: str, value: str) -> builtins.list[Any]:
        return self._store.by_index(index_name, value)

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        return self._store.index_keys(index_name, value)

    def list_index_func_values(self, index_name: str) -> builtins.list[str]:
        return self._store.list_index_func_values(index_name)

    def get_indexers(self) -> dict[str, IndexFunc]:
        return self._store.get_indexers()

    def add_indexers(self, indexers: Indexers) -> None:
        self._store.add_indexers(indexers)
