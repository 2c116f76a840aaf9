"""Shared helpers for the work queue tests: bounded waits on observable state, never sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

DEADLINE = 5.0


def wait_until(predicate: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    """Re-check `predicate` until it holds or `timeout` passes; returns the last outcome."""
    pause = threading.Event()  # never set: a bounded pause between checks
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        pause.wait(0.001)
    return predicate()


def run_in_thread(
    fn: Callable[[], Any], name: str = "test-helper"
) -> tuple[threading.Thread, list[Any]]:
    """Start `fn` in a daemon thread; its return value lands in the returned list."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), name=name, daemon=True)
    thread.start()
    return thread, result
