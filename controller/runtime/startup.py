"""Start-up waits for a dependency that is not reachable yet (the OVN NB, the API server).

`wait_until_reachable(what, attempt, timeout=..., stop=...)` calls `attempt()` until it returns,
backing off 0.5 s, 1 s, 2 s ... (at most `MAX_BACKOFF`) while `is_unreachable(exc)` says the
failure is a transport one, and logs one human line per failure ("waiting for <what>:
connection refused; retrying in 2s, giving up after 60s"). It gives up after `timeout` seconds
with `StartupError`, whose message is one sentence with the last reason, never a raw urllib3
`MaxRetryError`. Other failures (401, a bad schema) propagate at once. When `stop` is set
during a wait it returns None. `human_reason(exc)` is the short reason used in those lines.
While it waits, urllib3's own "Retrying (Retry(total=2, ...)) after connection broken by
NewConnectionError(...)" warnings are held back: the line above says the same once.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from controller.apiclient.errors import KubeUnavailableError
from controller.core.errors import ControllerError
from controller.ovn.api import OvnError
from controller.queues.clock import REAL_CLOCK, Clock

LOG = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_BACKOFF = 0.5
MAX_BACKOFF = 10.0

_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_KNOWN = (
    ("timed out", "timed out"),
    ("Connection refused", "connection refused"),
    ("Name or service not known", "name or service not known"),
    ("No route to host", "no route to host"),
    ("CERTIFICATE_VERIFY_FAILED", "TLS certificate verification failed"),
    ("SSLError", "TLS handshake failed"),
)


class StartupError(ControllerError):
    """A dependency stayed unreachable for the whole start-up bound."""


def human_reason(exc: BaseException) -> str:
    """`connection refused`, `timed out`, ... out of whatever a client library raised."""
    text = str(exc)
    match = _ERRNO.search(text)
    if match:
        return match.group(1).strip().lower()
    for needle, reason in _KNOWN:
        if needle in text:
            return reason
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) <= 160 else first[:157] + "..."


class _NoRetryWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Retrying")


@contextlib.contextmanager
def _quiet_urllib3_retries() -> Iterator[None]:
    pool = logging.getLogger("urllib3.connectionpool")
    quiet = _NoRetryWarnings()
    pool.addFilter(quiet)
    try:
        yield
    finally:
        pool.removeFilter(quiet)


def is_unreachable(exc: BaseException) -> bool:
    return isinstance(exc, KubeUnavailableError | OvnError | OSError)


def wait_until_reachable(
    what: str,
    attempt: Callable[[], T],
    *,
    timeout: float,
    stop: threading.Event,
    clock: Clock = REAL_CLOCK,
) -> T | None:
    """See the module docstring."""
    with _quiet_urllib3_retries():
        return _wait(what, attempt, timeout=timeout, stop=stop, clock=clock)


def _wait(
    what: str,
    attempt: Callable[[], T],
    *,
    timeout: float,
    stop: threading.Event,
    clock: Clock,
) -> T | None:
    deadline = clock.now() + timeout
    backoff = FIRST_BACKOFF
    waited = False
    while True:
        try:
            result = attempt()
        except Exception as exc:
            if not is_unreachable(exc):
                raise
            reason = human_reason(exc)
            remaining = deadline - clock.now()
            if remaining <= 0:
                raise StartupError(
                    f"{what} was unreachable for {timeout:g}s ({reason}); check that it runs "
                    "and that this address is right, or raise --ovn-timeout"
                ) from None
            delay = min(backoff, remaining)
            LOG.warning(
                "waiting for %s: %s; retrying in %gs, giving up after %gs",
                *(what, reason, round(delay, 1), timeout),
            )
            waited = True
            if clock.sleep(delay, stop):
                return None
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        if waited:
            LOG.info("%s is reachable", what)
        return result
