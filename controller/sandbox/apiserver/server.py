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
import logging
import signal
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from controller.sandbox.apiserver import kubeconfig
from controller.sandbox.apiserver.faults import FaultInjector, RequestInfo, RequestRecord
from controller.sandbox.apiserver.handler import Handler
from controller.sandbox.apiserver.hangup import HangupMonitor
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.store import ObjectStore
from controller.sandbox.processes import Service

LOG = logging.getLogger(__name__)


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: ApiServer) -> None:
        self.api = api
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, Handler)


RequestHook = Callable[[RequestRecord], None]


class ApiServer(Service):
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
        self.hangups: HangupMonitor | None = None
        self._hooks: list[RequestHook] = []
        self._log_lock = threading.Lock()
        self._host = host
        self._port = port
        self._httpd: HttpServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ApiServer:
        """Listen and serve. After `stop()` it starts again on the same port with the same
        store, which is how tests emulate an apiserver restart."""
        if self._httpd is not None:
            raise RuntimeError("the API server emulator is already started")
        self.stopping.clear()
        self._httpd = HttpServer((self._host, self._port), self)
        self.hangups = HangupMonitor()
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
