"""Shared helpers for the emulator's conformance tests: raw watch streams read with deadlines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from controller.testing import builders


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod with one busybox container and no namespace (the request path gives it one)."""
    return builders.pod(name, None, labels=labels or None, **spec)


class RawWatch:
    """A watch opened through a generated list function with `_preload_content=False`.

    Events are decoded from the raw lines the way a reflector would; every read is bounded by
    the urllib3 read timeout given at open, so a missing event fails the test instead of hanging.
    """

    def __init__(
        self, list_func: Callable[..., Any], *args: Any, read_timeout: float = 5.0, **kwargs: Any
    ) -> None:
        self.resp = list_func(
            *args,
            watch=True,
            _preload_content=False,
            _request_timeout=(5.0, read_timeout),
            **kwargs,
        )
        self._lines: Iterator[str] = iter_resp_lines(self.resp)

    def next(self) -> dict[str, Any]:
        for line in self._lines:
            if line:
                event: dict[str, Any] = json.loads(line)
                return event
        raise EOFError("watch stream ended")

    def take(self, n: int, *, skip_bookmarks: bool = True) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while len(out) < n:
            event = self.next()
            if skip_bookmarks and event["type"] == "BOOKMARK":
                continue
            out.append(event)
        return out

    def rest(self) -> list[dict[str, Any]]:
        """Every remaining event until the server ends the stream cleanly."""
        out: list[dict[str, Any]] = []
        for line in self._lines:
            if line:
                out.append(json.loads(line))
        return out

    def close(self) -> None:
        self.resp.close()
        self.resp.release_conn()

    def __enter__(self) -> RawWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]
