"""The fault proxy's byte relay: one client connection and its upstream twin, non-blocking
reads and writes over plain or TLS sockets, and the framing of client requests.

Past the request headers bytes are relayed as they are, both ways, without re-framing: requests
are parsed only to find their boundaries (Content-Length; a chunked request body turns the rest
of that connection into a plain relay), responses never, so watch streams, chunked encoding and
keep-alive pass unchanged. Request heads are at most `MAX_HEAD` bytes.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Iterator

MAX_HEAD = 64 * 1024
_BUF = 64 * 1024


class Conn:
    """One client connection and its upstream twin, served by one thread (see `_serve`)."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.watch = False
        self.lose_answer = False  # the current request's answer is to be withheld
        self.closed = threading.Event()

    def cut(self) -> None:
        """From any thread: end both directions. Only the raw descriptors are shut down (never
        the TLS objects, which belong to the serving thread); that thread then sees EOF."""
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.close()


def pending(sock: socket.socket) -> bool:
    return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0


def recv(sock: socket.socket) -> bytes | None:
    """Bytes read, b"" at EOF, None when nothing is readable yet (TLS wants more)."""
    try:
        return sock.recv(_BUF)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
        return None


def send_all(sock: socket.socket, data: bytes) -> None:
    """All of `data` on a non-blocking socket, waiting for writability as needed."""
    view = memoryview(data)
    while view:
        try:
            sent = sock.send(view)
        except (ssl.SSLWantWriteError, BlockingIOError):
            select.select([], [sock], [], 5.0)
            continue
        except ssl.SSLWantReadError:
            select.select([sock], [], [], 5.0)
            continue
        view = view[sent:]


class RequestParser:
    """Splits the client byte stream into request heads and the bytes that follow them.

    `feed(data)` yields, in order: `(method, path, head_bytes)` for each complete request head
    (the caller forwards or answers it), `bytes` to forward as they are (bodies; everything
    after a chunked request head), and `None` for a head it cannot parse."""

    def __init__(self) -> None:
        self._buf = b""
        self._body = 0
        self._raw = False

    def feed(self, data: bytes) -> Iterator[tuple[str, str, bytes] | bytes | None]:
        if self._raw:
            yield data
            return
        self._buf += data
        while self._buf:
            if self._body:
                piece, self._buf = self._buf[: self._body], self._buf[self._body :]
                self._body -= len(piece)
                yield piece
                continue
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD:
                    yield None
                return
            head, self._buf = self._buf[: end + 4], self._buf[end + 4 :]
            lines = head[:-4].decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                yield None
                return
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        yield None
                        return
                elif name == "transfer-encoding" and "chunked" in value.lower():
                    self._raw = True
            yield parts[0].upper(), parts[1], head
            if self._raw:
                if self._buf:
                    yield self._buf
                self._buf = b""
                return
            self._body = length
