"""Parse-once caches for informer objects, keyed by (namespace, name, resourceVersion).

An informer replaces a cached object on every change and never edits it in place, so one
resourceVersion of one object always parses to the same model: `ParseCache.get` parses it once
and answers every later read of that version from memory. An object without a resourceVersion
(or without a name) is parsed on every read. A malformed object is remembered as malformed and
raises a fresh `MalformedObjectError` with the same message on every read.

The cache is bounded: when it holds `max_entries` versions the older half is dropped (old
versions are rarely read again; a live one dropped costs one re-parse). `max_entries=None` is for
a cache that lives only for one bounded pass (e.g. the start-up garbage collection); `resize`
lifts or restores the bound of a long-lived one around such a pass.
Thread-safe: the parse runs outside the lock, so two threads may parse the same version once
each; both get equal models.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.core.errors import MalformedObjectError
from controller.core.model import Subnet
from controller.core.subnet_spec import format_subnet_spec
from controller.kube.api import KubeObject

T = TypeVar("T")

DEFAULT_MAX_ENTRIES = 1024


@dataclass(frozen=True, slots=True)
class _Outcome(Generic[T]):
    value: T | None
    error: str | None  # the MalformedObjectError message when the object is malformed


class ParseCache(Generic[T]):
    """`parse(raw)` memoised per (namespace, name, resourceVersion); see the module docstring."""

    def __init__(
        self, parse: Callable[[KubeObject], T], max_entries: int | None = DEFAULT_MAX_ENTRIES
    ) -> None:
        self._parse = parse
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str], _Outcome[T]] = {}

    def get(self, raw: KubeObject) -> T:
        """The model of `raw`; MalformedObjectError as `parse` raises it."""
        outcome = self._outcome(raw)
        if outcome.error is not None:
            raise MalformedObjectError(outcome.error)
        return outcome.value  # type: ignore[return-value]

    def resize(self, max_entries: int | None) -> None:
        """Bound the cache anew (None: unbounded); when it holds more, the oldest go now."""
        with self._lock:
            self._max = max_entries
            if max_entries is not None and len(self._entries) > max_entries:
                self._drop_oldest(len(self._entries) - max_entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _outcome(self, raw: KubeObject) -> _Outcome[T]:
        key = _version_key(raw)
        if key is None:
            return self._run(raw)
        with self._lock:
            found = self._entries.get(key)
        if found is not None:
            return found
        outcome = self._run(raw)
        with self._lock:
            if self._max is not None and len(self._entries) >= self._max:
                self._drop_oldest(max(1, self._max // 2))
            self._entries[key] = outcome
        return outcome

    def _drop_oldest(self, count: int) -> None:
        """Under the lock: forget the `count` oldest versions (dicts keep insertion order)."""
        for old in list(itertools.islice(self._entries, count)):
            del self._entries[old]

    def _run(self, raw: KubeObject) -> _Outcome[T]:
        try:
            return _Outcome(self._parse(raw), None)
        except MalformedObjectError as exc:
            return _Outcome(None, str(exc))


def _version_key(raw: KubeObject) -> tuple[str, str, str] | None:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    version, name = meta.get("resourceVersion"), meta.get("name")
    namespace = meta.get("namespace") or ""
    if not isinstance(version, str) or not version or not isinstance(name, str):
        return None
    if not isinstance(namespace, str):
        return None
    return (namespace, name, version)


@dataclass(frozen=True, slots=True)
class ParsedSubnet:
    """One subnet object's parse: the model (None if malformed; with the CIDR, gateway and
    excludeIps `format_subnet_spec` gives when the spec passes it) and each check's error text.

    `parse_error`: `Subnet.from_dict` refused it; `spec_error`: the model parsed but the subnet
    controller refuses its spec (`format_subnet_spec`), so IPAM never registers it.
    """

    subnet: Subnet | None
    parse_error: str
    spec_error: str


def parse_subnet(raw: KubeObject) -> ParsedSubnet:
    """Both checks of one subnet object; never raises."""
    try:
        subnet = Subnet.from_dict(raw)
    except MalformedObjectError as exc:
        return ParsedSubnet(None, str(exc), "")
    try:
        spec = raw.get("spec") or {}
        formatted = format_subnet_spec(subnet.name, spec if isinstance(spec, Mapping) else {})
    except MalformedObjectError as exc:
        return ParsedSubnet(subnet, "", str(exc))
    # the subnet controller registers a subnet in IPAM as it writes this formatted spec back:
    # until that write is cached, readers still see what the subnet is about to have
    subnet = dataclasses.replace(
        subnet,
        cidr_block=formatted["cidrBlock"],
        gateway=formatted["gateway"],
        exclude_ips=tuple(formatted["excludeIps"]),
    )
    return ParsedSubnet(subnet, "", "")
