"""Kubernetes Event recording: client-go's correlation, lite, behind a bounded non-blocking buffer.

Contract:

* `EventCorrelator` is pure (clocks injected): the first (object, type, reason, message) seen
  becomes a new core/v1 Event; the same tuple seen again within `window` seconds becomes a patch
  of that Event's `count`/`lastTimestamp` instead of a new object (client-go's `eventLogger`;
  its spam filter and similar-message aggregation are not reproduced). The cache is an LRU of
  `max_entries` tuples, as client-go's.
* `BackgroundEventRecorder.event()` only validates its arguments and appends to a bounded buffer:
  it never blocks a worker and never raises on API trouble. A full buffer drops the event with a
  log line and counts it (`dropped`, `on_drop`). One background thread correlates and writes;
  write failures are retried a few times (retryable errors only), then logged and dropped;
  a patch that finds the Event gone (TTL expired) re-creates it, as client-go does.
* `stop()` drains what is buffered (bounded by a timeout) and joins the thread.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from controller.apiclient.errors import AlreadyExistsError, KubeApiError, NotFoundError
from controller.kube.api import (
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    EventRecorder,
    EventSink,
    EventTarget,
    KubeObject,
    ObjectRef,
)
from controller.queues.clock import REAL_CLOCK, Clock, WallClock, utcnow

LOG = logging.getLogger(__name__)

DEFAULT_COMPONENT = "ovn-controller"  # kube-ovn's recorder component (pkg/controller/controller.go)
MAX_MESSAGE_LEN = 1024  # events.k8s.io validation limit; nbctl output can be longer
_TRUNCATED = "..."


def _rfc3339(ts: datetime.datetime) -> str:
    # core/v1 Event timestamps are metav1.Time: second precision, UTC, "Z".
    return ts.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_object_ref(obj: EventTarget) -> ObjectRef:
    return ObjectRef.of(obj)


def validate_event(type_: str, reason: str, message: str) -> str:
    """Check arguments; return the message truncated to what the API accepts."""
    if type_ not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
        raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
    if not reason:
        raise ValueError("event reason must not be empty")
    if len(message) > MAX_MESSAGE_LEN:
        message = message[: MAX_MESSAGE_LEN - len(_TRUNCATED)] + _TRUNCATED
    return message


@dataclass(frozen=True, slots=True)
class EventWrite:
    """What the correlator decided: create a new Event, or patch an existing one."""

    action: Literal["create", "patch"]
    namespace: str
    name: str
    count: int
    body: dict[str, Any]  # the full Event for "create", the merge patch for "patch"
    # For "patch": the full Event (with the running count) to create if the target is gone.
    recreate: dict[str, Any] | None = None


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int
    first_timestamp: str
    last_seen: float  # monotonic


class EventCorrelator:
    """Decides create-vs-patch for each event. Not thread-safe: one caller at a time."""

    def __init__(
        self,
        *,
        component: str = DEFAULT_COMPONENT,
        host: str = "",
        window: float = 600.0,
        max_entries: int = 4096,
        clock: Clock = REAL_CLOCK,
        wall_clock: WallClock = utcnow,
    ) -> None:
        if window <= 0 or max_entries <= 0:
            raise ValueError("window and max_entries must be positive")
        self._component = component
        self._host = host
        self._window = window
        self._max_entries = max_entries
        self._clock = clock
        self._wall_clock = wall_clock
        self._seen: collections.OrderedDict[tuple[str, ...], _Seen] = collections.OrderedDict()
        # NOTE: client-go names Events "<object>.<unix nanos in hex>"; the counter keeps two
        # events recorded within one clock tick distinct.
        self._serial = itertools.count()

    def observe(self, ref: ObjectRef, type_: str, reason: str, message: str) -> EventWrite:
        now = self._clock.now()
        stamp = self._wall_clock()
        ts = _rfc3339(stamp)
        key = (
            self._component,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            type_,
            reason,
            message,
        )
        seen = self._seen.get(key)
        if seen is not None and now - seen.last_seen <= self._window:
            seen.count += 1
            seen.last_seen = now
            self._seen.move_to_end(key)
            patch = {"count": seen.count, "lastTimestamp": ts, "message": message}
            recreate = self._event_body(
                ref,
                type_,
                reason,
                message,
                seen.namespace,
                seen.name,
                seen.count,
                seen.first_timestamp,
                ts,
            )
            return EventWrite("patch", seen.namespace, seen.name, seen.count, patch, recreate)

        namespace = ref.namespace or "default"  # cluster-scoped objects: client-go's choice
        nanos = int(stamp.timestamp() * 1e9) + next(self._serial)
        name = f"{ref.name}.{nanos:x}"
        self._seen[key] = _Seen(name, namespace, 1, ts, now)
        self._seen.move_to_end(key)
        while len(self._seen) > self._max_entries:
            self._seen.popitem(last=False)
        body = self._event_body(ref, type_, reason, message, namespace, name, 1, ts, ts)
        return EventWrite("create", namespace, name, 1, body)

    def _event_body(
        self,
        ref: ObjectRef,
        type_: str,
        reason: str,
        message: str,
        namespace: str,
        name: str,
        count: int,
        first_timestamp: str,
        last_timestamp: str,
    ) -> dict[str, Any]:
        source = {"component": self._component}
        if self._host:
            source["host"] = self._host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref.to_involved_object(),
            "type": type_,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": first_timestamp,
            "lastTimestamp": last_timestamp,
            "count": count,
            "reportingComponent": self._component,
            "reportingInstance": self._host,
        }

    def forget_last(self, write: EventWrite) -> None:
        """Drop the cache entry behind a write that failed for good, so the next one creates."""
        for key, seen in list(self._seen.items()):
            if seen.name == write.name and seen.namespace == write.namespace:
                del self._seen[key]


def apply_event_write(sink: EventSink, write: EventWrite) -> KubeObject:
    """Perform one correlator decision against a sink, re-creating an Event that expired."""
    if write.action == "patch":
        try:
            return sink.patch_event(write.namespace, write.name, write.body)
        except NotFoundError:
            if write.recreate is None:
                raise
            # NOTE: client-go recreates too: Events have a TTL (1 h by default) and a long-lived
            # correlation entry can outlive its Event.
            LOG.debug("event %s/%s expired; re-creating it", write.namespace, write.name)
            return sink.create_event(write.namespace, write.recreate)
    return sink.create_event(write.namespace, write.body)


@dataclass(frozen=True, slots=True)
class _Pending:
    ref: ObjectRef
    type_: str
    reason: str
    message: str


class BackgroundEventRecorder:
    """`EventRecorder` that writes through a sink on its own thread.

    Guarantees: `event()` is O(1), lock-light and never blocks on I/O; at most `max_pending`
    events wait in memory; events are written in the order they were recorded.
    """

    def __init__(
        self,
        sink: EventSink,
        *,
        component: str = DEFAULT_COMPONENT,
        host: str = "",
        max_pending: int = 1000,
        window: float = 600.0,
        max_attempts: int = 3,
        retry_delay: float = 1.0,
        clock: Clock = REAL_CLOCK,
        wall_clock: WallClock = utcnow,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        if max_pending <= 0 or max_attempts <= 0 or retry_delay < 0:
            raise ValueError("max_pending and max_attempts must be positive, retry_delay >= 0")
        self._sink = sink
        self._max_pending = max_pending
        self._max_attempts = max_attempts
        self._retry_delay = retry_delay
        self._on_drop = on_drop
        self._correlator = EventCorrelator(
            component=component,
            host=host,
            window=window,
            clock=clock,
            wall_clock=wall_clock,
        )
        self._pending: collections.deque[_Pending] = collections.deque()
        self._cond = threading.Condition()
        self._busy = False
        self._stopping = False
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.written = 0
        self.failed = 0

    # --- EventRecorder ---------------------------------------------------------------------------
    def event(self, obj: EventTarget, type_: str, reason: str, message: str) -> None:
        ref = to_object_ref(obj)
        message = validate_event(type_, reason, message)
        with self._cond:
            if self._stopping or len(self._pending) >= self._max_pending:
                self.dropped += 1
                drop = True
            else:
                self._pending.append(_Pending(ref, type_, reason, message))
                self._cond.notify()
                drop = False
        if drop:
            LOG.warning(
                "dropping event %s %s on %s/%s: recorder %s",
                type_,
                reason,
                ref.namespace,
                ref.name,
                "stopped" if self._stopping else "buffer full",
            )
            if self._on_drop is not None:
                self._on_drop()

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("event recorder already started")
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._thread.start()

    def flush(self, timeout: float) -> bool:
        """Wait until every buffered event has been handled; `False` on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting events, write what is buffered (up to `timeout`), join the thread."""
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self.flush(timeout)
        with self._cond:
            self._stopping = True
            leftover = len(self._pending)
            self._pending.clear()  # flush timed out: give up on them rather than hang shutdown
            self.dropped += leftover
            self._cond.notify_all()
        if leftover:
            LOG.warning("event recorder stopped with %d unwritten events", leftover)
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._thread.is_alive():
                LOG.warning("event recorder thread did not stop within %.1fs", timeout)

    def __enter__(self) -> BackgroundEventRecorder:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- background thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    return
                item = self._pending.popleft()
                self._busy = True
            try:
                self._write(item)
            except Exception:  # the recorder thread must survive anything a sink does
                LOG.exception("unexpected error writing event %s", item.reason)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write(self, item: _Pending) -> None:
        write = self._correlator.observe(item.ref, item.type_, item.reason, item.message)
        for attempt in range(1, self._max_attempts + 1):
            try:
                apply_event_write(self._sink, write)
                self.written += 1
                return
            except AlreadyExistsError:
                # An earlier attempt did land (its response was lost): nothing left to do.
                self.written += 1
                return
            except KubeApiError as exc:
                if not exc.retryable or attempt == self._max_attempts:
                    self.failed += 1
                    self._correlator.forget_last(write)
                    LOG.warning(
                        "could not write event %s %s on %s/%s: %s",
                        item.type_,
                        item.reason,
                        item.ref.namespace,
                        item.ref.name,
                        exc,
                    )
                    return
                # Returns at once when stopping, so shutdown never waits out a backoff.
                self._stop_event.wait(self._retry_delay * attempt)


if TYPE_CHECKING:  # mypy proves the recorder satisfies the port

    def _conforms(r: BackgroundEventRecorder) -> EventRecorder:
        return r
