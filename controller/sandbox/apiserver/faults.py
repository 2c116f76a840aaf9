"""Fault injection and request recording for the API server emulator.

Every request the emulator serves is first described as a `RequestInfo` (HTTP method, RBAC-style
verb, resource, namespace, name, subresource). `FaultInjector.decide()` is consulted with it
before any state changes, so an injected failure never half-applies. Rules match on any subset of
method / verb / resource / namespace / name and fire for the next N matching requests (or forever
with `n=None`). Tests drive it through `ApiServer.faults`:

* `fail_next(n, status=500)`: answer with a Status error instead of serving (`details`: the
  Status's `details`, e.g. `causes`, for errors a client must read from there);
* `add_latency(seconds)`: delay matching requests (server side, before serving);
* `drop_connections(n)`: close the connection without answering (nothing served);
* `lose_answers(n)`: serve the request, then close the connection instead of answering (the
  change is made and the client never hears of it);
* `force_gone_next_watch(resource)`: the next watch gets an ERROR event with a 410 Status;
* `drop_watches(resource)`: end open watch streams abruptly (no terminating chunk);
* `expire_watches(resource)`: send open watches an ERROR 410 event;
* `clear()`: forget every pending rule.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass

from controller.sandbox.apiserver.resources import ApiError, JsonDict
from controller.sandbox.apiserver.store import ObjectStore

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request does, in RBAC terms (verb on group/resource[/subresource])."""

    method: str
    verb: str  # get, list, watch, create, update, patch, delete, deletecollection; or "discovery"
    group: str = ""
    resource: str = ""  # plural; "" for discovery and non-resource paths
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    path: str = ""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One served request, as the request log keeps it (code = HTTP status sent)."""

    method: str
    verb: str
    group: str
    resource: str
    namespace: str
    name: str
    subresource: str
    code: int


@dataclass(slots=True)
class _Rule:
    action: str  # error, latency, drop, lose, gone
    remaining: int | None
    method: str | None
    verb: str | None
    resource: str | None
    namespace: str | None
    name: str | None
    status: int = 500
    reason: str = ""
    message: str = ""
    seconds: float = 0.0
    details: JsonDict | None = None

    def matches(self, info: RequestInfo) -> bool:
        if self.method is not None and self.method.upper() != info.method:
            return False
        if self.verb is not None and self.verb != info.verb:
            return False
        if self.resource is not None:
            plural, _, group = self.resource.partition(".")
            full = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            if plural not in (info.resource, full) or (group and group != info.group):
                return False
        if self.namespace is not None and self.namespace != info.namespace:
            return False
        return self.name is None or self.name == info.name


@dataclass(frozen=True, slots=True)
class FaultDecision:
    latency: float = 0.0
    error: ApiError | None = None
    drop: bool = False
    gone: bool = False
    lose: bool = False


class FaultInjector:
    """Thread-safe rule set consulted by the HTTP layer before serving each request."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []

    def _add(self, rule: _Rule) -> None:
        if rule.remaining is not None and rule.remaining < 1:
            raise ValueError("n must be at least 1 (or None for every request)")
        with self._lock:
            self._rules.append(rule)

    def fail_next(
        self,
        n: int | None = 1,
        status: int = 500,
        *,
        method: str | None = None,
        resource: str | None = None,
        verb: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        reason: str | None = None,
        message: str | None = None,
        details: JsonDict | None = None,
    ) -> None:
        """Answer the next `n` matching requests with a Status error of code `status`."""
        if not 400 <= status <= 599:
            raise ValueError(f"status must be an HTTP error code, got {status}")
        self._add(
            _Rule(
                "error",
                n,
                method,
                verb,
                resource,
                namespace,
                name,
                status=status,
                reason=reason or _REASONS.get(status, "InternalError"),
                message=message or f"injected fault: HTTP {status}",
                details=copy.deepcopy(details),
            )
        )

    def add_latency(
        self,
        seconds: float,
        *,
        n: int | None = None,
        method: str | None = None,
        resource: str | None = None,
        verb: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> None:
        """Delay matching requests by `seconds` (every one, or the next `n`)."""
        if seconds < 0:
            raise ValueError("latency must not be negative")
        self._add(_Rule("latency", n, method, verb, resource, namespace, name, seconds=seconds))

    def drop_connections(
        self,
        n: int | None = 1,
        *,
        method: str | None = None,
        resource: str | None = None,
        verb: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> None:
        """Close the connection of the next `n` matching requests without answering."""
        self._add(_Rule("drop", n, method, verb, resource, namespace, name))

    def lose_answers(
        self,
        n: int | None = 1,
        *,
        method: str | None = None,
        resource: str | None = None,
        verb: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> None:
        """Serve the next `n` matching requests (not watches), then close their connection
        instead of answering."""
        self._add(_Rule("lose", n, method, verb, resource, namespace, name))

    def force_gone_next_watch(self, resource: str | None = None, n: int = 1) -> None:
        """The next `n` watches (of `resource`) get HTTP 200 + an ERROR event with a 410."""
        self._add(_Rule("gone", n, None, "watch", resource, None, None))

    def drop_watches(self, resource: str | None = None) -> int:
        """End open watch streams abruptly; returns how many were open."""
        return self._store.drop_watches(resource)

    def expire_watches(self, resource: str | None = None) -> int:
        """Send every open watch (of `resource`) an ERROR 410 event; returns how many."""
        return self._store.expire_watches(resource)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._rules)

    def decide(self, info: RequestInfo) -> FaultDecision:
        """Consume the rules that match `info` and say what to do to the request."""
        latency = 0.0
        error: ApiError | None = None
        drop = gone = lose = False
        with self._lock:
            for rule in list(self._rules):
                if not rule.matches(info):
                    continue
                if rule.action == "latency":
                    latency += rule.seconds
                elif error is not None or drop or gone or lose:
                    continue  # one terminal fault per request; later rules wait their turn
                elif rule.action == "error":
                    error = ApiError(
                        rule.status, rule.reason, rule.message, details=copy.deepcopy(rule.details)
                    )
                elif rule.action == "drop":
                    drop = True
                elif rule.action == "lose":
                    lose = True
                elif rule.action == "gone":
                    gone = True
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._rules.remove(rule)
        return FaultDecision(latency, error, drop, gone, lose)
