"""The informer queue: client-go 0.36's `RealFIFO` in atomic mode.

Semantics chosen (client-go 0.36 defaults, feature gates `InOrderInformers` and `AtomicFIFO`):

* every event is kept, in global arrival order: no per-key coalescing, no dedup of deletes, and a
  delete is delivered even for a key the informer never saw (DeltaFIFO drops those);
* a relist (`replace`) is ONE `REPLACED_ALL` delta carrying the whole list; the informer swaps its
  store atomically and then notifies deletes (as `DeletedFinalStateUnknown` tombstones) before the
  adds/updates of the new list. DeltaFIFO would instead interleave per-key `Replaced` deltas with
  tombstones queued after them;
* a resync is one `SYNC_ALL` delta; a bookmark is a `BOOKMARK` delta (so the store's resource
  version moves in order with the events);
* `has_synced` becomes true (and stays true) once every delta queued when the first `replace`
  arrived has been popped AND processed.

Not mirrored: batch popping (`InOrderInformersBatchProcess`) — one delta is processed at a time,
which is observably the same for handlers. The lock is always released while the single consumer
processes a delta (`UnlockWhileProcessingFIFO`).

The transformer (default: none) runs once on each object entering the queue, never on tombstones
or on resync.
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from controller.cache.errors import CacheError
from controller.cache.keys import DeletedFinalStateUnknown

Transformer = Callable[[Any], Any]


class DeltaType(enum.Enum):
    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED_ALL = "ReplacedAll"
    SYNC_ALL = "SyncAll"
    BOOKMARK = "Bookmark"


@dataclass(frozen=True, slots=True)
class ReplacedAllInfo:
    resource_version: str
    objects: list[Any]


@dataclass(frozen=True, slots=True)
class Delta:
    """One queued event. `obj` is the object, a `ReplacedAllInfo`, an RV string or None."""

    type: DeltaType
    obj: Any


class FIFOClosedError(CacheError):
    """`pop` was called (or was waiting) on a closed, empty queue."""


class RealFIFO:
    """An unbounded, ordered event queue with a single consumer; see the module docstring."""

    def __init__(self, transformer: Transformer | None = None) -> None:
        self._cond = threading.Condition()
        self._items: deque[Delta] = deque()
        self._transformer = transformer
        self._populated = False
        self._initial_population_count = 0
        self._synced = False
        self._closed = False

    # -- producers (the reflector) --------------------------------------------------------

    def _transform(self, obj: Any) -> Any:
        if self._transformer is None or isinstance(obj, DeletedFinalStateUnknown):
            return obj
        return self._transformer(obj)

    def _append(self, delta: Delta) -> None:
        with self._cond:
            self._populated = True
            self._items.append(delta)
            self._cond.notify()

    def add(self, obj: Any) -> None:
        self._append(Delta(DeltaType.ADDED, self._transform(obj)))

    def update(self, obj: Any) -> None:
        self._append(Delta(DeltaType.UPDATED, self._transform(obj)))

    def delete(self, obj: Any) -> None:
        self._append(Delta(DeltaType.DELETED, self._transform(obj)))

    def replace(self, objs: Iterable[Any], resource_version: str) -> None:
        transform = self._transform
        info = ReplacedAllInfo(resource_version, [transform(o) for o in objs])
        with self._cond:
            self._items.append(Delta(DeltaType.REPLACED_ALL, info))
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(self._items)
            self._cond.notify()

    def resync(self) -> None:
        with self._cond:
            self._items.append(Delta(DeltaType.SYNC_ALL, None))
            self._cond.notify()

    def bookmark(self, resource_version: str) -> None:
        with self._cond:
            self._items.append(Delta(DeltaType.BOOKMARK, resource_version))
            self._cond.notify()

    # -- consumer (the informer) ----------------------------------------------------------

    def pop(self, process: Callable[[Delta, bool], None]) -> Delta:
        """Block for the next delta and run `process(delta, is_in_initial_list)` on it.

        The lock is not held while `process` runs. An exception from `process` propagates to the
        caller after the sync accounting is done (the delta is not requeued, as in client-go).
        Raises FIFOClosedError once closed and drained of nothing more to wait for.
        """
        with self._cond:
            while not self._items:
                if self._closed:
                    raise FIFOClosedError("RealFIFO: manipulating with closed queue")
                self._cond.wait()
            delta = self._items.popleft()
            is_in_initial_list = not self._synced_locked()
        try:
            process(delta, is_in_initial_list)
        finally:
            with self._cond:
                # NOTE: counted down only after processing, so has_synced cannot turn true
                # while the last initial item is still being handled (client-go RealFIFO).
                if self._initial_population_count > 0:
                    self._initial_population_count -= 1
                    self._synced_locked()
        return delta

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _synced_locked(self) -> bool:
        if not self._synced and self._populated and self._initial_population_count == 0:
            self._synced = True
        return self._synced

    def has_synced(self) -> bool:
        with self._cond:
            return self._synced_locked()

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
