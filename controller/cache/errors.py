"""Errors of the informer stack.

`StatusError` is an API failure carrying the HTTP status code and the Kubernetes `Status` reason,
whether it came as a non-2xx response or as a watch `ERROR` event; the reflector decides between
re-watch, backoff and relist from it (client-go apimachinery `errors.IsResourceExpired` & co).
`NotFoundError` is what listers raise for a missing object; it mirrors client-go's
`apierrors.NewNotFound` message (`pod "name" not found`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class CacheError(Exception):
    """Base of every error raised by controller.cache."""


class KeyFuncError(CacheError, ValueError):
    """An object has no usable metadata to compute its key from, or a key is malformed."""


class UnknownIndexError(CacheError, LookupError):
    """An index name that was never registered (client-go: "Index with name X does not exist")."""


class IndexerConflictError(CacheError, ValueError):
    """`add_indexers` was given a name that already exists."""


class InformerStoppedError(CacheError, RuntimeError):
    """The informer has stopped (or started, for start-only settings) and refuses the call."""


class NotFoundError(CacheError, LookupError):
    """A lister found no object under the key; `resource` is the singular lowercase kind."""

    def __init__(self, resource: str, name: str, namespace: str = "") -> None:
        self.resource = resource
        self.name = name
        self.namespace = namespace
        self.code = 404
        self.reason = "NotFound"
        super().__init__(f'{resource} "{name}" not found')


class StatusError(CacheError):
    """An API error with an HTTP code and a Kubernetes `Status.reason` (may be empty)."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        self.code = code
        self.reason = reason
        self.message = message
        super().__init__(f"{code} {reason}: {message}" if message else f"{code} {reason}")

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> StatusError:
        """Build from a `Status` object (e.g. the object of a watch ERROR event)."""
        code = status.get("code")
        return cls(
            code if isinstance(code, int) else 500,
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
        )


class ConnectionFailedError(CacheError):
    """The API server could not be reached (connection refused, reset or timed out)."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        self.refused = refused
        super().__init__(message)


def is_expired(err: BaseException) -> bool:
    """410 Gone / reason Expired: the requested resourceVersion is too old."""
    return isinstance(err, StatusError) and (err.code == 410 or err.reason in ("Expired", "Gone"))


def is_too_large_resource_version(err: BaseException) -> bool:
    """The server has not caught up with the requested resourceVersion yet."""
    return isinstance(err, StatusError) and (
        err.reason == "ResourceVersionTooLarge"
        or (err.code == 504 and "Too large resource version" in err.message)
    )


def is_too_many_requests(err: BaseException) -> bool:
    return isinstance(err, StatusError) and err.code == 429


def is_internal_error(err: BaseException) -> bool:
    return isinstance(err, StatusError) and err.code == 500 and err.reason == "InternalError"


def is_connection_refused(err: BaseException) -> bool:
    return isinstance(err, ConnectionFailedError) and err.refused
