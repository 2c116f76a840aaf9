"""A Kubernetes API server emulator on real HTTP, for tests and the local sandbox.

`ApiServer` serves the REST API of the resources in `resources.RESOURCES` on 127.0.0.1 (random
port by default) with a stdlib threading HTTP/1.1 server (keep-alive, TCP_NODELAY, daemon
threads), so the official `kubernetes` client and kubectl talk to it unchanged through the
kubeconfig `write_kubeconfig()` writes. State lives in an `ObjectStore` (`server.store`), which
tests may also drive directly, bypassing HTTP.

Served: discovery (/api, /apis, /version, /healthz); get, list (resourceVersion,
resourceVersionMatch, limit/continue, label and field selectors), watch (chunked, one JSON event
per line, resourceVersion, allowWatchBookmarks, sendInitialEvents, timeoutSeconds, 410 as an ERROR
event), create (generateName), update, JSON/merge/strategic merge patch, delete (finalizers,
grace), deletecollection, the status and scale subresources, dryRun=All; for kubectl,
server-side Tables (`tables.py`), OpenAPI v3 discovery and strict field validation of custom
resources (`openapi.py`). Every error is a `Status` body.

What it does not emulate (authn/authz, admission, server-side apply, garbage collection, a
kubelet, ...) is listed in controller/sandbox/README.md, with the behaviour worth knowing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import selectors
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from controller.sandbox.apiserver import kubeconfig, openapi, resources, tables
from controller.sandbox.apiserver.faults import FaultInjector, RequestInfo, RequestRecord
from controller.sandbox.apiserver.patch import apply_merge_patch
from controller.sandbox.apiserver.resources import ApiError, JsonDict, ResourceType
from controller.sandbox.apiserver.selectors import Selector, build_selector
from controller.sandbox.apiserver.store import ObjectStore, Stored, Watcher, check_patch_type, dumps

LOG = logging.getLogger(__name__)

SERVER_VERSION: JsonDict = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_TRUE = ("true", "1")


class _Route:
    """A parsed resource URL."""

    __slots__ = ("name", "namespace", "rt", "subresource")

    def __init__(
        self, rt: ResourceType, namespace: str | None, name: str, subresource: str
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def _not_found_path() -> ApiError:
    return ApiError(
        404,
        "NotFound",
        "the server could not find the requested resource",
        details={
            "causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]
        },
    )


def _method_not_allowed(method: str, what: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({method} {what})",
    )


def parse_route(path: str) -> tuple[str, str, list[str]] | None:
    """Split /api/v1/... or /apis/g/v/... into (group, version, rest)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


