"""SharedIndexInformer: one list/watch, one indexed cache, many event handlers (client-go).

Pipeline: `Reflector` → `RealFIFO` → this informer's delta processing (update the indexer first,
then notify) → one `ProcessorListener` per registered handler, each with its own unbounded buffer
and thread, so a slow handler delays only itself.

Handler-visible contract (client-go 0.36 with RealFIFO in atomic mode; see fifo.py; the handler
types are in handlers.py, the per-handler buffers in processor_listener.py):

* `on_add(obj, is_in_initial_list)`, `on_update(old, new)`, `on_delete(obj)` run on the
  handler's own thread, one at a time, in event order. The indexer already reflects the event.
* A relist delivers `on_delete(DeletedFinalStateUnknown(key, last_cached_obj))` for every object
  that vanished meanwhile, then `on_update`/`on_add` for every listed object in list order.
* Updates whose old and new resourceVersion are equal (resyncs, unchanged objects in a relist) are
  "sync" notifications: they reach only handlers due for resync; with resync period 0 that is
  every handler (client-go's flags start true and are never recomputed).
* A handler registered after `run` first receives `on_add(obj, True)` for every cached object.
* `has_synced()` of the informer: the initial list has been processed into the indexer. A
  registration's `has_synced()`: that, and its handler has returned from every initial add.
* A handler that raises is logged; the notification is skipped and the handler paused for 1 s
  (client-go with ReallyCrash=false). An initial add that raised never counts as finished, so
  that registration never reports synced — a crashing handler is a bug to fix, not to hide.

Objects are the raw JSON dicts; by default `metadata.managedFields` is dropped on the way in.
They are shared by every handler and lister: treat them as immutable.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from controller.cache.errors import InformerStoppedError
from controller.cache.fifo import (
    Delta,
    DeltaType,
    FIFOClosedError,
    RealFIFO,
    ReplacedAllInfo,
    Transformer,
)
from controller.cache.handlers import (
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
)
from controller.cache.keys import (
    DeletedFinalStateUnknown,
    deletion_handling_meta_namespace_key_func,
    has_meta,
    resource_version,
)
from controller.cache.listers import Lister
from controller.cache.listwatch import ListerWatcher
from controller.cache.processor_listener import (
    NOTIFY_ADD,
    NOTIFY_DELETE,
    NOTIFY_UPDATE,
    Notification,
    ProcessorListener,
    ResourceEventHandlerRegistration,
)
from controller.cache.reflector import Reflector
from controller.cache.store import NAMESPACE_INDEX, Indexer, Indexers, meta_namespace_index_func
from controller.queues.clock import REAL_CLOCK, Clock

LOG = logging.getLogger(__name__)

MINIMUM_RESYNC_PERIOD = 1.0
REFLECTOR_JOIN_GRACE = 5.0


def strip_managed_fields(obj: Any) -> Any:
    """The default transform: drop `metadata.managedFields` (large, never read by controllers)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _determine_resync_period(requested: float, check: float) -> float:
    if requested == 0:
        return 0.0
    if check == 0:
        LOG.warning("resync period %s requested but the informer does not resync", requested)
        return 0.0
    return max(requested, check)


