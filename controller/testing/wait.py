"""Waiting on a condition with a deadline: how threaded tests and benches synchronise.

Contract: `wait_for(cond, timeout)` calls `cond` until it returns something truthy and returns
that value; when `timeout` seconds (monotonic, real time) pass first it raises `WaitTimeout`, an
`AssertionError`, so an unmet condition fails the test with `message` instead of hanging it.
Exceptions of the types in `tolerate` count as "not yet" (the last one is named in the failure);
any other exception propagates at once. Between checks the caller's thread parks on an Event
for `interval` seconds: the condition, not the pause, is what synchronises.

Time here is real time on purpose: a fake clock cannot bound how long another thread takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 5.0
DEFAULT_INTERVAL = 0.005


class WaitTimeout(AssertionError):
    """A condition did not hold before its deadline."""


def wait_for(
    cond: Callable[[], T | None],
    timeout: float = DEFAULT_TIMEOUT,
    message: str = "condition",
    *,
    interval: float = DEFAULT_INTERVAL,
    tolerate: tuple[type[BaseException], ...] = (),
) -> T:
    """`cond()`'s first truthy value; `WaitTimeout` if none comes within `timeout` seconds."""
    if timeout < 0 or interval <= 0:
        raise ValueError(f"timeout must be >= 0 and interval > 0, got {timeout}, {interval}")
    deadline = time.monotonic() + timeout
    pause = threading.Event()  # never set: a bounded park between checks
    last_exc: BaseException | None = None
    while True:
        try:
            value = cond()
            if value:
                return value
        except tolerate as exc:
            last_exc = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_exc!r})" if last_exc is not None else ""
            raise WaitTimeout(f"timed out after {timeout}s waiting for {message}{detail}")
        pause.wait(interval)
