"""Response bodies assembled from stored JSON bytes (a list, the chunked lines of a watch
stream), and request bodies read as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from controller.sandbox.apiserver import resources
from controller.sandbox.apiserver.records import Stored, dumps
from controller.sandbox.apiserver.resources import JsonDict, ResourceType


def list_body(
    rt: ResourceType, items: Sequence[Stored], rv: int, token: str | None, remaining: int | None
) -> bytes:
    meta: JsonDict = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    head = (
        b'{"kind":"'
        + rt.list_kind.encode()
        + b'","apiVersion":"'
        + rt.api_version.encode()
        + b'","metadata":'
        + dumps(meta)
        + b',"items":['
    )
    if rt.builtin:
        # A real apiserver leaves kind/apiVersion out of built-in list items (custom resources
        # keep them); clients that rely on them would break against a real cluster.
        prefix = dumps({"kind": rt.kind, "apiVersion": rt.api_version})[:-1] + b","
        return head + b",".join(s.list_item(prefix) for s in items) + b"]}"
    return head + b",".join(s.raw for s in items) + b"]}"


def event_line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def parse_json_body(body: bytes) -> Any:
    """A request body as JSON, or a 400 saying why not."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise resources.bad_request(f"couldn't decode the request body as JSON: {exc}") from None


def chunks(lines: list[bytes], *, final: bool = False) -> bytes:
    """Watch lines as HTTP chunks; `final` ends the chunked body."""
    data = b"".join(chunk(line) for line in lines)
    return data + b"0\r\n\r\n" if final else data


def bookmark_line(rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    """A BOOKMARK event at `rv`; `initial_end` marks the end of the initial events."""
    meta: JsonDict = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return event_line(
        "BOOKMARK", dumps({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
    )
