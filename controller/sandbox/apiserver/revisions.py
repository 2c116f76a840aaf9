"""The revision log and the read side of the emulator's store: one global resourceVersion, each
resource's table with its watch history (trimmed to `history_window` revisions, or by an
explicit `compact()`), reads, LIST, watches and the waits tests use.

`ObjectStore` (store.py) adds the writes on top; everything here runs under the one lock the
writes take, so a read or a watch never sees half a write.
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Callable, Iterable

from controller.sandbox.apiserver.listing import (
    check_list_request,
    list_snapshot,
    page,
    parse_rv,
    snapshot_overlay,
)
from controller.sandbox.apiserver.records import Key, ListResult, Stored
from controller.sandbox.apiserver.resources import (
    ApiError,
    JsonDict,
    ResourceType,
    bad_request,
    namespace_not_found,
    not_found,
    resource_for,
    too_large,
    too_old,
)
from controller.sandbox.apiserver.selectors import Selector
from controller.sandbox.apiserver.watch import Table, Watcher, WatchEvent


class VersionedTables:
    """The resource tables, the revision counter and the read side; safe from any thread.

    Methods take a resource as a ResourceType or a name (`"pods"`, `"subnets"`,
    `"subnets.kubeovn.io"`).
    """

    def __init__(self, *, history_window: int = 100_000) -> None:
        if history_window < 1:
            raise ValueError("history_window must be at least 1")
        self.history_window = history_window
        self._lock = threading.RLock()
        self._rv = 0
        self._forced_compaction = 0
        self._tables: dict[ResourceType, Table] = {}
        self.closed = False

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out (0 before the first write)."""
        return self._rv

    def compacted_rv(self) -> int:
        """Versions strictly below this are gone: watching or listing at them answers 410."""
        return max(self._forced_compaction, self._rv - self.history_window)

    def compact(self, rv: int | None = None) -> None:
        """Forget history up to `rv` (default: everything), like an etcd compaction."""
        with self._lock:
            self._forced_compaction = max(self._forced_compaction, self._rv if rv is None else rv)
            for table in self._tables.values():
                self._trim(table)
                table.cond.notify_all()

    def _table(self, resource: ResourceType | str) -> Table:
        rt = resource if isinstance(resource, ResourceType) else resource_for(resource)
        table = self._tables.get(rt)
        if table is None:
            with self._lock:
                table = self._tables.setdefault(rt, Table(rt, threading.Condition(self._lock)))
        return table

    def _trim(self, table: Table) -> None:
        floor = self.compacted_rv()
        hist = table.history
        i = table.history_start
        while i < len(hist) and hist[i].rv <= floor:
            i += 1
        if i > table.history_start:
            table.trimmed_rv = hist[i - 1].rv
        table.history_start = i
        if i > 1024 and i * 2 > len(hist):
            del hist[:i]
            table.history_start = 0

    def _record(self, table: Table, ev: WatchEvent) -> None:
        table.history.append(ev)
        self._trim(table)
        table.cond.notify_all()

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def close(self) -> None:
        """End every open watch (abruptly); the store stays readable."""
        with self._lock:
            self.closed = True
            for table in self._tables.values():
                table.cond.notify_all()

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def _require_namespace(self, rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise bad_request(
                f"the server could not find the requested resource: {rt.plural} need a namespace"
            )
        return namespace

    def _check_namespace_exists(self, namespace: str) -> None:
        ns_table = self._table("namespaces")
        stored = ns_table.objects.get(("", namespace))
        if stored is None:
            raise namespace_not_found(namespace)
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because "
                "it is being terminated",
                details={"name": namespace, "kind": "namespaces"},
            )

    def _get_stored(self, table: Table, key: Key) -> Stored:
        stored = table.objects.get(key)
        if stored is None:
            raise not_found(table.rt, key[1])
        return stored

    @staticmethod
    def _copy(stored: Stored) -> JsonDict:
        result: JsonDict = json.loads(stored.raw)
        return result

    def get(self, resource: ResourceType | str, namespace: str | None, name: str) -> JsonDict:
        """A copy of the current object, or a 404 `ApiError`."""
        return self._copy(self.get_stored(resource, namespace, name))

    def get_stored(self, resource: ResourceType | str, namespace: str | None, name: str) -> Stored:
        table = self._table(resource)
        with self._lock:
            return self._get_stored(table, self._key(table.rt, namespace, name))

    def list(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        selector: Selector | None = None,
    ) -> list[JsonDict]:
        """Copies of every object (in one namespace, matching `selector`), in key order."""
        table = self._table(resource)
        sel = Selector(namespace if table.rt.namespaced else None) if selector is None else selector
        result = self.list_page(table.rt, sel)
        return [self._copy(s) for s in result.items]

    def list_page(
        self,
        resource: ResourceType | str,
        selector: Selector,
        *,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> ListResult:
        """One LIST request's worth of objects, with the semantics of a real apiserver.

        `resource_version` "" or None: the newest state; "0": any state (the newest here),
        whole (kube-apiserver serves it from its watch cache and ignores `limit`);
        "N" with match NotOlderThan (or no match): the newest state, 504 if N is in the future;
        "N" with match Exact: the state at N, 410 if compacted. A continue token serves the
        next page at the first page's version, 410 once that version is compacted.
        """
        table = self._table(resource)
        limit = check_list_request(resource_version, resource_version_match, limit, continue_token)
        with self._lock:
            snapshot, start = list_snapshot(
                self._rv,
                self.compacted_rv(),
                resource_version,
                resource_version_match,
                continue_token,
            )
            overlay = snapshot_overlay(table, snapshot, self._rv)
            return page(table, overlay, selector, snapshot, start, limit)

    def watch(
        self,
        resource: ResourceType | str,
        selector: Selector,
        resource_version: str | None,
        *,
        send_initial_events: bool | None = None,
    ) -> Watcher:
        """Open a watch. rv "" / "0" (or send_initial_events) start with the current state.

        Raises a 410 `ApiError` for a compacted version; the HTTP layer turns that into an
        ERROR event, as a real apiserver does for an expired watch.
        """
        table = self._table(resource)
        with self._lock:
            current = self._rv
            if resource_version in (None, "", "0") or send_initial_events:
                if send_initial_events and resource_version not in (None, "", "0"):
                    cursor = parse_rv(resource_version)
                    if cursor > current:
                        raise too_large(cursor, current)
                initial = [
                    s
                    for s in table.objects.values()
                    if selector.is_everything or selector.matches(s.obj)
                ]
                initial.sort(key=lambda s: s.rv)
                watcher = Watcher(self, table, selector, current, initial)
            else:
                cursor = parse_rv(resource_version)
                if cursor < self.compacted_rv():
                    raise too_old(cursor, self.compacted_rv())
                if cursor > current:
                    # NOTE: a real apiserver first waits ~3 s for its cache to catch up.
                    raise too_large(cursor, current)
                watcher = Watcher(self, table, selector, cursor, [])
            table.watchers.add(watcher)
            table.cond.notify_all()
            return watcher

    def _tables_of(self, resource: ResourceType | str | None) -> Iterable[Table]:
        return self._tables.values() if resource is None else [self._table(resource)]

    def _end_watches(
        self, resource: ResourceType | str | None, end: Callable[[Watcher], None]
    ) -> int:
        """Apply `end` to every open watch (all, or one resource's) and wake them; how many."""
        count = 0
        with self._lock:
            for table in self._tables_of(resource):
                for w in table.watchers:
                    end(w)
                    count += 1
                table.cond.notify_all()
        return count

    def drop_watches(self, resource: ResourceType | str | None = None) -> int:
        """End open watches abruptly (all, or one resource's); returns how many."""

        def drop(w: Watcher) -> None:
            w.dropped = True

        return self._end_watches(resource, drop)

    def expire_watches(self, resource: ResourceType | str | None = None) -> int:
        """Send a 410 ERROR to open watches (all, or one resource's); returns how many."""

        def expire(w: Watcher) -> None:
            w.forced_error = too_old(w.cursor, self._rv)

        return self._end_watches(resource, expire)

    def watcher_count(self, resource: ResourceType | str | None = None) -> int:
        """Registered watches, ended ones included until their stream has closed."""
        with self._lock:
            return sum(len(t.watchers) for t in self._tables_of(resource))

    def live_watch_starts(self, resource: ResourceType | str | None = None) -> builtins.list[int]:
        """The version each registered watch that has not been ended (dropped or sent an
        error) was opened at, sorted: which watch requests the server is serving now."""
        with self._lock:
            return sorted(
                w.start_rv
                for t in self._tables_of(resource)
                for w in t.watchers
                if not w.dropped and w.forced_error is None
            )

    def wait_for(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        predicate: Callable[[JsonDict | None], bool],
        timeout: float = 10.0,
    ) -> JsonDict | None:
        """Block until `predicate(object or None when absent)` holds; return what it saw.

        Woken by every write of `resource`, never by polling. Raises TimeoutError after
        `timeout` seconds, with the last state in the message. The predicate gets a copy.
        """
        table = self._table(resource)
        key = self._key(table.rt, namespace, name)
        seen: list[JsonDict | None] = [None]

        def check() -> bool:
            stored = table.objects.get(key)
            seen[0] = None if stored is None else self._copy(stored)
            return predicate(seen[0])

        with table.cond:
            if table.cond.wait_for(check, timeout):
                return seen[0]
        raise TimeoutError(
            f"{table.rt.group_resource} {'/'.join(k for k in key if k)}: "
            f"condition not met within {timeout}s; last state: {seen[0]}"
        )

    def wait_for_watchers(
        self, resource: ResourceType | str, count: int, timeout: float = 5.0
    ) -> bool:
        """Block until exactly `count` watches of `resource` are open (for tests)."""
        table = self._table(resource)
        with table.cond:
            return table.cond.wait_for(lambda: len(table.watchers) == count, timeout)
