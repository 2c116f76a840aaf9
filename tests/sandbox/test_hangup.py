"""The emulator's hangup monitor drops the watch whose client hung up, and only that one.

The selector maps a descriptor epoll reported to its registration only after epoll returns; the
gated selector below holds the monitor in that gap so a test can close the reported socket and
hand its descriptor to the next watch, as a loaded server does by chance.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from controller.sandbox.apiserver.hangup import HangupMonitor
from controller.testing.wait import wait_for


class GatedSelector(selectors.DefaultSelector):
    """Holds the select() that reported `gated_fd` before it looks up the fd's registration."""

    def __init__(self) -> None:
        super().__init__()
        self.gated_fd = -1
        self.reported = threading.Event()
        self.resume = threading.Event()
        self.selects = 0

    def select(self, timeout: float | None = None) -> Any:
        self.selects += 1
        return super().select(timeout)

    def _key_from_fd(self, fd: int) -> Any:  # the stdlib's lookup, after epoll returned
        if fd == self.gated_fd and not self.resume.is_set():
            self.reported.set()
            self.resume.wait(10)
        return super()._key_from_fd(fd)  # type: ignore[misc]  # private in the stubs


def _pair_at(fd: int) -> tuple[socket.socket, socket.socket]:
    """A connected pair whose first socket has descriptor `fd` (free), as the kernel's lowest-
    free rule hands a just-closed descriptor to the next connection."""
    first, second = socket.socketpair()
    if first.fileno() == fd:
        return first, second
    os.dup2(first.fileno(), fd)
    first.close()
    return socket.socket(fileno=fd), second


@pytest.fixture
def gate() -> GatedSelector:
    return GatedSelector()


@pytest.fixture
def monitor(gate: GatedSelector) -> Iterator[HangupMonitor]:
    mon = HangupMonitor(selector=gate)
    mon.start()
    yield mon
    gate.resume.set()
    mon.close()


def test_a_client_that_hangs_up_drops_its_watch(monitor: HangupMonitor) -> None:
    served, client = socket.socketpair()
    dropped: list[str] = []
    monitor.add(served, partial(dropped.append, "watch"))
    client.close()
    wait_for(lambda: dropped == ["watch"], message="the hangup noticed")
    served.close()


def test_a_hangup_reported_for_a_reused_descriptor_leaves_the_new_watch(
    monitor: HangupMonitor, gate: GatedSelector
) -> None:
    old, old_client = socket.socketpair()
    dropped: list[str] = []
    monitor.add(old, partial(dropped.append, "old"))
    fd = old.fileno()
    gate.gated_fd = fd
    old_client.close()  # the old watch's client hangs up: epoll reports `fd`
    assert gate.reported.wait(10), "epoll never reported the hangup"
    # Meanwhile the old watch's thread ends (unregisters, closes) and the next connection gets
    # the same descriptor, its watch registered before the monitor looks `fd` up.
    monitor.remove(old)
    old.close()
    new, new_client = _pair_at(fd)
    monitor.add(new, partial(dropped.append, "new"))
    gate.resume.set()
    wait_for(lambda: gate.selects >= 2, message="the monitor back in select()")
    assert dropped == []  # the new watch's client is still there
    new_client.close()
    wait_for(lambda: dropped == ["new"], message="the new client's hangup noticed")
    new.close()
