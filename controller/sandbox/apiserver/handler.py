"""The emulator's HTTP request handler: one request routed to discovery, a resource verb or a
watch stream, with the fault injector consulted first and every request logged once, before its
answer leaves. Every error is answered with a `Status` body.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from controller.sandbox.apiserver import openapi, resources, tables
from controller.sandbox.apiserver.bodies import (
    bookmark_line,
    chunks,
    event_line,
    list_body,
    parse_json_body,
)
from controller.sandbox.apiserver.discovery import discovery_answer
from controller.sandbox.apiserver.faults import RequestInfo
from controller.sandbox.apiserver.patch import check_patch_type
from controller.sandbox.apiserver.records import dumps
from controller.sandbox.apiserver.resources import ApiError, ResourceType
from controller.sandbox.apiserver.routes import (
    Route,
    WatchParams,
    int_param,
    method_not_allowed,
    not_found_path,
    parse_route,
    request_verb,
    resolve,
    watch_params,
)
from controller.sandbox.apiserver.scale import scale_answer
from controller.sandbox.apiserver.selectors import Selector, build_selector
from controller.sandbox.apiserver.watch import Watcher

if TYPE_CHECKING:
    from controller.sandbox.apiserver.server import HttpServer

LOG = logging.getLogger(__name__)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HttpServer
    _lose_answer = False  # this request is served and its answer withheld (a fault)

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol-level errors (bad request line, unknown method) as Status bodies too."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "Error"
        body = dumps(ApiError(code, phrase.replace(" ", ""), message or explain or phrase).status())
        self.close_connection = True
        self.send_response(code, message)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # ------------------------------------------------------------------ plumbing

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        if not length:
            return b""
        return self.rfile.read(int(length))

    def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        self._record(code)
        if self._lose_answer:
            self._lose_answer = False
            self._drop()  # served, and the answer withheld
            return
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, code: int, obj: Any) -> None:
        self._send(code, dumps(obj))

    def _send_error(self, err: ApiError) -> None:
        self._send(err.code, dumps(err.status()))

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, method: str) -> None:
        api = self.server.api
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        info = RequestInfo(method, "discovery", path=split.path)
        self._info: RequestInfo | None = info
        try:
            body = self._read_body()
            parsed = parse_route(split.path)
            route: Route | None = None
            if parsed is not None and parsed[2]:
                route = resolve(*parsed)
                info = RequestInfo(
                    method,
                    request_verb(method, route, query),
                    route.rt.group,
                    route.rt.plural,
                    route.namespace or "",
                    route.name,
                    route.subresource,
                    split.path,
                )
                self._info = info
            decision = api.faults.decide(info)
            if decision.latency:
                api.stopping.wait(decision.latency)
            if decision.drop or api.stopping.is_set():
                self._record(0)
                self._drop()
                return
            if decision.error is not None:
                raise decision.error
            self._lose_answer = decision.lose
            if route is None:
                self._send(*discovery_answer(method, split.path, api.host, api.port))
            elif info.verb == "watch":
                self._serve_watch(route, query, force_gone=decision.gone)
            else:
                self._serve_resource(method, info.verb, route, query, body)
        except ApiError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self._record(0)
            self.close_connection = True
        except Exception as exc:  # a bug here must still answer with a Status, not hang
            LOG.exception("emulator failed serving %s %s", method, self.path)
            with contextlib.suppress(OSError):
                self._send_error(
                    ApiError(500, "InternalError", f"Internal error occurred: {exc!r}")
                )

    def _record(self, code: int) -> None:
        """Log the request once, before its answer leaves, so a client never outruns the log."""
        info, self._info = self._info, None
        if info is not None:
            self.server.api.record(info, code)

    # ------------------------------------------------------------------ resources

    def _selector(self, route: Route, query: dict[str, str]) -> Selector:
        try:
            return build_selector(
                route.namespace if route.rt.namespaced else None,
                query.get("labelSelector"),
                query.get("fieldSelector"),
                route.rt.field_labels,
            )
        except ValueError as exc:
            raise resources.bad_request(str(exc)) from None

    def _wants_table(self) -> bool:
        return tables.wants_table(self.headers.get("Accept", ""))

    def _serve_resource(
        self, method: str, verb: str, route: Route, query: dict[str, str], body: bytes
    ) -> None:
        if route.subresource == "scale":
            self._serve_scale(method, verb, route, body, query.get("dryRun") == "All")
            return
        serve = self._VERBS.get(verb)
        if serve is None:
            raise method_not_allowed(method, self.path)
        if query.get("fieldValidation", "").lower() == "strict" and verb in (
            "create",
            "update",
            "patch",
        ):
            unknown = openapi.unknown_fields(route.rt, parse_json_body(body))
            if unknown:
                raise openapi.strict_error(route.rt, unknown)
        serve(self, method, route, query, body)

    def _serve_list(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        rt = route.rt
        result = self.server.api.store.list_page(
            rt,
            self._selector(route, query),
            resource_version=query.get("resourceVersion"),
            resource_version_match=query.get("resourceVersionMatch"),
            limit=int_param(query, "limit") or 0,
            continue_token=query.get("continue"),
        )
        if self._wants_table():
            self._send_json(
                200,
                tables.table(
                    rt,
                    [s.obj for s in result.items],
                    datetime.now(UTC),
                    resource_version=str(result.resource_version),
                    continue_token=result.continue_token,
                    remaining=result.remaining,
                    include_object=query.get("includeObject", "Metadata"),
                ),
            )
            return
        self._send(
            200,
            list_body(
                rt, result.items, result.resource_version, result.continue_token, result.remaining
            ),
        )

    def _serve_get(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        rt = route.rt
        if route.subresource and not rt.has_status:
            raise not_found_path()
        stored = self.server.api.store.get_stored(rt, route.namespace, route.name)
        if self._wants_table() and not route.subresource:
            self._send_json(
                200,
                tables.table(
                    rt,
                    [stored.obj],
                    datetime.now(UTC),
                    resource_version=str(stored.rv),
                    include_object=query.get("includeObject", "Metadata"),
                ),
            )
            return
        self._send(200, stored.raw)

    def _serve_create(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        rt = route.rt
        if route.name:
            raise method_not_allowed(method, self.path)
        if rt.namespaced and not route.namespace:
            raise method_not_allowed(method, self.path)
        stored = self.server.api.store.create_stored(
            rt,
            parse_json_body(body),
            route.namespace,
            keep_status=not rt.has_status or rt.status_on_create,
            dry_run=query.get("dryRun") == "All",
        )
        self._send(201, stored.raw)

    def _serve_update(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        rt = route.rt
        obj = parse_json_body(body)
        if not rt.unconditional_update and not (
            isinstance(obj, dict)
            and isinstance(obj.get("metadata"), dict)
            and obj["metadata"].get("resourceVersion")
        ):
            raise resources.invalid(
                rt,
                route.name,
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )
        stored = self.server.api.store.update_stored(
            rt,
            obj,
            route.namespace,
            route.name,
            subresource=route.subresource or None,
            dry_run=query.get("dryRun") == "All",
        )
        self._send(200, stored.raw)

    def _serve_patch(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        check_patch_type(route.rt, content_type)  # before the body: a real apiserver does too
        stored = self.server.api.store.patch_stored(
            route.rt,
            route.namespace,
            route.name,
            parse_json_body(body),
            content_type,
            subresource=route.subresource or None,
            dry_run=query.get("dryRun") == "All",
        )
        self._send(200, stored.raw)

    def _delete_options(
        self, query: dict[str, str], body: bytes
    ) -> tuple[dict[str, Any], int | None]:
        """The DeleteOptions body and the grace period (the query's, else the body's)."""
        options: Any = parse_json_body(body) if body.strip() else {}
        if not isinstance(options, dict):
            raise resources.bad_request("DeleteOptions must be a JSON object")
        grace = int_param(query, "gracePeriodSeconds")
        if grace is None and options.get("gracePeriodSeconds") is not None:
            grace = int_param(
                {"gracePeriodSeconds": str(options["gracePeriodSeconds"])}, "gracePeriodSeconds"
            )
        return options, grace

    def _serve_delete_collection(
        self, method: str, route: Route, query: dict[str, str], body: bytes
    ) -> None:
        rt, store = route.rt, self.server.api.store
        _, grace = self._delete_options(query, body)
        if route.subresource:
            raise method_not_allowed(method, self.path)
        deleted = store.delete_collection(
            rt, self._selector(route, query), grace_period_seconds=grace
        )
        self._send_json(
            200,
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(store.resource_version)},
                "items": deleted,
            },
        )

    def _serve_delete(self, method: str, route: Route, query: dict[str, str], body: bytes) -> None:
        rt = route.rt
        options, grace = self._delete_options(query, body)
        if route.subresource:
            raise method_not_allowed(method, self.path)
        preconditions = options.get("preconditions")
        stored, removed = self.server.api.store.delete_stored(
            rt,
            route.namespace,
            route.name,
            grace_period_seconds=grace,
            preconditions=preconditions if isinstance(preconditions, dict) else None,
            dry_run=query.get("dryRun") == "All" or options.get("dryRun") == ["All"],
        )
        if removed and not rt.delete_returns_object:
            self._send_json(200, resources.success_status(rt, stored.obj))
        else:
            self._send(200, stored.raw)

    _VERBS: ClassVar[dict[str, Callable[[Handler, str, Route, dict[str, str], bytes], None]]] = {
        "list": _serve_list,
        "get": _serve_get,
        "create": _serve_create,
        "update": _serve_update,
        "patch": _serve_patch,
        "delete": _serve_delete,
        "deletecollection": _serve_delete_collection,
    }

    def _serve_scale(
        self, method: str, verb: str, route: Route, body: bytes, dry_run: bool
    ) -> None:
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        scale = scale_answer(
            self.server.api.store, method, verb, route, body, content_type, dry_run, self.path
        )
        self._send_json(200, scale)

    # ------------------------------------------------------------------ watch

    def _serve_watch(self, route: Route, query: dict[str, str], *, force_gone: bool) -> None:
        api = self.server.api
        store = api.store
        rt = route.rt
        selector = self._selector(route, query)
        params = watch_params(query)
        rv = params.resource_version
        if params.send_initial is False and rv in (None, "", "0"):
            rv = str(store.resource_version)
        error: ApiError | None = None
        watcher = None
        if force_gone:
            error = resources.too_old(int(rv) if rv and rv.isdigit() else 0, store.compacted_rv())
        else:
            try:
                watcher = store.watch(rt, selector, rv, send_initial_events=params.send_initial)
            except ApiError as err:
                if err.code != 410:
                    raise
                error = err
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        if watcher is None:
            assert error is not None
            self._write_chunks([event_line("ERROR", dumps(error.status()))], final=True)
            return
        hangups = api.hangups
        assert hangups is not None  # set while serving
        hangups.add(self.connection, watcher.drop)
        try:
            self._stream(watcher, rt, params)
        except OSError:
            self.close_connection = True
        finally:
            hangups.remove(self.connection)
            watcher.close()

    def _write_chunks(self, lines: list[bytes], *, final: bool = False) -> None:
        data = chunks(lines, final=final)
        if data:
            self.wfile.write(data)

    def _stream(self, watcher: Watcher, rt: ResourceType, params: WatchParams) -> None:
        api = self.server.api
        now = time.monotonic()
        limit = params.timeout if params.timeout and params.timeout > 0 else api.max_watch_seconds
        deadline = now + limit
        interval = api.bookmark_interval
        next_bookmark = now + interval
        initial = [event_line("ADDED", s.raw) for s in watcher.initial]
        watcher.initial = []
        if params.send_initial and params.bookmarks:
            initial.append(bookmark_line(rt, watcher.progress_rv, initial_end=True))
        if initial:
            self._write_chunks(initial)
        else:
            self.wfile.flush()  # the headers must reach the client before the first event
        while True:
            now = time.monotonic()
            wait = deadline - now
            if params.bookmarks:
                wait = min(wait, next_bookmark - now)
            batch = watcher.next(max(wait, 0.0))
            if batch.dropped or api.stopping.is_set():
                self._drop()
                return
            lines = [event_line(kind, raw) for kind, raw in batch.events]
            if batch.error is not None:
                lines.append(event_line("ERROR", dumps(batch.error.status())))
                self._write_chunks(lines, final=True)
                return
            now = time.monotonic()
            if params.bookmarks and now >= next_bookmark:
                lines.append(bookmark_line(rt, batch.progress_rv))
                next_bookmark = now + interval
            if now >= deadline:
                self._write_chunks(lines, final=True)
                return
            self._write_chunks(lines)
