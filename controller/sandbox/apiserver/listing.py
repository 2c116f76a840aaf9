"""LIST semantics of a real apiserver over one resource's table: which version a request
reads (`resourceVersion`, `resourceVersionMatch`, a continue token), the objects as they were
at that version (the current ones overlaid with history), and one page of them in key order.

`resource_version` "" or None: the newest state; "0": any state (the newest here), whole
(kube-apiserver serves it from its watch cache and ignores `limit`); "N" with match
NotOlderThan (or no match): the newest state, 504 if N is in the future; "N" with match Exact:
the state at N, 410 if compacted. A continue token serves the next page at the first page's
version, 410 once that version is compacted.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json

from controller.sandbox.apiserver.records import Key, ListResult, Stored
from controller.sandbox.apiserver.resources import bad_request, gone, too_large, too_old
from controller.sandbox.apiserver.selectors import Selector
from controller.sandbox.apiserver.watch import Table


def encode_continue(rv: int, key: Key) -> str:
    raw = json.dumps({"v": "emulator/v1", "rv": rv, "start": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        start = data["start"]
        return int(data["rv"]), (str(start[0]), str(start[1]))
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error) as exc:
        raise bad_request(f"continue key is not valid: {exc}") from None


def check_list_request(
    resource_version: str | None,
    resource_version_match: str | None,
    limit: int,
    continue_token: str | None,
) -> int:
    """The request's parameters checked; the page size to use (0: whole)."""
    if limit < 0:
        raise bad_request("limit must not be negative")
    if resource_version == "0" and not continue_token:
        limit = 0
    if resource_version_match and not resource_version and not continue_token:
        raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if resource_version_match not in (None, "", "NotOlderThan", "Exact"):
        raise bad_request(f"unsupported resourceVersionMatch {resource_version_match!r}")
    return limit


def list_snapshot(
    current: int,
    compacted: int,
    resource_version: str | None,
    resource_version_match: str | None,
    continue_token: str | None,
) -> tuple[int, Key | None]:
    """(the version the list reads, the key after which it starts)."""
    start: Key | None = None
    if continue_token:
        if resource_version not in (None, "", "0") or resource_version_match:
            raise bad_request("specifying resource version is not allowed when using continue")
        snapshot, start = decode_continue(continue_token)
        if snapshot < compacted:
            raise gone(
                "The provided continue parameter is too old to display a consistent "
                "list result. You can start a new list without the continue parameter, "
                "or use the continue token in this response to retrieve the remainder "
                "of the results. Continuing with the provided token results in an "
                "inconsistent list - objects that were created, modified, or deleted "
                "between the time the first chunk was returned and now may show up in "
                "the list.",
                continue_token=encode_continue(current, start),
            )
    elif resource_version in (None, "", "0"):
        if resource_version == "0" and resource_version_match == "Exact":
            raise bad_request("resourceVersionMatch Exact is forbidden for resourceVersion 0")
        snapshot = current
    else:
        requested = parse_rv(resource_version)
        if requested > current:
            raise too_large(requested, current)
        if resource_version_match == "Exact":
            if requested < compacted:
                raise too_old(requested, compacted)
            snapshot = requested
        else:
            snapshot = current
    return snapshot, start


def parse_rv(value: str) -> int:
    try:
        rv = int(value)
    except ValueError:
        raise bad_request(f"invalid resource version {value!r}") from None
    if rv < 0:
        raise bad_request(f"invalid resource version {value!r}")
    return rv


def snapshot_overlay(table: Table, snapshot: int, current: int) -> dict[Key, Stored | None]:
    """Overrides to apply to the current objects to see the state at `snapshot`."""
    overlay: dict[Key, Stored | None] = {}
    if snapshot >= current:
        return overlay
    hist = table.history
    first = bisect.bisect_right(hist, snapshot, lo=table.history_start, key=lambda e: e.rv)
    for ev in reversed(hist[first:]):
        overlay[ev.key] = None if ev.type == "ADDED" else ev.prev
    return overlay


def page(
    table: Table,
    overlay: dict[Key, Stored | None],
    selector: Selector,
    snapshot: int,
    start: Key | None,
    limit: int,
) -> ListResult:
    keys_list = sorted(set(table.objects) | set(overlay)) if overlay else table.keys_sorted()
    ns = selector.namespace if table.rt.namespaced else None
    lo, hi = 0, len(keys_list)
    if ns is not None:
        lo = bisect.bisect_left(keys_list, (ns, ""))
        hi = bisect.bisect_left(keys_list, (ns + "\x00", ""))
    if start is not None:
        lo = max(lo, bisect.bisect_right(keys_list, start))
    plain = not selector.labels and not selector.fields
    objects = table.objects

    def lookup(k: Key) -> Stored | None:
        return overlay[k] if k in overlay else objects.get(k)

    items: list[Stored] = []
    next_index: int | None = None
    for i in range(lo, hi):
        stored = lookup(keys_list[i])
        if stored is None or (not plain and not selector.matches(stored.obj)):
            continue
        if limit and len(items) == limit:
            next_index = i
            break
        items.append(stored)
    token = None
    remaining = None
    if next_index is not None:
        last = items[-1].obj["metadata"]
        token = encode_continue(snapshot, (last.get("namespace", ""), last["name"]))
        if plain and not overlay:
            remaining = hi - next_index  # every key in range is a live object
        elif plain:
            remaining = sum(1 for k in keys_list[next_index:hi] if lookup(k) is not None)
    return ListResult(items, snapshot, token, remaining)
