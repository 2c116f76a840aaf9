"""The Reflector: keeps a store in step with the API server by list-then-watch (client-go).

Contract (client-go 0.36 `reflector.go`, without the streaming watch-list mode):

* `run(stop)` calls `list_and_watch` at once and again after every return, waiting a backoff
  delay in between (0.8 s doubling to a 30 s cap, each delay jittered to `[d, 2d)`, the
  sequence reset every 2 minutes), until `stop` is set. `list_and_watch(stop)` itself returns
  without error soon after `stop` is set, also while a watch is open: setting `stop` stops the
  stream, whoever the caller is (a LIST in flight is not interrupted).
* The first LIST asks for `resourceVersion=0` in pages of 500; later relists ask for the last
  synced RV, unpaginated. A LIST answered 410 (or "RV too large") is retried at once with
  `resourceVersion=""`. A 410 on a continuation page triggers one full list instead.
  The result goes into the store with one `replace(items, rv)`.
* The watch starts from the list's RV with bookmarks and a random `timeoutSeconds` in
  `[min, 2·min)` (min 300 s). When the server closes the stream normally, or the connection
  breaks after events arrived, the reflector re-watches from the last RV with no relist and no
  delay. ADDED/MODIFIED/DELETED/BOOKMARK become store add/update/delete/bookmark; the last
  event's RV becomes the watch position (no max, as in client-go).
* A watch ERROR 410 ends the watch quietly; the next `list_and_watch`, after the backoff delay,
  relists from the last RV. Connection refused or 429 when starting a watch, or a 429 event,
  back off and re-watch without relisting. A 500 InternalError re-watches at once only within
  `max_internal_error_retry_duration` (default 0: never). Anything else, including a watch that
  closed within a second with no events, ends the cycle and leads to a relist after backoff.
* With `resync_period > 0` a resync timer calls `store.resync()` every period while watching
  (when `should_resync()` agrees). A resync that raises ends the watch and `list_and_watch`
  (logged as "watch ended with error", returning normally as client-go's ListAndWatch does), so
  `run` relists after the backoff delay.

All waits go through the injected `Clock` and all randomness through the injected
`random.Random`, so tests drive timing without sleeping.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from controller.apiclient.errors import KubeApiError, StatusError
from controller.cache.backoff import (
    INTERNAL_ERROR_RESET_PERIOD,
    Backoff,
    DelayWithReset,
    RetryWithDeadline,
)
from controller.cache.errors import (
    CacheError,
    is_connection_refused,
    is_expired,
    is_internal_error,
    is_too_large_resource_version,
    is_too_many_requests,
)
from controller.cache.keys import has_meta, resource_version
from controller.cache.listwatch import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    MODIFIED,
    ListerWatcher,
    ListOptions,
    ListResult,
    Watcher,
    WatchOptions,
)
from controller.cache.stop_callbacks import ON_STOP
from controller.queues.clock import REAL_CLOCK, Clock

LOG = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 500
MIN_WATCH_TIMEOUT = 300.0


class ReflectorStore(Protocol):
    """What a reflector writes to (the informer's RealFIFO, or a plain store adapter)."""

    def add(self, obj: Any) -> None: ...
    def update(self, obj: Any) -> None: ...
    def delete(self, obj: Any) -> None: ...
    def replace(self, objs: Iterable[Any], resource_version: str) -> None: ...
    def resync(self) -> None: ...
    def bookmark(self, resource_version: str) -> None: ...


class ListError(CacheError):
    """LIST failed; `list_and_watch` ends and the reflector relists after a backoff delay."""


class VeryShortWatchError(CacheError):
    """The watch closed within a second without delivering anything."""


def log_watch_error(name: str, err: BaseException) -> None:
    """client-go's DefaultWatchErrorHandler: an expired watch is routine, anything else is not."""
    if is_expired(err):
        LOG.info("%s: watch closed: %s", name, err)
    else:
        LOG.warning("%s: failed to list/watch: %s", name, err)


class _Stopped(Exception):
    """Internal: stop was requested while handling a watch."""


class _ResyncFailure:
    """The error a resync raised, handed from the resync thread to the watch loop."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None


class Reflector:
    """List-then-watch loop feeding a `ReflectorStore`; see the module docstring."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        store: ReflectorStore,
        *,
        name: str = "reflector",
        resync_period: float = 0.0,
        should_resync: Callable[[], bool] | None = None,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        page_size: int = 0,
        max_internal_error_retry_duration: float = 0.0,
        backoff: Backoff | None = None,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self._lw = lister_watcher
        self._store = store
        self._resync_period = resync_period
        self._should_resync = should_resync
        self._min_watch_timeout = max(min_watch_timeout, MIN_WATCH_TIMEOUT)
        self._max_watch_timeout = 2 * self._min_watch_timeout
        self._page_size = page_size
        self._clock = clock
        self._rng = rng or random.Random()
        self._delay = DelayWithReset(backoff or Backoff(), clock, self._rng)
        self._internal_retry = RetryWithDeadline(
            max_internal_error_retry_duration, INTERNAL_ERROR_RESET_PERIOD, clock
        )
        self._lock = threading.Lock()
        self._last_sync_rv = ""
        self._rv_unavailable = False
        self._paginated_result = False
        self._watcher: Watcher | None = None
        #: Counters for observability and tests: how many LIST cycles / watch requests ran.
        self.list_count = 0
        self.watch_count = 0

    # -- public ---------------------------------------------------------------------------

    def last_sync_resource_version(self) -> str:
        with self._lock:
            return self._last_sync_rv

    def run(self, stop: threading.Event) -> None:
        """Block, listing and watching, until `stop` is set."""
        LOG.debug("%s: starting", self.name)
        while not stop.is_set():
            try:
                self.list_and_watch(stop)
            except Exception as err:
                if stop.is_set():
                    break
                log_watch_error(self.name, err)
            if stop.is_set() or self._clock.sleep(self._delay(), stop):
                break
        LOG.debug("%s: stopped", self.name)

    def interrupt(self) -> None:
        """Stop the current watch stream (the loop itself continues unless stop is set)."""
        with self._lock:
            watcher = self._watcher
        if watcher is not None:
            watcher.stop()

    def list_and_watch(self, stop: threading.Event) -> None:
        """One LIST, then watch until the watch ends; returns without error once `stop` is set.

        Setting `stop` interrupts an open watch stream (an idle one would otherwise block until
        its server-side timeout), whether or not `run` is the caller.
        """
        if stop.is_set():
            return
        unlink = ON_STOP.register(stop, self.interrupt)
        try:
            self._list()
            if stop.is_set():
                return
            self._watch_with_resync(stop)
        finally:
            unlink()

    # -- list -----------------------------------------------------------------------------

    def _relist_resource_version(self) -> str:
        with self._lock:
            if self._rv_unavailable:
                return ""
            return self._last_sync_rv or "0"

    def _list(self) -> None:
        rv = self._relist_resource_version()
        limit = self._page_size or DEFAULT_PAGE_SIZE
        if not self._page_size and not self._paginated_result and rv not in ("", "0"):
            # NOTE: relists from a known RV are served from the watch cache: unpaginated.
            limit = 0
        self.list_count += 1
        try:
            try:
                items, list_rv, paginated = self._paged_list(rv, limit)
            except KubeApiError as err:
                if not (is_expired(err) or is_too_large_resource_version(err)):
                    raise
                LOG.info(
                    "%s: list at RV %r failed (%s), relisting at the latest", self.name, rv, err
                )
                with self._lock:
                    self._rv_unavailable = True
                items, list_rv, paginated = self._paged_list("", limit)
        except Exception as err:
            raise ListError(f"{self.name}: failed to list: {err}") from err
        with self._lock:
            self._rv_unavailable = False
            if rv == "0" and paginated:
                self._paginated_result = True
        self._store.replace(items, list_rv)
        with self._lock:
            self._last_sync_rv = list_rv
        LOG.debug("%s: listed %d objects at RV %s", self.name, len(items), list_rv)

    def _paged_list(self, rv: str, limit: int) -> tuple[list[Any], str, bool]:
        first = self._lw.list(ListOptions(resource_version=rv, limit=limit))
        if not first.continue_:
            return first.items, first.resource_version, False
        items = list(first.items)
        page: ListResult = first
        while page.continue_:
            try:
                page = self._lw.list(ListOptions(limit=limit, continue_=page.continue_))
            except KubeApiError as err:
                if not is_expired(err):
                    raise
                # NOTE: pager FullListIfExpired: one unpaginated list at the original RV.
                full = self._lw.list(ListOptions(resource_version=rv))
                return full.items, full.resource_version, True
            items.extend(page.items)
        return items, page.resource_version, True

    # -- watch ----------------------------------------------------------------------------

    def _watch_with_resync(self, stop: threading.Event) -> None:
        done = threading.Event()
        failure = _ResyncFailure()
        resyncer = None
        if self._resync_period > 0:
            resyncer = threading.Thread(
                target=self._resync_loop,
                args=(stop, done, failure),
                name=f"{self.name}-resync",
                daemon=True,
            )
            resyncer.start()
        try:
            self._watch(stop, failure)
        finally:
            done.set()
            if resyncer is not None:
                resyncer.join()

    def _resync_loop(
        self, stop: threading.Event, done: threading.Event, failure: _ResyncFailure
    ) -> None:
        while not self._clock.sleep(self._resync_period, done):
            if stop.is_set():
                return
            if self._should_resync is None or self._should_resync():
                LOG.debug("%s: forcing resync", self.name)
                try:
                    self._store.resync()
                except Exception as err:
                    # client-go: the error goes to the watch loop, which ends the watch and
                    # ListAndWatch; no further resync runs on this watch.
                    failure.error = err
                    self.interrupt()
                    return

    def _resync_failed(self, failure: _ResyncFailure) -> bool:
        if failure.error is None:
            return False
        LOG.warning("%s: watch ended with error: resync failed: %s", self.name, failure.error)
        return True

    def _watch(self, stop: threading.Event, failure: _ResyncFailure) -> None:
        while not stop.is_set():
            if self._resync_failed(failure):
                return
            rv = self.last_sync_resource_version()
            started = self._clock.now()
            watcher = self._start_watch(rv, stop)
            if watcher is None:
                if stop.is_set():
                    return
                continue
            with self._lock:
                self._watcher = watcher
            if stop.is_set() or failure.error is not None:
                # the stop callback or the failed resync may have interrupted before this
                # watcher existed
                watcher.stop()
            try:
                err: BaseException | None = self._handle_watch(
                    watcher, stop, started, rv not in ("", "0")
                )
            except _Stopped:
                return
            finally:
                watcher.stop()
                with self._lock:
                    self._watcher = None
            if self._resync_failed(failure):
                return
            if err is not None and not self._rewatch_after(err, stop):
                return
            # else a normal close: re-watch from the last RV, no relist, no delay

    def _start_watch(self, rv: str, stop: threading.Event) -> Watcher | None:
        """A watch from `rv` with a random timeout in [min, 2·min); None after backing off
        from a refused connection or a 429 (the caller re-watches unless `stop` was set)."""
        timeout = int(
            self._min_watch_timeout
            + self._rng.random() * (self._max_watch_timeout - self._min_watch_timeout)
        )
        options = WatchOptions(
            resource_version=rv, timeout_seconds=timeout, allow_watch_bookmarks=True
        )
        self.watch_count += 1
        try:
            return self._lw.watch(options)
        except Exception as start_err:
            if is_connection_refused(start_err) or is_too_many_requests(start_err):
                LOG.info("%s: watch start failed (%s), backing off", self.name, start_err)
                self._clock.sleep(self._delay(), stop)
                return None
            raise

    def _rewatch_after(self, err: BaseException, stop: threading.Event) -> bool:
        """Whether the watch loop re-watches after a watch ended with `err` (after a backoff
        for a 429; at once for an InternalError within its retry window); else it relists."""
        if stop.is_set():
            return False
        if is_expired(err):
            LOG.info("%s: watch closed with %s, will relist", self.name, err)
            return False
        if is_too_many_requests(err):
            return not self._clock.sleep(self._delay(), stop)
        if is_internal_error(err):
            self._internal_retry.after(err)
            if self._internal_retry.should_retry():
                LOG.info("%s: retrying watch after internal error: %s", self.name, err)
                return True
        LOG.warning("%s: watch ended with error: %s", self.name, err)
        return False

    def _handle_watch(
        self,
        watcher: Watcher,
        stop: threading.Event,
        started: float,
        propagate_rv_from_start: bool,
    ) -> BaseException | None:
        store = self._store
        count = 0
        besides_added = False
        for event in watcher:
            if stop.is_set():
                raise _Stopped
            etype, obj = event.type, event.object
            if etype == ERROR:
                return StatusError.from_status(obj)
            if not has_meta(obj):
                LOG.warning("%s: skipping %s event without metadata", self.name, etype)
                continue
            if etype == ADDED:
                store.add(obj)
            elif etype == MODIFIED:
                store.update(obj)
                besides_added = True
            elif etype == DELETED:
                store.delete(obj)
                besides_added = True
            elif etype == BOOKMARK:
                store.bookmark(resource_version(obj))
                besides_added = True
            else:
                LOG.warning("%s: unknown watch event type %r", self.name, etype)
                continue
            if propagate_rv_from_start or besides_added:
                rv = resource_version(obj)
                with self._lock:
                    self._last_sync_rv = rv
            count += 1
        if stop.is_set():
            raise _Stopped
        if count == 0 and self._clock.now() - started < 1.0:
            return VeryShortWatchError(
                f"very short watch: {self.name}: unexpected watch close - watch lasted less "
                "than a second and no items received"
            )
        return None