class SharedIndexInformer:
    """A shared, indexed cache of one resource with event handlers; see the module docstring."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        *,
        resync_period: float = 0.0,
        indexers: Indexers | None = None,
        transform: Transformer | None = strip_managed_fields,
        name: str = "informer",
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
        min_watch_timeout: float = 300.0,
        page_size: int = 0,
    ) -> None:
        if resync_period < 0:
            raise ValueError(f"resync_period must be >= 0, got {resync_period}")
        self.name = name
        self._lw = lister_watcher
        self._indexer = Indexer(
            deletion_handling_meta_namespace_key_func,
            {NAMESPACE_INDEX: meta_namespace_index_func} if indexers is None else indexers,
        )
        self._default_resync = resync_period
        self._resync_check_period = resync_period
        self._transform = transform
        self._clock = clock
        self._rng = rng or random.Random()
        self._min_watch_timeout = min_watch_timeout
        self._page_size = page_size
        self._state_lock = threading.Lock()
        # NOTE: held while a delta is applied and notified, and while a handler joins late, so a
        # late handler's replay of the cache and the live events never interleave.
        self._block_deltas = threading.RLock()
        self._listeners: list[ProcessorListener] = []
        self._started = False
        self._stopped = False
        self._fifo: RealFIFO | None = None
        self._reflector: Reflector | None = None
        self._stop_event: threading.Event | None = None
        self._synced = threading.Event()

    # -- configuration --------------------------------------------------------------------

    @property
    def indexer(self) -> Indexer:
        return self._indexer

    def get_indexer(self) -> Indexer:
        return self._indexer

    def lister(self, resource: str) -> Lister:
        """A `Lister` over this cache; `resource` is the singular kind for not-found errors."""
        return Lister(self._indexer, resource)

    def add_indexers(self, indexers: Indexers) -> None:
        with self._state_lock:
            if self._stopped:
                raise InformerStoppedError("indexer was not added because it has stopped already")
        self._indexer.add_indexers(indexers)

    def set_transform(self, transform: Transformer | None) -> None:
        with self._state_lock:
            if self._started:
                raise InformerStoppedError("informer has already started")
            self._transform = transform

    # -- handlers -------------------------------------------------------------------------

    def add_event_handler(
        self,
        handler: ResourceEventHandler | None = None,
        *,
        on_add: Callable[[Any], None] | None = None,
        on_update: Callable[[Any, Any], None] | None = None,
        on_delete: Callable[[Any], None] | None = None,
        resync_period: float | None = None,
    ) -> ResourceEventHandlerRegistration:
        """Register a handler object, or plain callbacks (not both)."""
        if handler is None:
            handler = ResourceEventHandlerFuncs(on_add, on_update, on_delete)
        elif on_add or on_update or on_delete:
            raise ValueError("pass either a handler or on_add/on_update/on_delete callbacks")
        requested = self._default_resync if resync_period is None else resync_period
        if requested < 0:
            raise ValueError(f"resync_period must be >= 0, got {requested}")
        with self._block_deltas:
            with self._state_lock:
                if self._stopped:
                    raise InformerStoppedError(
                        f"handler {handler!r} was not added to shared informer because it has "
                        "stopped already"
                    )
                if requested > 0:
                    requested = max(requested, MINIMUM_RESYNC_PERIOD)
                    if requested < self._resync_check_period:
                        if self._started:
                            requested = self._resync_check_period
                        else:
                            self._resync_check_period = requested
                            for other in self._listeners:
                                other.resync_period = _determine_resync_period(
                                    other.requested_resync_period, requested
                                )
                listener = ProcessorListener(
                    handler,
                    requested,
                    _determine_resync_period(requested, self._resync_check_period),
                    self.has_synced,
                    self._clock,
                    f"{self.name}-handler-{len(self._listeners)}",
                )
                listener.determine_next_resync(self._clock.now())
                self._listeners.append(listener)
                started = self._started
            if started:
                # Late join: replay the cache as initial adds before any later event (both
                # happen under block_deltas, so they cannot interleave).
                listener.start()
                for obj in self._indexer.list():
                    listener.add((NOTIFY_ADD, obj, True))
        return ResourceEventHandlerRegistration(self, listener)

    def remove_event_handler(self, registration: ResourceEventHandlerRegistration) -> None:
        """Unregister; unknown, foreign or already removed handles are ignored."""
        if registration._informer is not self:
            return
        with self._block_deltas, self._state_lock:
            listener = registration._listener
            if listener not in self._listeners:
                return
            self._listeners.remove(listener)
        listener.stop()

    # -- lifecycle ------------------------------------------------------------------------

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def is_stopped(self) -> bool:
        with self._state_lock:
            return self._stopped

    def last_sync_resource_version(self) -> str:
        reflector = self._reflector
        return reflector.last_sync_resource_version() if reflector is not None else ""

    @property
    def reflector(self) -> Reflector | None:
        return self._reflector

    def start(self, stop: threading.Event | None = None) -> threading.Thread:
        """`run` on a daemon thread; returns the thread."""
        thread = threading.Thread(target=self.run, args=(stop,), name=self.name, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Ask a running informer to stop (same as setting the event `run` was given)."""
        with self._state_lock:
            event = self._stop_event
            if event is None:
                self._stop_event = event = threading.Event()
        event.set()

    def run(self, stop: threading.Event | None = None) -> None:
        """List, watch and dispatch until `stop` (or `self.stop()`) is set. Blocks."""
        with self._state_lock:
            if self._started:
                LOG.warning("%s: already started", self.name)
                return
            if self._stop_event is not None and stop is not None and self._stop_event.is_set():
                stop.set()
            if stop is None:
                stop = self._stop_event or threading.Event()
            self._stop_event = stop
            fifo = RealFIFO(self._transform)
            self._fifo = fifo
            self._reflector = Reflector(
                self._lw,
                fifo,
                name=self.name,
                resync_period=self._resync_check_period,
                should_resync=self._should_resync,
                min_watch_timeout=self._min_watch_timeout,
                page_size=self._page_size,
                clock=self._clock,
                rng=self._rng,
            )
            self._started = True
        with self._block_deltas:
            for listener in self._listeners:
                listener.start()
        reflector_thread = threading.Thread(
            target=self._reflector.run, args=(stop,), name=f"{self.name}-reflector", daemon=True
        )
        reflector_thread.start()
        closer = threading.Thread(
            target=self._close_on, args=(stop, fifo), name=f"{self.name}-closer", daemon=True
        )
        closer.start()
        try:
            self._process_loop(fifo, stop)
        finally:
            fifo.close()
            # NOTE: a LIST in flight cannot be interrupted; like client-go we do not wait for it
            # beyond a grace period (the thread is a daemon and ends when the call returns).
            reflector_thread.join(REFLECTOR_JOIN_GRACE)
            if reflector_thread.is_alive():
                LOG.warning("%s: reflector still busy with a request; not waiting", self.name)
            with self._state_lock:
                self._stopped = True
                listeners = list(self._listeners)
            for listener in listeners:
                listener.stop()
            for listener in listeners:
                listener.join(5.0)
            LOG.debug("%s: stopped", self.name)

    @staticmethod
    def _close_on(stop: threading.Event, fifo: RealFIFO) -> None:
        stop.wait()
        fifo.close()

    def _process_loop(self, fifo: RealFIFO, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                fifo.pop(self._handle_delta)
            except FIFOClosedError:
                return
            except Exception:
                # NOTE: client-go drops a delta whose processing failed; so do we, loudly.
                LOG.exception("%s: processing an event failed; event dropped", self.name)
            if not self._synced.is_set() and fifo.has_synced():
                self._synced.set()

    # -- delta processing (client-go processDeltas, atomic RealFIFO flavour) --------------

    def _handle_delta(self, delta: Delta, is_in_initial_list: bool) -> None:
        with self._block_deltas:
            indexer = self._indexer
            dtype, obj = delta.type, delta.obj
            if dtype in (DeltaType.ADDED, DeltaType.UPDATED):
                old = indexer.get(obj)
                if old is not None:
                    indexer.update(obj)
                    self._on_update(old, obj)
                else:
                    indexer.add(obj)
                    self._distribute((NOTIFY_ADD, obj, is_in_initial_list), False)
            elif dtype == DeltaType.DELETED:
                indexer.delete(obj)
                self._distribute((NOTIFY_DELETE, obj, None), False)
            elif dtype == DeltaType.REPLACED_ALL:
                self._replace_all(delta.obj, is_in_initial_list)
            elif dtype == DeltaType.SYNC_ALL:
                for cached in indexer.list():
                    self._distribute((NOTIFY_UPDATE, cached, cached), True)
            elif dtype == DeltaType.BOOKMARK:
                indexer.bookmark(obj)

    def _replace_all(self, info: ReplacedAllInfo, is_in_initial_list: bool) -> None:
        indexer = self._indexer
        key_func = indexer.key_func
        old_items = dict(indexer.items())
        new_items = {key_func(o): o for o in info.objects}
        deletions = [
            DeletedFinalStateUnknown(k, old) for k, old in old_items.items() if k not in new_items
        ]
        indexer.replace_keyed(new_items, info.resource_version)
        for tombstone in deletions:
            self._distribute((NOTIFY_DELETE, tombstone, None), False)
        adds: list[Notification] = []
        for key, obj in new_items.items():
            old = old_items.get(key)
            if old is None:
                adds.append((NOTIFY_ADD, obj, is_in_initial_list))
                continue
            if adds:  # keep list order: flush the adds queued before this update
                self._distribute_many(adds)
                adds = []
            self._on_update(old, obj)
        if adds:
            self._distribute_many(adds)

    def _on_update(self, old: Any, new: Any) -> None:
        is_sync = (
            has_meta(old) and has_meta(new) and (resource_version(old) == resource_version(new))
        )
        self._distribute((NOTIFY_UPDATE, old, new), is_sync)

    def _distribute_many(self, ns: list[Notification]) -> None:
        """Non-sync notifications in bulk (one lock round trip per listener)."""
        for listener in self._listeners:
            listener.add_many(ns)

    def _distribute(self, n: Notification, sync: bool) -> None:
        for listener in self._listeners:
            if not sync or listener.syncing:
                listener.add(n)

    def _should_resync(self) -> bool:
        with self._block_deltas:
            now = self._clock.now()
            due = False
            for listener in self._listeners:
                if listener.should_resync(now):
                    due = True
            return due

    def notifications_handled(self) -> bool:
        """Every handler has handled every notification of the objects now in the cache: the
        cache update and its distribution are one step under the same lock, so an object seen in
        the cache before this returns True has been through every handler."""
        with self._block_deltas:
            return all(listener.idle() for listener in self._listeners)

    def pending_notifications(self) -> int:
        """Notifications buffered across all handlers (observability, benchmarks)."""
        with self._block_deltas:
            return sum(listener.pending() for listener in self._listeners)
