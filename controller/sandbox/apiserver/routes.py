"""Resource URLs: a request path parsed into its resource, namespace, name and subresource, the
Kubernetes verb of a request on it (`get`, `list`, `watch`, `create`, ...) and its query
parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.sandbox.apiserver import resources
from controller.sandbox.apiserver.resources import ApiError, ResourceType

#: The spellings of true in a query parameter.
TRUE = ("true", "1")


class Route:
    """A parsed resource URL."""

    __slots__ = ("name", "namespace", "rt", "subresource")

    def __init__(
        self, rt: ResourceType, namespace: str | None, name: str, subresource: str
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def not_found_path() -> ApiError:
    return ApiError(
        404,
        "NotFound",
        "the server could not find the requested resource",
        details={
            "causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]
        },
    )


def method_not_allowed(method: str, what: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({method} {what})",
    )


def parse_route(path: str) -> tuple[str, str, list[str]] | None:
    """Split /api/v1/... or /apis/g/v/... into (group, version, rest)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


def resolve(group: str, version: str, rest: list[str]) -> Route:
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace = rest[1]
        rest = rest[2:]
    if not rest or len(rest) > 3:
        raise not_found_path()
    rt = resources.lookup(group, version, rest[0])
    if rt is None or (namespace is not None and not rt.namespaced):
        raise not_found_path()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and not ((sub == "status" and rt.has_status) or (sub == "scale" and rt.has_scale)):
        raise not_found_path()
    return Route(rt, namespace, name, sub)


def request_verb(method: str, route: Route, query: dict[str, str]) -> str:
    if method == "GET":
        if route.name:
            return "get"
        return "watch" if query.get("watch", "").lower() in TRUE else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if route.name else "deletecollection"
    return method.lower()


def int_param(query: dict[str, str], name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise resources.bad_request(f"invalid {name} {value!r}: must be an integer") from None


@dataclass(frozen=True, slots=True)
class WatchParams:
    """A watch request's query: its timeout, bookmarks, sendInitialEvents and start."""

    timeout: int | None
    bookmarks: bool
    send_initial: bool | None
    resource_version: str | None


def watch_params(query: dict[str, str]) -> WatchParams:
    """The watch query read and checked (sendInitialEvents needs resourceVersionMatch
    NotOlderThan, as kube-apiserver requires)."""
    send_initial_raw = query.get("sendInitialEvents")
    send_initial = None if send_initial_raw is None else send_initial_raw.lower() in TRUE
    if send_initial is not None and query.get("resourceVersionMatch") != "NotOlderThan":
        raise resources.bad_request(
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        )
    return WatchParams(
        timeout=int_param(query, "timeoutSeconds"),
        bookmarks=query.get("allowWatchBookmarks", "").lower() in TRUE,
        send_initial=send_initial,
        resource_version=query.get("resourceVersion"),
    )
