"""One resource's table (its objects, watch history and watchers) and the server-side watch.

A `Watcher` is a cursor into its resource's history plus a selector: it holds no queue of its
own, so a write costs one `notify_all` however many watchers there are. A watcher that falls
behind the history window ends with a 410, as a real apiserver's does.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.sandbox.apiserver.records import Key, Stored
from controller.sandbox.apiserver.resources import ApiError, ResourceType, too_old
from controller.sandbox.apiserver.selectors import Selector

if TYPE_CHECKING:
    from controller.sandbox.apiserver.revisions import VersionedTables


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    rv: int
    key: Key
    cur: Stored  # for DELETED: the last state, stamped with the deletion's resourceVersion
    prev: Stored | None  # the state before this event (None for ADDED)


@dataclass(slots=True)
class Table:
    rt: ResourceType
    cond: threading.Condition
    objects: dict[Key, Stored] = field(default_factory=dict)
    history: list[WatchEvent] = field(default_factory=list)
    history_start: int = 0  # history[:history_start] is compacted away, pending a trim
    trimmed_rv: int = 0  # the newest event dropped from history: watchers behind it are lost
    sorted_keys: list[Key] | None = None
    watchers: set[Watcher] = field(default_factory=set)

    def keys_sorted(self) -> list[Key]:
        if self.sorted_keys is None:
            self.sorted_keys = sorted(self.objects)
        return self.sorted_keys


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """What a watcher got from one wait: events to send, or why the stream ends."""

    events: list[tuple[str, bytes]]
    progress_rv: int
    error: ApiError | None = None  # send as an ERROR event, then end the stream
    dropped: bool = False  # end the stream abruptly (fault injection, server stop)


class Watcher:
    """A server-side watch: a cursor into one resource's history plus a selector.

    It holds no queue of its own: `next()` reads history past its cursor under the table's
    condition, so a write costs one `notify_all` however many watchers there are.
    """

    def __init__(
        self,
        store: VersionedTables,
        table: Table,
        selector: Selector,
        cursor: int,
        initial: list[Stored],
    ) -> None:
        self._store = store
        self._table = table
        self._selector = selector
        self.cursor = cursor
        self.start_rv = cursor  # the version the watch was opened at, for tests to name it by
        self.initial = initial
        self.dropped = False
        self.forced_error: ApiError | None = None

    @property
    def progress_rv(self) -> int:
        """Every event of this resource up to this version has been handed out."""
        return self.cursor

    def next(self, timeout: float | None) -> WatchBatch:
        """Wait up to `timeout` seconds for events past the cursor (or a drop) and return them."""
        table = self._table
        store = self._store
        with table.cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                if self.dropped or store.closed:
                    return WatchBatch([], self.cursor, dropped=True)
                if self.forced_error is not None:
                    return WatchBatch([], self.cursor, error=self.forced_error)
                if self.cursor < table.trimmed_rv:
                    # NOTE: a watcher that falls behind the history window has lost events it
                    # can never get back; a real apiserver ends such a watch the same way.
                    return WatchBatch([], self.cursor, error=too_old(self.cursor, table.trimmed_rv))
                hist = table.history
                if hist and hist[-1].rv > self.cursor:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    # Nothing of this resource happened up to the store's newest version.
                    self.cursor = max(self.cursor, store.resource_version)
                    return WatchBatch([], self.cursor)
                table.cond.wait(remaining)
            start = bisect.bisect_right(
                hist, self.cursor, lo=table.history_start, key=lambda e: e.rv
            )
            out: list[tuple[str, bytes]] = []
            for ev in hist[start:]:
                converted = self._convert(ev)
                if converted is not None:
                    out.append(converted)
            self.cursor = max(hist[-1].rv, store.resource_version)
            return WatchBatch(out, self.cursor)

    def _convert(self, ev: WatchEvent) -> tuple[str, bytes] | None:
        sel = self._selector
        if sel.is_everything:
            return ev.type, ev.cur.raw
        now = sel.matches(ev.cur.obj)
        if ev.type != "MODIFIED":
            return (ev.type, ev.cur.raw) if now else None
        before = ev.prev is not None and sel.matches(ev.prev.obj)
        if now:
            return ("MODIFIED" if before else "ADDED"), ev.cur.raw
        if before:
            # The object left the selector: watchers see it deleted, at this event's version.
            return "DELETED", ev.cur.raw
        return None

    def drop(self) -> None:
        """End this watch abruptly (its client went away, or a fault says so)."""
        with self._table.cond:
            self.dropped = True
            self._table.cond.notify_all()

    def close(self) -> None:
        with self._table.cond:
            self._table.watchers.discard(self)
            self._table.cond.notify_all()
