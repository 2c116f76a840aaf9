"""One registered handler's side of a shared informer (client-go `processorListener`).

Each handler gets an unbounded buffer and its own thread, so a slow handler delays only itself.
Notifications are tuples for speed: `(kind, a, b)` with kind `NOTIFY_ADD` (a=obj, b=in the
initial list), `NOTIFY_UPDATE` (a=old, b=new) or `NOTIFY_DELETE` (a=obj). A handler that raises
is logged and paused for `HANDLER_ERROR_PAUSE`; an initial add that raised never counts as
finished, so its registration never reports synced.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from controller.cache.handlers import ResourceEventHandler
from controller.queues.clock import Clock

if TYPE_CHECKING:
    from controller.cache.shared_informer import SharedIndexInformer

LOG = logging.getLogger(__name__)

HANDLER_ERROR_PAUSE = 1.0

NOTIFY_ADD, NOTIFY_UPDATE, NOTIFY_DELETE = 0, 1, 2
Notification = tuple[int, Any, Any]


class ProcessorListener:
    """One handler's buffer and thread (client-go processorListener)."""

    def __init__(
        self,
        handler: ResourceEventHandler,
        requested_resync_period: float,
        resync_period: float,
        upstream_synced: Callable[[], bool],
        clock: Clock,
        name: str,
    ) -> None:
        self.handler = handler
        self.requested_resync_period = requested_resync_period
        self.resync_period = resync_period
        self.next_resync = 0.0
        self.syncing = True
        self._upstream_synced = upstream_synced
        self._clock = clock
        self._name = name
        self._cond = threading.Condition()
        self._buffer: deque[Notification] = deque()
        self._handling = False  # a notification popped and not yet handled
        self._pending_initial = 0
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, n: Notification) -> None:
        with self._cond:
            if self._closed.is_set():
                return
            if n[0] == NOTIFY_ADD and n[2]:
                self._pending_initial += 1
            self._buffer.append(n)
            self._cond.notify()

    def add_many(self, ns: list[Notification]) -> None:
        with self._cond:
            if self._closed.is_set():
                return
            self._pending_initial += sum(1 for n in ns if n[0] == NOTIFY_ADD and n[2])
            self._buffer.extend(ns)
            self._cond.notify()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._closed.set()
            self._buffer.clear()
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def pending(self) -> int:
        with self._cond:
            return len(self._buffer)

    def idle(self) -> bool:
        """Nothing buffered and no notification in the handler."""
        with self._cond:
            return not self._buffer and not self._handling

    def has_synced(self) -> bool:
        with self._cond:
            pending = self._pending_initial
        return pending == 0 and self._upstream_synced()

    def determine_next_resync(self, now: float) -> None:
        self.next_resync = now + self.resync_period

    def should_resync(self, now: float) -> bool:
        self.syncing = self.resync_period != 0 and now >= self.next_resync
        if self.syncing:
            self.next_resync = now + self.resync_period
        return self.syncing

    def _run(self) -> None:
        handler = self.handler
        finished_initial = False  # the notification just handled was an initial add
        while True:
            with self._cond:
                # what the last handler call finished is recorded under the lock that takes
                # the next notification: one lock round trip per notification
                self._handling = False
                if finished_initial:
                    self._pending_initial -= 1
                while not self._buffer and not self._closed.is_set():
                    self._cond.wait()
                if self._closed.is_set():
                    return
                kind, a, b = self._buffer.popleft()
                self._handling = True
            finished_initial = False
            try:
                if kind == NOTIFY_ADD:
                    handler.on_add(a, b)
                elif kind == NOTIFY_UPDATE:
                    handler.on_update(a, b)
                else:
                    handler.on_delete(a)
            except Exception:
                LOG.exception("%s: event handler failed", self._name)
                with self._cond:
                    self._handling = False
                self._clock.sleep(HANDLER_ERROR_PAUSE, self._closed)
                continue
            finished_initial = kind == NOTIFY_ADD and bool(b)


class ResourceEventHandlerRegistration:
    """The handle `add_event_handler` returns; pass it to `remove_event_handler`."""

    def __init__(self, informer: SharedIndexInformer, listener: ProcessorListener) -> None:
        self._informer = informer
        self._listener = listener

    def has_synced(self) -> bool:
        return self._listener.has_synced()

    @property
    def handler(self) -> ResourceEventHandler:
        return self._listener.handler
