"""Errors of the informer stack.

API failures are `controller.apiclient.errors.KubeApiError`s, whether they came as a non-2xx
response (from the one request path) or as a watch `ERROR` event (`StatusError`, defined there
with `ConnectionFailedError`); the reflector decides between re-watch, backoff and relist from
their status and Status reason with the `is_*` predicates (client-go apimachinery
`errors.IsResourceExpired` & co). `CacheError` is the root of the errors of the stack itself,
under `controller.core.errors.ControllerError`. `NotInCacheError` is what listers raise for a
missing object; it mirrors client-go's `apierrors.NewNotFound` message (`pod "name" not found`),
and is named apart from the API's `NotFoundError` because it says nothing about the server.
"""

from __future__ import annotations

from controller.apiclient.errors import KubeApiError, KubeUnavailableError
from controller.core.errors import ControllerError

__all__ = [
    "CacheError",
    "IndexerConflictError",
    "InformerStoppedError",
    "KeyFuncError",
    "NotInCacheError",
    "UnknownIndexError",
    "is_connection_refused",
    "is_expired",
    "is_internal_error",
    "is_too_large_resource_version",
    "is_too_many_requests",
]


class CacheError(ControllerError):
    """Base of every error raised by controller.cache."""


class KeyFuncError(CacheError, ValueError):
    """An object has no usable metadata to compute its key from, or a key is malformed."""


class UnknownIndexError(CacheError, LookupError):
    """An index name that was never registered (client-go: "Index with name X does not exist")."""


class IndexerConflictError(CacheError, ValueError):
    """`add_indexers` was given a name that already exists."""


class InformerStoppedError(CacheError, RuntimeError):
    """The informer has stopped (or started, for start-only settings) and refuses the call."""


class NotInCacheError(CacheError, LookupError):
    """A lister found no object under the key; `resource` is the singular lowercase kind."""

    def __init__(self, resource: str, name: str, namespace: str = "") -> None:
        super().__init__(f'{resource} "{name}" not found')
        self.resource = resource
        self.name = name
        self.namespace = namespace
        self.code = 404
        self.reason = "NotFound"


def is_expired(err: BaseException) -> bool:
    """410 Gone / reason Expired: the requested resourceVersion is too old."""
    return isinstance(err, KubeApiError) and (
        err.status == 410 or err.status_reason in ("Expired", "Gone")
    )


TOO_LARGE_RV_CAUSE = "ResourceVersionTooLarge"
TOO_LARGE_RV_MESSAGE = "Too large resource version"


def is_too_large_resource_version(err: BaseException) -> bool:
    """The server has not caught up with the requested resourceVersion yet.

    As client-go's `isTooLargeResourceVersionError` decides it: a Status cause of type
    `ResourceVersionTooLarge`, whatever the status (today's servers); or, on a Timeout, a cause
    message "Too large resource version" (servers 1.17.0-1.18.5) or that phrase in the message
    (older servers). A top-level reason `ResourceVersionTooLarge` is accepted too.
    """
    if not isinstance(err, KubeApiError):
        return False
    if err.status_reason == TOO_LARGE_RV_CAUSE or any(
        c.type == TOO_LARGE_RV_CAUSE for c in err.causes
    ):
        return True
    if not (err.status == 504 or err.status_reason == "Timeout"):
        return False
    return TOO_LARGE_RV_MESSAGE in err.message or any(
        c.message == TOO_LARGE_RV_MESSAGE for c in err.causes
    )


def is_too_many_requests(err: BaseException) -> bool:
    return isinstance(err, KubeApiError) and err.status == 429


def is_internal_error(err: BaseException) -> bool:
    return (
        isinstance(err, KubeApiError) and err.status == 500 and err.status_reason == "InternalError"
    )


def is_connection_refused(err: BaseException) -> bool:
    return isinstance(err, KubeUnavailableError) and err.refused
