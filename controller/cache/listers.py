"""Listers: read-only, typed-by-convention views of an informer's indexer (client-go listers).

`Lister.get(name, namespace)` returns the cached raw object or raises `NotInCacheError` whose
message matches the API server's (`pod "x" not found`, singular resource). `Lister.list` filters
by label selector (string, mapping or parsed `Selector`) and optionally by namespace, using the
namespace index when the indexer has one and falling back to a full scan otherwise.

Returned objects are the cached ones, shared with every other reader: never mutate them
(`copy.deepcopy` first). The order of `list` results is unspecified.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from typing import Any

from controller.cache.errors import NotInCacheError, UnknownIndexError
from controller.cache.keys import Object, meta_str
from controller.cache.labels import Selector, as_selector
from controller.cache.store import NAMESPACE_INDEX, Indexer

LOG = logging.getLogger(__name__)

SelectorLike = str | Mapping[str, str] | Selector | None


def _labels_of(obj: Any) -> Mapping[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


class Lister:
    """Get and list one resource from an `Indexer`.

    `resource` is the singular lowercase kind used in not-found messages (client-go uses the
    GroupResource with the singular name, e.g. "pod", "subnet").
    """

    def __init__(self, indexer: Indexer, resource: str) -> None:
        self._indexer = indexer
        self.resource = resource

    def get(self, name: str, namespace: str | None = None) -> Object:
        key = f"{namespace}/{name}" if namespace else name
        obj = self._indexer.get_by_key(key)
        if obj is None:
            raise NotInCacheError(self.resource, name, namespace or "")
        result: Object = obj
        return result

    def get_by_key(self, key: str) -> Object | None:
        """The object under a `namespace/name` key, or None (no exception)."""
        obj: Object | None = self._indexer.get_by_key(key)
        return obj

    def list(
        self, selector: SelectorLike = None, namespace: str | None = None
    ) -> builtins.list[Object]:
        sel = as_selector(selector)
        if namespace:
            try:
                candidates = self._indexer.by_index(NAMESPACE_INDEX, namespace)
            except UnknownIndexError:
                LOG.debug("no namespace index for %s, scanning the whole cache", self.resource)
                candidates = [
                    o for o in self._indexer.list() if meta_str(o, "namespace") == namespace
                ]
        else:
            candidates = self._indexer.list()
        if sel.empty():
            return candidates
        return [o for o in candidates if sel.matches(_labels_of(o))]
