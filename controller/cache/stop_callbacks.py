"""Functions run once a stop event is set, with one waiting thread per event (not per call).

The reflector registers its `interrupt` for every `list_and_watch`, so an open watch stream
ends as soon as its stop event is set, whoever called it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

LOG = logging.getLogger(__name__)


class StopCallbacks:
    """Calls registered functions once a stop event is set.

    One waiting thread per stop event, however many `list_and_watch` calls register on it: `run`
    calls `list_and_watch` after every relist with the same long-lived event, and a thread per
    call blocked in `stop.wait()` would pile up until the stop. A function registered after the
    event is set still runs (from a fresh waiter thread, at once).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # id(event) -> (event, {token: callback}); the entry keeps the event alive, so its id
        # cannot be reused while registered.
        self._entries: dict[int, tuple[threading.Event, dict[int, Callable[[], None]]]] = {}
        self._tokens = 0

    def register(self, stop: threading.Event, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when `stop` is set; the returned function cancels the registration."""
        with self._lock:
            entry = self._entries.get(id(stop))
            if entry is None:
                entry = (stop, {})
                self._entries[id(stop)] = entry
                threading.Thread(
                    target=self._wait, args=(stop,), name="reflector-stop", daemon=True
                ).start()
            token = self._tokens
            self._tokens += 1
            entry[1][token] = callback

        def cancel() -> None:
            with self._lock:
                current = self._entries.get(id(stop))
                if current is not None and current[0] is stop:
                    current[1].pop(token, None)

        return cancel

    def _wait(self, stop: threading.Event) -> None:
        stop.wait()
        with self._lock:
            _, callbacks = self._entries.pop(id(stop))
        for callback in callbacks.values():
            try:
                callback()
            except Exception:  # one failing callback must not keep the others from running
                LOG.exception("stop callback failed")


#: The one registry every reflector uses (one waiter thread per stop event process-wide).
ON_STOP = StopCallbacks()
