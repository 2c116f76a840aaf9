"""Which routing keys are converging: queued by an event and not yet handled since.

A key the informer events queued is the reconciler's to write; what differs there is not drift.
`Converging` keeps that bookkeeping for the reconciler and gc's backstop pass:

* `enqueued(key)` when a key is queued; `handling(key)` when its handler starts and
  `settled(key, seen)` when it succeeded (or failed for good): the key stops converging unless
  it was queued again meanwhile. A handler that fails to be retried leaves the key converging.
* `keys()`: the keys converging now.
* `mark()` and `since(mark)`: the keys queued after a mark (older enqueues are then forgotten,
  so the record stays as small as the keys queued since). The backstop takes a mark before it
  reads the caches: a key it had to change that an event queued after the mark raced that
  event (the cache had the change before the event's handler queued the key), not drift.
* `wait_delivered(delivered, timeout)`: waits until `delivered()` (no event notification still
  on its way to a handler) or the timeout, so `since` sees the keys those events queue.
* `on_its_own(key, retry, failed, run, ...)`: one key of a full pass; a key that fails is
  queued to be retried alone and the pass goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

LOG = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

DELIVERY_TIMEOUT = 1.0
_POLL = 0.005


class Converging:
    """See the module docstring."""

    def __init__(self, *, tracking: bool = True) -> None:
        # tracking False: nobody works the queue off, so nothing queued is converging
        self._tracking = tracking
        self._lock = threading.Lock()
        self._queued: dict[str, int] = {}  # key -> enqueues not yet settled by a handle
        self._last: dict[str, int] = {}  # key -> sequence number of its last enqueue
        self._seq = 0

    def enqueued(self, key: str) -> None:
        if not self._tracking:
            return
        with self._lock:
            self._queued[key] = self._queued.get(key, 0) + 1
            self._seq += 1
            self._last[key] = self._seq

    def handling(self, key: str) -> int:
        with self._lock:
            return self._queued.get(key, 0)

    def settled(self, key: str, seen: int) -> None:
        with self._lock:
            if self._queued.get(key, 0) == seen:
                self._queued.pop(key, None)

    def has(self, key: str) -> bool:
        with self._lock:
            return key in self._queued

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._queued)

    def mark(self) -> int:
        with self._lock:
            return self._seq

    def since(self, mark: int) -> set[str]:
        """The keys queued after `mark`; what was queued before it is forgotten, as the passes
        that ask are serialised and each marks after the last one asked."""
        with self._lock:
            self._last = {key: seq for key, seq in self._last.items() if seq > mark}
            return set(self._last)


def wait_delivered(delivered: Callable[[], bool], timeout: float = DELIVERY_TIMEOUT) -> bool:
    """True once `delivered()`; False if it is not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()  # never set: a bounded park between checks
    while not delivered():
        if time.monotonic() >= deadline:
            return False
        pause.wait(_POLL)
    return True


def on_its_own(
    key: str,
    retry: Callable[[str], None],
    failed: T,
    run: Callable[P, T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """`run(*args, **kwargs)` as one key of a full pass: a key that fails (the NB refusing its
    write, a status patch the API refuses) is logged and queued by `retry` to be retried by
    itself, with its own backoff, and `failed` is returned so the pass goes on with the other
    keys (nothing of the key was written: its change is one transaction)."""
    try:
        return run(*args, **kwargs)
    except Exception as exc:  # one key's failure never holds back the repair of the others
        LOG.warning("routing %s: failed in the full pass, queued to retry alone: %s", key, exc)
        retry(key)
        return failed
