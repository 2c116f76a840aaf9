"""The list/watch boundary of the informer stack and its adapter over the `kubernetes` client.

`ListerWatcher` is what a `Reflector` consumes: `list(options)` returns one page of raw objects
plus the list's resourceVersion and continue token; `watch(options)` returns a `Watcher`, an
iterator of `WatchEvent`s that ends when the stream closes (normally, or because the connection
broke: both look the same to the reflector, as in client-go's StreamWatcher) and can be stopped
from another thread. Failures are `controller.apiclient.errors.KubeApiError`s: by status for a
non-2xx answer, `KubeUnavailableError` when the server could not be reached. A watch `ERROR`
event is yielded as an event, not raised, so the reflector sees it in stream order.

`ListWatch` implements it for any resource served by a Kubernetes API server — core (`group=""`),
named groups and custom resources, namespaced or cluster-scoped — through the one request path
(`controller.apiclient.request`, over the official client's `ApiClient`), but reads the bytes
itself: list bodies
and watch lines go straight through `json.loads`, never through the generated model classes,
whose per-object deserialisation costs more CPU than the rest of the informer together.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3

from controller.apiclient.errors import KubeApiError
from controller.apiclient.request import read_all, send
from controller.cache.keys import Object

LOG = logging.getLogger(__name__)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class ListOptions:
    resource_version: str = ""
    limit: int = 0
    continue_: str = ""


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[Object]
    resource_version: str
    continue_: str = ""


@dataclass(frozen=True, slots=True)
class WatchOptions:
    resource_version: str = ""
    timeout_seconds: int | None = None
    allow_watch_bookmarks: bool = True


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    object: Object


class Watcher(Protocol):
    def __iter__(self) -> Iterator[WatchEvent]: ...

    def stop(self) -> None:
        """End the stream; safe from any thread, idempotent; iteration then ends promptly."""
        ...


class ListerWatcher(Protocol):
    def list(self, options: ListOptions) -> ListResult: ...

    def watch(self, options: WatchOptions) -> Watcher: ...


def resource_path(group: str, version: str, plural: str, namespace: str | None = None) -> str:
    """The collection URL path: `/api/v1/...` for core, `/apis/<group>/<version>/...` otherwise."""
    base = f"/api/{version}" if group in ("", "core") else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    return f"{base}/{plural}"


class RawWatcher:
    """A watch stream of newline-delimited JSON events over an urllib3 response."""

    _READ_SIZE = 1 << 16

    def __init__(self, response: Any, description: str) -> None:
        self._response = response
        self._description = description
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._reading = False  # a thread is inside __iter__: it releases the response itself

    def stop(self) -> None:
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            reading = self._reading
        try:
            # NOTE: shutdown() unblocks a read() parked in another thread; close() alone does not.
            self._response.shutdown()
        except Exception:  # the connection may already be gone
            LOG.debug("watch %s: shutdown failed", self._description, exc_info=True)
        if not reading:
            # NOTE: only without a reader: closing under a read races http.client's own close
            # of the chunked stream (AttributeError on a file already set to None).
            self._release()

    def _release(self) -> None:
        try:
            self._response.close()
            self._response.release_conn()
        except Exception:
            LOG.debug("watch %s: release failed", self._description, exc_info=True)

    def __iter__(self) -> Iterator[WatchEvent]:
        with self._lock:
            if self._stopped.is_set():
                return
            self._reading = True
        buffer = b""
        read1 = self._response.read1
        try:
            while not self._stopped.is_set():
                chunk = read1(self._READ_SIZE)
                if not chunk:
                    break
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = self._decode(line)
                    if event is not None:
                        yield event
            if buffer.strip() and not self._stopped.is_set():
                event = self._decode(buffer)
                if event is not None:
                    yield event
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            # A broken or timed-out stream ends the watch like a normal close does; the
            # reflector then re-watches from its last resourceVersion (client-go StreamWatcher).
            if not self._stopped.is_set():
                LOG.info("watch %s: stream ended: %s", self._description, exc)
        finally:
            self._release()

    def _decode(self, line: bytes) -> WatchEvent | None:
        if not line.strip():
            return None
        try:
            raw = json.loads(line)
        except ValueError:
            LOG.warning("watch %s: undecodable line skipped: %.200r", self._description, line)
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("object"), dict):
            LOG.warning("watch %s: malformed event skipped: %.200r", self._description, line)
            return None
        return WatchEvent(str(raw.get("type", "")), raw["object"])


class ListWatch:
    """`ListerWatcher` for one resource over a `kubernetes.client.ApiClient`.

    `namespace=None` lists across all namespaces (or a cluster-scoped resource). Selectors are
    sent with every list and watch request. `connect_timeout` bounds connection setup;
    `list_timeout` bounds a LIST read; a watch's read timeout is its `timeoutSeconds` plus
    `watch_read_margin`, so a dead connection is noticed rather than waited on forever.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        group: str = "",
        version: str = "v1",
        plural: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        connect_timeout: float = 10.0,
        list_timeout: float = 120.0,
        watch_read_margin: float = 30.0,
    ) -> None:
        if not plural or "/" in plural:
            raise ValueError(f"invalid resource plural {plural!r}")
        self._api_client = api_client
        self.path = resource_path(group, version, plural, namespace)
        self._selectors: list[tuple[str, str]] = []
        if label_selector:
            self._selectors.append(("labelSelector", label_selector))
        if field_selector:
            self._selectors.append(("fieldSelector", field_selector))
        self._connect_timeout = connect_timeout
        self._list_timeout = list_timeout
        self._watch_read_margin = watch_read_margin
        kind = plural[:-1] if plural.endswith("s") else plural
        self.description = f"{group or 'core'}/{version} {kind}"

    def _get(self, query: list[tuple[str, str]], timeout: tuple[float, float | None]) -> Any:
        return send(
            self._api_client, "GET", self.path, query=self._selectors + query, timeout=timeout
        )

    def list(self, options: ListOptions) -> ListResult:
        query: list[tuple[str, str]] = []
        if options.resource_version:
            query.append(("resourceVersion", options.resource_version))
        if options.limit:
            query.append(("limit", str(options.limit)))
        if options.continue_:
            query.append(("continue", options.continue_))
        raw = self._get(query, (self._connect_timeout, self._list_timeout))
        try:
            decoded = json.loads(read_all(raw))
        except ValueError as exc:
            raise KubeApiError(500, "InvalidResponse", f"undecodable list body: {exc}") from exc
        if not isinstance(decoded, dict):
            raise KubeApiError(500, "InvalidResponse", "list body is not an object")
        meta = decoded.get("metadata") or {}
        items = decoded.get("items") or []
        # NOTE: list items lack kind/apiVersion while watch objects carry them; restore them so
        # handlers see the same shape whichever way an object reached the cache.
        kind = str(decoded.get("kind", ""))
        if kind.endswith("List"):
            item_kind, api_version = kind[:-4], decoded.get("apiVersion")
            for item in items:
                if isinstance(item, dict):
                    item.setdefault("kind", item_kind)
                    item.setdefault("apiVersion", api_version)
        return ListResult(
            items=[i for i in items if isinstance(i, dict)],
            resource_version=str(meta.get("resourceVersion", "")),
            continue_=str(meta.get("continue", "") or ""),
        )

    def watch(self, options: WatchOptions) -> Watcher:
        query = [("watch", "true")]
        if options.resource_version:
            query.append(("resourceVersion", options.resource_version))
        if options.allow_watch_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        read_timeout: float | None = None
        if options.timeout_seconds is not None:
            query.append(("timeoutSeconds", str(options.timeout_seconds)))
            read_timeout = options.timeout_seconds + self._watch_read_margin
        raw = self._get(query, (self._connect_timeout, read_timeout))
        return RawWatcher(raw, self.description)
