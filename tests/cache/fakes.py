"""In-memory fakes for the informer stack: a virtual clock and a ListerWatcher.

`FakeClock` is `controller.testing.clock.FakeClock` started at 1000 s: its `sleep` blocks until a
test `step`s virtual time past the deadline (or the stop event is set); `waits` records every
requested duration so backoff and resync delays can be asserted exactly.

`FakeListerWatcher` is a tiny API server for one resource: create/update/delete bump a global
resourceVersion and fan events out to open watches; `list` pages with limit/continue; a watch
from a compacted RV gets a 410 ERROR event, as a real server answers. Faults are queued:
`list_errors` / `watch_errors` raise on the next calls; `close_watches`, `send_error`, `bookmark`
act on the open streams. Every list/watch call is recorded for assertions.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

from controller.apiclient.errors import StatusError
from controller.cache.listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    MODIFIED,
    ListOptions,
    ListResult,
    WatchEvent,
    WatchOptions,
)
from controller.testing import builders
from controller.testing.clock import FakeClock as _FakeClock


class FakeClock(_FakeClock):
    """The one FakeClock, started at 1000 s as the informer, lease and GC tests expect."""

    def __init__(self, start: float = 1000.0) -> None:
        super().__init__(start)


_CLOSE = object()


class FakeWatcher:
    def __init__(self, events: list[WatchEvent]) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        for e in events:
            self._queue.put(e)
        self.stopped = threading.Event()

    def push(self, item: Any) -> None:
        self._queue.put(item)

    def stop(self) -> None:
        self.stopped.set()
        self._queue.put(_CLOSE)

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            item = self._queue.get()
            if item is _CLOSE or self.stopped.is_set():
                return
            yield item


def make_pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    """A typed, unscheduled pod without containers; keyword arguments are its labels."""
    return builders.pod(name, namespace, labels=labels, node="", containers=None, typed=True)


class FakeListerWatcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rv = 100
        self._objects: dict[str, dict[str, Any]] = {}
        self._history: list[tuple[int, str, dict[str, Any]]] = []
        self._compacted = 0
        self._watchers: list[FakeWatcher] = []
        self.list_errors: deque[Exception] = deque()
        self.watch_errors: deque[Exception] = deque()
        self.list_calls: list[ListOptions] = []
        self.watch_calls: list[WatchOptions] = []
        self.created_watchers: list[FakeWatcher] = []
        self._snapshots: dict[str, tuple[int, list[dict[str, Any]]]] = {}

    # -- server-side mutations --------------------------------------------------------------

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        return f"{ns}/{meta['name']}" if ns else meta["name"]

    def _emit(self, etype: str, obj: dict[str, Any]) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self._history.append((rv, etype, copy.deepcopy(obj)))
        for w in self._watchers:
            w.push(WatchEvent(etype, copy.deepcopy(obj)))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            key = self._key(obj)
            if key in self._objects:
                raise StatusError(409, "AlreadyExists", key)
            self._rv += 1
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = str(self._rv)
            self._objects[key] = stored
            self._emit(ADDED, stored)
            return copy.deepcopy(stored)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            key = self._key(obj)
            if key not in self._objects:
                raise StatusError(404, "NotFound", key)
            self._rv += 1
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = str(self._rv)
            self._objects[key] = stored
            self._emit(MODIFIED, stored)
            return copy.deepcopy(stored)

    def delete(self, name: str, namespace: str = "default") -> None:
        with self._lock:
            key = f"{namespace}/{name}" if namespace else name
            obj = self._objects.pop(key)
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self._emit(DELETED, obj)

    def set_silently(self, objs: list[dict[str, Any]]) -> None:
        """Replace the whole state without emitting events (history compacted: old RVs → 410)."""
        with self._lock:
            self._objects = {}
            for obj in objs:
                self._rv += 1
                stored = copy.deepcopy(obj)
                stored["metadata"]["resourceVersion"] = str(self._rv)
                self._objects[self._key(stored)] = stored
            self._compacted = self._rv
            self._history.clear()

    def compact(self) -> None:
        with self._lock:
            self._compacted = self._rv
            self._history.clear()

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._rv)

    def get(self, name: str, namespace: str = "default") -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._objects[f"{namespace}/{name}" if namespace else name])

    # -- stream faults ----------------------------------------------------------------------

    def open_watches(self) -> int:
        with self._lock:
            return len([w for w in self._watchers if not w.stopped.is_set()])

    def close_watches(self) -> None:
        with self._lock:
            watchers, self._watchers = self._watchers, []
        for w in watchers:
            w.push(_CLOSE)

    def send_error(self, code: int, reason: str, message: str = "") -> None:
        status = {"kind": "Status", "code": code, "reason": reason, "message": message}
        with self._lock:
            watchers, self._watchers = self._watchers, []
        for w in watchers:
            w.push(WatchEvent(ERROR, status))
            w.push(_CLOSE)

    def bookmark(self) -> str:
        with self._lock:
            self._rv += 1
            rv = str(self._rv)
            for w in self._watchers:
                w.push(WatchEvent(BOOKMARK, {"kind": "Pod", "metadata": {"resourceVersion": rv}}))
        return rv

    def send_raw(self, event: WatchEvent) -> None:
        with self._lock:
            for w in self._watchers:
                w.push(event)

    # -- ListerWatcher ----------------------------------------------------------------------

    def list(self, options: ListOptions) -> ListResult:
        with self._lock:
            self.list_calls.append(options)
            if self.list_errors:
                raise self.list_errors.popleft()
            if options.continue_:
                snap = self._snapshots.get(options.continue_.split(":")[0])
                if snap is None:
                    raise StatusError(410, "Expired", "continue token expired")
                rv, items = snap
                offset = int(options.continue_.split(":")[1])
            else:
                rv = self._rv
                items = [copy.deepcopy(o) for _, o in sorted(self._objects.items())]
                offset = 0
            for item in items:  # list items carry no kind/apiVersion on the wire
                item.pop("kind", None)
                item.pop("apiVersion", None)
            if options.limit and offset + options.limit < len(items):
                token = f"s{len(self._snapshots)}"
                self._snapshots[token] = (rv, items)
                page = items[offset : offset + options.limit]
                return ListResult(page, str(rv), f"{token}:{offset + options.limit}")
            return ListResult(items[offset:], str(rv))

    def expire_continue_tokens(self) -> None:
        with self._lock:
            self._snapshots.clear()

    def watch(self, options: WatchOptions) -> FakeWatcher:
        with self._lock:
            self.watch_calls.append(options)
            if self.watch_errors:
                raise self.watch_errors.popleft()
            start = int(options.resource_version or self._rv)
            if start < self._compacted:
                status = {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": f"too old resource version: {start} ({self._compacted})",
                }
                return FakeWatcher([WatchEvent(ERROR, status)])
            backlog = [WatchEvent(t, copy.deepcopy(o)) for rv, t, o in self._history if rv > start]
            watcher = FakeWatcher(backlog)
            self._watchers.append(watcher)
            self.created_watchers.append(watcher)
            return watcher


class RecordingHandler:
    """Records every notification as a tuple, thread-safely."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[Any, ...]] = []

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        with self._lock:
            self.events.append(("add", _name(obj), _rv(obj), is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        with self._lock:
            self.events.append(("update", _name(new), _rv(old), _rv(new)))

    def on_delete(self, obj: Any) -> None:
        with self._lock:
            self.events.append(("delete", _name(obj), type(obj).__name__))

    def snapshot(self) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self.events)

    def count(self) -> int:
        with self._lock:
            return len(self.events)


def _name(obj: Any) -> str:
    from controller.cache.keys import DeletedFinalStateUnknown

    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key.split("/")[-1]
    return str(obj["metadata"]["name"])


def _rv(obj: Any) -> str:
    return str(obj["metadata"].get("resourceVersion", ""))
