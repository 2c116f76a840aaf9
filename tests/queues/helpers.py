"""Shared helpers for the work queue tests: a helper thread whose result the test reads back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def run_in_thread(
    fn: Callable[[], Any], name: str = "test-helper"
) -> tuple[threading.Thread, list[Any]]:
    """Start `fn` in a daemon thread; its return value lands in the returned list."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), name=name, daemon=True)
    thread.start()
    return thread, result
