"""A fault-injecting proxy in front of an API server (the real kube-apiserver or the emulator).

`FaultProxy(upstream_host, upstream_port, ...)` listens on a loopback port and relays every
client connection to the upstream server. Between the two it can

* drop connections: `drop_watches()` cuts every connection whose current request is a watch
  (`watch=true|1` in the query), `drop_all()` every connection;
* answer chosen requests itself: `fail_next(count, status, method=..., path=..., watch=...)`
  answers the next `count` matching requests with `status` (a 5xx, or 429 with `Retry-After`)
  and a Kubernetes `Status` body, without forwarding them;
* lose chosen answers: `lose_answers(count, method=..., path=...)` forwards the next `count`
  matching requests and cuts their connection as soon as the server starts answering, without
  relaying a byte of it: the server did the work and the client never hears of it (a reply
  lost on the way, a load balancer dropping the connection);
* refuse service: `refuse(True)` accepts and at once closes new connections (an API server that
  is down behind its load balancer) until `refuse(False)`; `pause()` closes the listening socket,
  so connecting fails with ECONNREFUSED (a down server on its own address), until `resume()`
  listens on the same port again.

`requests` is the log of what it saw (method, path, whether it answered itself), bounded.

Why TLS is terminated, not passed through: an injected 429 or 503 must be a well-formed HTTP
answer to one request, and a dropped watch must be a watch, not any connection; both need the
request line, which a raw TCP relay of TLS bytes cannot see. So with `certfile`/`keyfile` the
proxy serves TLS itself (the API server's own serving certificate works: it is issued by the
control plane's CA for 127.0.0.1, and clients keep verifying against that CA) and opens a
verified TLS connection upstream (`upstream_ca`). It presents *no* client certificate upstream:
clients must authenticate with a bearer token, which it forwards untouched, so the identity the
real authorizer sees is the client's own (a proxy certificate would win over the token in
kube-apiserver's authenticator chain and turn every client into the proxy). Without `certfile`
it speaks plain HTTP on both sides (the emulator). Only HTTP/1.1 is offered (ALPN), which is all
the Python client speaks.

Past the request headers it relays bytes as they are (relay.py). HTTP/1.1 clients do not
pipeline, so when the next request arrives the previous answer is complete, and an injected
answer (with `Connection: close`) can close the connection cleanly.

Bounds: loopback only (binding elsewhere is refused), at most `max_connections` open client
connections (more are closed at once), request heads of at most 64 KiB, a connect timeout
upstream. `stop()` closes the listener and every connection and joins every thread it started.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import re
import selectors
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.cluster.relay import Conn, RequestParser, pending, recv, send_all
from controller.sandbox.processes import Service

LOG = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0
_REASONS = {
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_WATCH_QUERY = re.compile(r"[?&]watch=(true|1)(&|$)")


class FaultProxyError(RuntimeError):
    """The proxy could not be set up (bad address, certificate, port)."""


@dataclass(frozen=True, slots=True)
class ProxiedRequest:
    method: str
    path: str
    watch: bool
    injected: int | None  # the status the proxy answered itself, None when forwarded
    answer_lost: bool = False  # forwarded, and the server's answer withheld from the client


@dataclass(slots=True)
class _Rule:
    count: int
    status: int | None  # None: forward, then lose the answer
    method: str | None
    path: re.Pattern[str] | None
    watch: bool | None
    retry_after: int | None

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.method is not None and method != self.method:
            return False
        if self.watch is not None and watch != self.watch:
            return False
        return self.path is None or self.path.search(path) is not None


def _status_body(status: int, message: str) -> bytes:
    reason = {429: "TooManyRequests", 503: "ServiceUnavailable", 504: "Timeout"}.get(
        status, "InternalError"
    )
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status,
    }
    return json.dumps(body).encode()


class FaultProxy(Service):
    """See the module docstring."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        certfile: Path | str | None = None,
        keyfile: Path | str | None = None,
        upstream_ca: Path | str | None = None,
        upstream_tls: bool | None = None,
        max_connections: int = 256,
        log_limit: int = 10_000,
    ) -> None:
        for what, addr in (("listen", host), ("upstream", upstream_host)):
            try:
                loopback = ipaddress.ip_address(addr).is_loopback
            except ValueError:
                loopback = addr == "localhost"
            if not loopback:
                raise FaultProxyError(f"the fault proxy is loopback only; {what} host {addr!r}")
        if (certfile is None) != (keyfile is None):
            raise FaultProxyError("certfile and keyfile go together")
        self.upstream = (upstream_host, upstream_port)
        self._host, self._port = host, port
        self._server_ctx: ssl.SSLContext | None = None
        if certfile is not None and keyfile is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            try:
                ctx.load_cert_chain(str(certfile), str(keyfile))
            except (OSError, ssl.SSLError) as exc:
                raise FaultProxyError(f"cannot load {certfile} / {keyfile}: {exc}") from exc
            ctx.set_alpn_protocols(["http/1.1"])
            self._server_ctx = ctx
        self._upstream_ctx: ssl.SSLContext | None = None
        if upstream_tls if upstream_tls is not None else upstream_ca is not None:
            try:
                uctx = ssl.create_default_context(
                    cafile=str(upstream_ca) if upstream_ca is not None else None
                )
            except (OSError, ssl.SSLError) as exc:
                raise FaultProxyError(f"cannot load CA {upstream_ca}: {exc}") from exc
            uctx.set_alpn_protocols(["http/1.1"])
            self._upstream_ctx = uctx
        self._max = max_connections
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._conns: set[Conn] = set()
        self._threads: set[threading.Thread] = set()
        self._refusing = False
        self.requests: deque[ProxiedRequest] = deque(maxlen=log_limit)
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._paused = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        if self._listener is not None:
            raise FaultProxyError("the fault proxy is already started")
        sock = socket.socket(socket.AF_INET6 if ":" in self._host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self._host, self._port))
        except OSError as exc:
            sock.close()
            raise FaultProxyError(f"cannot listen on {self._host}:{self._port}: {exc}") from exc
        sock.listen(64)
        self._port = sock.getsockname()[1]
        self._listener = sock
        self._stopping.clear()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"faultproxy-{self._port}", daemon=True
        )
        self._accept_thread.start()
        LOG.info("fault proxy %s -> %s:%s", self.url, *self.upstream)
        return self

    def pause(self) -> None:
        """Stop listening (new connections are refused by the kernel); open ones stay."""
        listener, thread = self._listener, self._accept_thread
        if listener is None:
            raise FaultProxyError("the fault proxy is not started")
        self._paused = True
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        if thread is not None:
            thread.join(10)

    def resume(self) -> None:
        """Listen again on the same port after `pause()`."""
        if not self._paused:
            return
        self._listener = None
        self._paused = False
        self.start()

    def stop(self) -> None:
        listener = self._listener
        if listener is None:
            return
        self._stopping.set()
        if not self._paused:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(10)
        self._paused = False
        self.drop_all()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(10)
        self._listener = None

    @property
    def port(self) -> int:
        if self._listener is None:
            raise FaultProxyError("the fault proxy is not started")
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self._server_ctx is not None else "http"
        return f"{scheme}://{self._host}:{self.port}"

    # ------------------------------------------------------------------ faults

    def fail_next(
        self,
        count: int,
        status: int = 503,
        *,
        method: str | None = None,
        path: str | None = None,
        watch: bool | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Answer the next `count` requests matching (method, path regex, watch or not) with
        `status` instead of forwarding them. `retry_after` adds that header (default: 1 for a
        429, as kube-apiserver's max-in-flight filter sends, none otherwise). NOTE: urllib3
        retries a GET answered 429/503 *with* Retry-After by itself, after sleeping that long,
        so such an answer is invisible to a GET through the Python client."""
        if count <= 0:
            raise ValueError("count must be positive")
        if not 400 <= status <= 599:
            raise ValueError(f"status {status} is not an error status")
        with self._lock:
            self._rules.append(
                _Rule(count, status, method.upper() if method else None,
                      re.compile(path) if path else None, watch, retry_after)
            )  # fmt: skip

    def lose_answers(
        self, count: int, *, method: str | None = None, path: str | None = None
    ) -> None:
        """Forward the next `count` requests matching (method, path regex; never a watch), and
        close their connection when the server's answer begins, relaying none of it."""
        if count <= 0:
            raise ValueError("count must be positive")
        with self._lock:
            self._rules.append(
                _Rule(count, None, method.upper() if method else None,
                      re.compile(path) if path else None, False, None)
            )  # fmt: skip

    def pending_failures(self) -> int:
        with self._lock:
            return sum(r.count for r in self._rules)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._refusing = False

    def refuse(self, on: bool = True) -> None:
        with self._lock:
            self._refusing = on

    def drop_watches(self) -> int:
        """Cut every connection serving a watch; returns how many."""
        with self._lock:
            victims = [c for c in self._conns if c.watch]
        for conn in victims:
            conn.cut()
        return len(victims)

    def drop_all(self) -> int:
        with self._lock:
            victims = list(self._conns)
        for conn in victims:
            conn.cut()
        return len(victims)

    def open_watches(self) -> int:
        with self._lock:
            return sum(1 for c in self._conns if c.watch and not c.closed.is_set())

    def injected(self) -> list[ProxiedRequest]:
        with self._lock:
            return [r for r in self.requests if r.injected is not None]

    def lost_answers(self) -> list[ProxiedRequest]:
        with self._lock:
            return [r for r in self.requests if r.answer_lost]

    # ------------------------------------------------------------------ relay

    def _spawn(
        self, name: str, target: Callable[[socket.socket], None], arg: socket.socket
    ) -> None:
        def run() -> None:
            try:
                target(arg)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                full = len(self._conns) >= self._max
                refusing = self._refusing
            if full or refusing:
                if full:
                    LOG.warning("fault proxy: %d connections open, refusing one", self._max)
                with contextlib.suppress(OSError):
                    client.close()
                continue
            self._spawn(f"faultproxy-conn-{client.fileno()}", self._serve, client)

    def _connect_upstream(self) -> socket.socket:
        raw = socket.create_connection(self.upstream, timeout=CONNECT_TIMEOUT)
        raw.settimeout(None)
        if self._upstream_ctx is None:
            return raw
        try:
            return self._upstream_ctx.wrap_socket(raw, server_hostname=self.upstream[0])
        except (OSError, ssl.SSLError):
            raw.close()
            raise

    def _serve(self, raw_client: socket.socket) -> None:
        client: socket.socket = raw_client
        try:
            if self._server_ctx is not None:
                raw_client.settimeout(CONNECT_TIMEOUT)
                client = self._server_ctx.wrap_socket(raw_client, server_side=True)
            upstream = self._connect_upstream()
        except (OSError, ssl.SSLError) as exc:
            LOG.info("fault proxy: connection not set up: %s", exc)
            with contextlib.suppress(OSError):
                client.close()
            return
        conn = Conn(client, upstream)
        with self._lock:
            self._conns.add(conn)
        try:
            self._relay(conn)
        except (OSError, ssl.SSLError) as exc:
            LOG.debug("fault proxy: connection ended: %s", exc)
        finally:
            conn.close()
            with self._lock:
                self._conns.discard(conn)

    def _relay(self, conn: Conn) -> None:
        """Both directions in this one thread: a TLS object is never used by two threads at
        once (OpenSSL forbids it). Sockets are non-blocking; reads drain TLS-buffered bytes."""
        for sock in (conn.client, conn.upstream):
            sock.setblocking(False)
        sel = selectors.DefaultSelector()
        sel.register(conn.client, selectors.EVENT_READ, "client")
        sel.register(conn.upstream, selectors.EVENT_READ, "upstream")
        parser = RequestParser()
        try:
            while not conn.closed.is_set():
                ready = [key.data for key, _ in sel.select(timeout=1.0)]
                for side in ("upstream", "client"):
                    sock = conn.upstream if side == "upstream" else conn.client
                    if side not in ready and not pending(sock):
                        continue
                    data = recv(sock)
                    if data is None:
                        continue  # nothing decrypted yet
                    if not data:
                        return
                    if side == "upstream":
                        if conn.lose_answer:
                            return  # the answer has begun: the server did the work
                        send_all(conn.client, data)
                    elif not self._from_client(conn, parser, data):
                        return
        finally:
            sel.close()

    def _from_client(self, conn: Conn, parser: RequestParser, data: bytes) -> bool:
        """Forward client bytes, deciding at each request head; False ends the connection."""
        for item in parser.feed(data):
            if isinstance(item, bytes):
                send_all(conn.upstream, item)
                continue
            if item is None:
                LOG.warning("fault proxy: unparsable request head, closing the connection")
                return False
            method, path, head = item
            watch = bool(_WATCH_QUERY.search(path))
            rule = self._match(method, path, watch)
            status = rule.status if rule is not None else None
            lose = rule is not None and status is None
            self.requests.append(ProxiedRequest(method, path, watch, status, answer_lost=lose))
            if rule is not None and rule.status is not None:
                self._answer(conn, rule.status, rule.retry_after)
                return False
            conn.watch = watch
            conn.lose_answer = lose
            send_all(conn.upstream, head)
        return True

    def _match(self, method: str, path: str, watch: bool) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path, watch):
                    rule.count -= 1
                    if rule.count <= 0:
                        self._rules.remove(rule)
                    return rule
        return None

    def _answer(self, conn: Conn, status: int, retry_after: int | None) -> None:
        body = _status_body(status, f"injected by the fault proxy ({status})")
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        if retry_after is None and status == 429:
            retry_after = 1
        if retry_after is not None:
            head.append(f"Retry-After: {retry_after}")
        with contextlib.suppress(OSError, ssl.SSLError):
            send_all(conn.client, ("\r\n".join(head) + "\r\n\r\n").encode() + body)
