"""Notices clients that hang up on a watch, so its serving thread ends at once."""

from __future__ import annotations

import contextlib
import select
import selectors
import socket
import threading
from collections.abc import Callable


class HangupMonitor:
    """Notices clients that hang up on a watch, so its serving thread ends at once.

    A watch thread sleeps on its resource's condition and would otherwise only find out at its
    next write. One thread blocks in epoll over every open watch socket instead: a socket that
    turns readable mid-stream has been closed by its client (HTTP/1.1 sends nothing else while
    a response is streaming).

    The selector maps a ready descriptor to its registration only after epoll returns, so a
    descriptor closed and reused by the next watch in between reports the old socket's hangup
    under the new socket's registration. Each report is therefore checked on the socket itself
    (a hung-up socket reads at once) before its watch is dropped.
    """

    def __init__(self, selector: selectors.BaseSelector | None = None) -> None:
        self._selector = selector if selector is not None else selectors.DefaultSelector()
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
                if not _readable(sock):
                    continue  # a stale report for a descriptor now serving another watch
                self.remove(sock)
                key.data()

    def close(self) -> None:
        self._wake_w.send(b"x")
        self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _readable(sock: socket.socket) -> bool:
    """Whether `sock` is readable now (end of stream, data or an error): what a client hanging
    up leaves; a live watch's socket has nothing to read. A closed socket counts as gone."""
    fd = sock.fileno()
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