def resolve(group: str, version: str, rest: list[str]) -> _Route:
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace = rest[1]
        rest = rest[2:]
    if not rest or len(rest) > 3:
        raise _not_found_path()
    rt = resources.lookup(group, version, rest[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise _not_found_path()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and not ((sub == "status" and rt.has_status) or (sub == "scale" and rt.has_scale)):
        raise _not_found_path()
    return _Route(rt, namespace, name, sub)


def _verb(method: str, route: _Route, query: dict[str, str]) -> str:
    if method == "GET":
        if route.name:
            return "get"
        return "watch" if query.get("watch", "").lower() in _TRUE else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if route.name else "deletecollection"
    return method.lower()


def _list_body(
    rt: ResourceType, items: Sequence[Stored], rv: int, token: str | None, remaining: int | None
) -> bytes:
    meta: JsonDict = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    head = (
        b'{"kind":"'
        + rt.list_kind.encode()
        + b'","apiVersion":"'
        + rt.api_version.encode()
        + b'","metadata":'
        + dumps(meta)
        + b',"items":['
    )
    if rt.builtin:
        # A real apiserver leaves kind/apiVersion out of built-in list items (custom resources
        # keep them); clients that rely on them would break against a real cluster.
        prefix = dumps({"kind": rt.kind, "apiVersion": rt.api_version})[:-1] + b","
        return head + b",".join(s.list_item(prefix) for s in items) + b"]}"
    return head + b",".join(s.raw for s in items) + b"]}"


def _scale(obj: JsonDict) -> JsonDict:
    """The autoscaling/v1 Scale of a replicated object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels")) or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(spec.get("replicas", 1))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas", 0)),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        },
    }


def _event_line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _int_param(query: dict[str, str], name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise resources.bad_request(f"invalid {name} {value!r}: must be an integer") from None


def _discovery_resources(group: str, version: str) -> JsonDict:
    out: list[JsonDict] = []
    for rt in resources.in_group_version(group, version):
        entry: JsonDict = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        out.append(entry)
        if rt.has_status:
            out.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if rt.has_scale:
            out.append(
                {
                    "name": f"{rt.plural}/scale",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": out,
    }


def _api_group(name: str, versions: list[str]) -> JsonDict:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


class _HangupMonitor:
    """Notices clients that hang up on a watch, so its serving thread ends at once.

    A watch thread sleeps on its resource's condition and would otherwise only find out at its
    next write. One thread blocks in epoll over every open watch socket instead: a socket that
    turns readable mid-stream has been closed by its client (HTTP/1.1 sends nothing else while
    a response is streaming).
    """

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(
            target=self._run, name="apiserver-emulator-hangups", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def add(self, sock: socket.socket, on_hangup: Callable[[], None]) -> None:
        with self._lock, contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.register(sock, selectors.EVENT_READ, on_hangup)

    def remove(self, sock: socket.socket) -> None:
        with self._lock, contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(sock)

    def _run(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self._wake_r:
                    return
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                self.remove(sock)
                key.data()

    def close(self) -> None:
        self._wake_w.send(b"x")
        self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: ApiServer) -> None:
        self.api = api
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer
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
            route: _Route | None = None
            if parsed is not None and parsed[2]:
                route = resolve(*parsed)
                info = RequestInfo(
                    method,
                    _verb(method, route, query),
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
                self._serve_discovery(method, split.path)
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

    def _serve_discovery(self, method: str, path: str) -> None:
        api = self.server.api
        if method != "GET":
            raise _method_not_allowed(method, path)
        path = path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            self._send(200, b"ok", "text/plain; charset=utf-8")
            return
        if path == "/version":
            self._send_json(200, SERVER_VERSION)
            return
        if path == "/openapi/v3":
            self._send_json(200, openapi.root())
            return
        if path.startswith("/openapi/v3/"):
            doc = openapi.group_version_doc(path.removeprefix("/openapi/v3/"))
            if doc is None:
                raise _not_found_path()
            self._send_json(200, doc)
            return
        if path == "/api":
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{api.host}:{api.port}"}
                    ],
                },
            )
            return
        if path == "/api/v1":
            self._send_json(200, _discovery_resources("", "v1"))
            return
        groups = resources.groups()
        if path == "/apis":
            self._send_json(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [_api_group(g, v) for g, v in groups.items()],
                },
            )
            return
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
            self._send_json(
                200,
                {"kind": "APIGroup", "apiVersion": "v1", **_api_group(parts[1], groups[parts[1]])},
            )
            return
        if (
            len(parts) == 3
            and parts[0] == "apis"
            and parts[1] in groups
            and parts[2] in groups[parts[1]]
        ):
            self._send_json(200, _discovery_resources(parts[1], parts[2]))
            return
        raise _not_found_path()

    # ------------------------------------------------------------------ resources

    def _selector(self, route: _Route, query: dict[str, str]) -> Selector:
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

    @staticmethod
    def _json(body: bytes) -> Any:
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise resources.bad_request(
                f"couldn't decode the request body as JSON: {exc}"
            ) from None

    def _serve_resource(
        self, method: str, verb: str, route: _Route, query: dict[str, str], body: bytes
    ) -> None:
        store = self.server.api.store
        rt = route.rt
        dry_run = query.get("dryRun") == "All"
        if route.subresource == "scale":
            self._serve_scale(method, verb, route, body, dry_run)
            return
        if verb == "list":
            result = store.list_page(
                rt,
                self._selector(route, query),
                resource_version=query.get("resourceVersion"),
                resource_version_match=query.get("resourceVersionMatch"),
                limit=_int_param(query, "limit") or 0,
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
                _list_body(
                    rt,
                    result.items,
                    result.resource_version,
                    result.continue_token,
                    result.remaining,
                ),
            )
            return
        if verb == "get":
            if route.subresource and not rt.has_status:
                raise _not_found_path()
            stored = store.get_stored(rt, route.namespace, route.name)
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
            return
        if query.get("fieldValidation", "").lower() == "strict" and verb in (
            "create",
            "update",
            "patch",
        ):
            unknown = openapi.unknown_fields(rt, self._json(body))
            if unknown:
                raise openapi.strict_error(rt, unknown)
        if verb == "create":
            if route.name:
                raise _method_not_allowed(method, self.path)
            if rt.namespaced and not route.namespace:
                raise _method_not_allowed(method, self.path)
            stored = store.create_stored(
                rt,
                self._json(body),
                route.namespace,
                keep_status=not rt.has_status or rt.status_on_create,
                dry_run=dry_run,
            )
            self._send(201, stored.raw)
            return
        if verb == "update":
            obj = self._json(body)
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
            stored = store.update_stored(
                rt,
                obj,
                route.namespace,
                route.name,
                subresource=route.subresource or None,
                dry_run=dry_run,
            )
            self._send(200, stored.raw)
            return
        if verb == "patch":
            content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            check_patch_type(rt, content_type)  # before the body: a real apiserver does too
            stored = store.patch_stored(
                rt,
                route.namespace,
                route.name,
                self._json(body),
                content_type,
                subresource=route.subresource or None,
                dry_run=dry_run,
            )
            self._send(200, stored.raw)
            return
        if verb in ("delete", "deletecollection"):
            options: Any = self._json(body) if body.strip() else {}
            if not isinstance(options, dict):
                raise resources.bad_request("DeleteOptions must be a JSON object")
            grace = _int_param(query, "gracePeriodSeconds")
            if grace is None and options.get("gracePeriodSeconds") is not None:
                grace = _int_param(
                    {"gracePeriodSeconds": str(options["gracePeriodSeconds"])}, "gracePeriodSeconds"
                )
            if verb == "deletecollection":
                if route.subresource:
                    raise _method_not_allowed(method, self.path)
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
                return
            if route.subresource:
                raise _method_not_allowed(method, self.path)
            preconditions = options.get("preconditions")
            stored, removed = store.delete_stored(
                rt,
                route.namespace,
                route.name,
                grace_period_seconds=grace,
                preconditions=preconditions if isinstance(preconditions, dict) else None,
                dry_run=dry_run or options.get("dryRun") == ["All"],
            )
            if removed and not rt.delete_returns_object:
                self._send_json(200, resources.success_status(rt, stored.obj))
            else:
                self._send(200, stored.raw)
            return
        raise _method_not_allowed(method, self.path)

    def _serve_scale(
        self, method: str, verb: str, route: _Route, body: bytes, dry_run: bool
    ) -> None:
        """The scale subresource: an autoscaling/v1 Scale read from and written to the object's
        spec.replicas (kube-apiserver's registry/apps/statefulset ScaleREST)."""
        store = self.server.api.store
        rt = route.rt
        if verb == "get":
            obj = store.get(rt, route.namespace, route.name)
        elif verb in ("patch", "update"):
            request = self._json(body)
            if verb == "patch":
                content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
                current = _scale(store.get(rt, route.namespace, route.name))
                if content_type == "application/json-patch+json":
                    raise resources.ApiError(
                        415, "UnsupportedMediaType", "the emulator's scale takes merge patches"
                    )
                request = apply_merge_patch(current, request)
            replicas = ((request or {}).get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise resources.invalid(
                    rt, route.name, f"spec.replicas: Invalid value: {replicas!r}: must be >= 0"
                )
            obj = store.patch(
                rt,
                route.namespace,
                route.name,
                {"spec": {"replicas": replicas}},
                dry_run=dry_run,
            )
        else:
            raise _method_not_allowed(method, self.path)
        self._send_json(200, _scale(obj))

    # ------------------------------------------------------------------ watch

    def _serve_watch(self, route: _Route, query: dict[str, str], *, force_gone: bool) -> None:
        api = self.server.api
        store = api.store
        rt = route.rt
        selector = self._selector(route, query)
        timeout = _int_param(query, "timeoutSeconds")
        bookmarks = query.get("allowWatchBookmarks", "").lower() in _TRUE
        send_initial_raw = query.get("sendInitialEvents")
        send_initial = None if send_initial_raw is None else send_initial_raw.lower() in _TRUE
        rv = query.get("resourceVersion")
        if send_initial is not None and query.get("resourceVersionMatch") != "NotOlderThan":
            raise resources.bad_request(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            )
        if send_initial is False and rv in (None, "", "0"):
            rv = str(store.resource_version)
        error: ApiError | None = None
        watcher = None
        if force_gone:
            error = resources.too_old(int(rv) if rv and rv.isdigit() else 0, store.compacted_rv())
        else:
            try:
                watcher = store.watch(rt, selector, rv, send_initial_events=send_initial)
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
            self._write_chunks([_event_line("ERROR", dumps(error.status()))], final=True)
            return
        hangups = api.hangups
        assert hangups is not None  # set while serving
        hangups.add(self.connection, watcher.drop)
        try:
            self._stream(watcher, rt, timeout, bookmarks, bool(send_initial))
        except OSError:
            self.close_connection = True
        finally:
            hangups.remove(self.connection)
            watcher.close()

    def _write_chunks(self, lines: list[bytes], *, final: bool = False) -> None:
        data = b"".join(_chunk(line) for line in lines)
        if final:
            data += b"0\r\n\r\n"
        if data:
            self.wfile.write(data)

    def _bookmark(self, rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: JsonDict = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return _event_line(
            "BOOKMARK", dumps({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
        )

    def _stream(
        self,
        watcher: Watcher,
        rt: ResourceType,
        timeout: int | None,
        bookmarks: bool,
        send_initial: bool,
    ) -> None:
        api = self.server.api
        now = time.monotonic()
        limit = api.max_watch_seconds if timeout is None or timeout <= 0 else timeout
        deadline = now + limit
        interval = api.bookmark_interval
        next_bookmark = now + interval
        initial = [_event_line("ADDED", s.raw) for s in watcher.initial]
        watcher.initial = []
        if send_initial and bookmarks:
            initial.append(self._bookmark(rt, watcher.progress_rv, initial_end=True))
        if initial:
            self._write_chunks(initial)
        else:
            self.wfile.flush()  # the headers must reach the client before the first event
        while True:
            now = time.monotonic()
            wait = deadline - now
            if bookmarks:
                wait = min(wait, next_bookmark - now)
            batch = watcher.next(max(wait, 0.0))
            if batch.dropped or api.stopping.is_set():
                self._drop()
                return
            lines = [_event_line(kind, raw) for kind, raw in batch.events]
            if batch.error is not None:
                lines.append(_event_line("ERROR", dumps(batch.error.status())))
                self._write_chunks(lines, final=True)
                return
            now = time.monotonic()
            if bookmarks and now >= next_bookmark:
                lines.append(self._bookmark(rt, batch.progress_rv))
                next_bookmark = now + interval
            if now >= deadline:
                self._write_chunks(lines, final=True)
                return
            self._write_chunks(lines)


RequestHook = Callable[[RequestRecord], None]


class ApiServer:
    """The emulator: an `ObjectStore` served over HTTP, plus fault injection and a request log.

    Use as a context manager or call `start()` / `stop()`. `url` is valid once started.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_window: int = 100_000,
        bookmark_interval: float = 60.0,
        max_watch_seconds: float = 1800.0,
        immediate_pod_delete: bool = True,
        request_log_limit: int = 100_000,
        store: ObjectStore | None = None,
    ) -> None:
        if bookmark_interval <= 0:
            raise ValueError("bookmark_interval must be positive")
        self.store = store or ObjectStore(
            history_window=history_window, immediate_pod_delete=immediate_pod_delete
        )
        self.faults = FaultInjector(self.store)
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        # The newest `request_log_limit` requests; verbs_used() remembers every one.
        self.request_log: deque[RequestRecord] = deque(maxlen=request_log_limit)
        self._verbs_used: set[tuple[str, str, str]] = set()
        self.stopping = threading.Event()
        self.hangups: _HangupMonitor | None = None
        self._hooks: list[RequestHook] = []
        self._log_lock = threading.Lock()
        self._host = host
        self._port = port
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ApiServer:
        """Listen and serve. After `stop()` it starts again on the same port with the same
        store, which is how tests emulate an apiserver restart."""
        if self._httpd is not None:
            raise RuntimeError("the API server emulator is already started")
        self.stopping.clear()
        self._httpd = _HttpServer((self._host, self._port), self)
        self.hangups = _HangupMonitor()
        self.hangups.start()
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.5},
            name=f"apiserver-emulator-{self._port}",
            daemon=True,
        )
        self._thread.start()
        LOG.info("API server emulator listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving: open watches end abruptly and open connections are closed."""
        httpd = self._httpd
        if httpd is None:
            return
        self.stopping.set()
        self.store.drop_watches()
        # NOTE: serve_forever only sees the shutdown request when its select() returns; a
        # throwaway connection wakes it instead of waiting out the poll interval.
        stopper = threading.Thread(target=httpd.shutdown, daemon=True)
        stopper.start()
        while stopper.is_alive():
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self._host, self._port), timeout=1),
            ):
                pass
            stopper.join(0.05)
        httpd.server_close()
        with httpd.connections_lock:
            conns = list(httpd.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join()
        if self.hangups is not None:
            self.hangups.close()
            self.hangups = None
        self._httpd = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ access

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the API server emulator is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def write_kubeconfig(self, path: str | Path, **kwargs: Any) -> Path:
        """Write a kubeconfig for this server (see `kubeconfig.write_kubeconfig`)."""
        return kubeconfig.write_kubeconfig(path, self.url, **kwargs)

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` configured for this server (caller closes it)."""
        from kubernetes import client  # noqa: PLC0415 - optional at import time

        config = client.Configuration(host=self.url)
        config.api_key = {"authorization": kubeconfig.DEFAULT_TOKEN}
        config.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(config)

    # ------------------------------------------------------------------ request log

    def add_request_hook(self, hook: RequestHook) -> None:
        """Call `hook(record)` for every served request (from the serving thread)."""
        with self._log_lock:
            self._hooks.append(hook)

    def record(self, info: RequestInfo, code: int) -> None:
        rec = RequestRecord(
            info.method,
            info.verb,
            info.group,
            info.resource,
            info.namespace,
            info.name,
            info.subresource,
            code,
        )
        with self._log_lock:
            self.request_log.append(rec)
            if rec.resource:
                sub = f"{rec.resource}/{rec.subresource}" if rec.subresource else rec.resource
                self._verbs_used.add((rec.group, sub, rec.verb))
            hooks = list(self._hooks)
        for hook in hooks:
            hook(rec)

    def verbs_used(self) -> set[tuple[str, str, str]]:
        """Distinct (group, resource[/subresource], verb) seen so far, for RBAC checks."""
        with self._log_lock:
            return set(self._verbs_used)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller.sandbox.apiserver",
        description="Run the Kubernetes API server emulator until SIGTERM/SIGINT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for it here")
    parser.add_argument(
        "--history-window",
        type=int,
        default=100_000,
        help="resourceVersions of watch history kept (older ones answer 410)",
    )
    parser.add_argument("--bookmark-interval", type=float, default=60.0)
    parser.add_argument(
        "--graceful-pod-delete",
        action="store_true",
        help="keep deleted pods terminating until their grace period is "
        "finalized (default: pods go at once)",
    )
    parser.add_argument(
        "--seed",
        type=Path,
        action="append",
        default=[],
        help="YAML/JSON manifests to create before serving (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        server = ApiServer(
            host=args.host,
            port=args.port,
            history_window=args.history_window,
            bookmark_interval=args.bookmark_interval,
            immediate_pod_delete=not args.graceful_pod_delete,
        )
        for path in args.seed:
            with path.open(encoding="utf-8") as fh:
                server.store.load(yaml.safe_load_all(fh))
        server.start()
    except (ValueError, OSError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ApiError as exc:
        print(f"error: seeding failed: {exc.message}", file=sys.stderr)
        return 2
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(f"listening on {server.url}", flush=True)
    done.wait()
    server.stop()
    return 0
