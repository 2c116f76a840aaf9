"""Typed errors at the Kubernetes API boundary: one hierarchy for every caller of the API server.

Contract:

* Every request to the API server goes through `controller.apiclient.request`, which raises only
  these (the Kubernetes client, the informers' list/watch and the Lease lock alike); nothing above
  it ever sees `kubernetes.client.ApiException` or a urllib3 exception. The in-memory fake
  (`controller.testing.fake_kube`) raises them too.
* `KubeApiError` sits under `controller.core.errors.ControllerError`. Its Event `reason` stays
  unset (the handler that catches it picks the Event reason); the Status reason is kept as
  `status_reason`. `code` is the HTTP status under the name the informer stack uses.
* `error_from_status(status, reason, message)` maps an HTTP status plus the Kubernetes `Status`
  reason onto one class, the way kuryr-kubernetes' `_raise_from_response` does. 409 is split by
  the Status reason: `AlreadyExists` (a create lost a race) versus `Conflict` (a stale
  resourceVersion). `error_from_response(status, body)` reads the reason, message and
  `details.causes` (kept as `causes`) from the answer's body first; `transport_error(exc)` is
  the one mapping of a failure to reach the server.
* `retryable` tells the worker whether a requeue can help (conflicts, throttling, server-side and
  transport failures) or not (validation, authorisation).
* `StatusError` and `ConnectionFailedError` are the informer stack's constructors for errors it
  builds itself (a watch `ERROR` event carries a Status object, not an HTTP answer) and that its
  test doubles raise. Instances are `KubeApiError`s; for a `StatusError`, `reason` is the Status
  reason too (client-go's `StatusError.Status().Reason`), as it never reaches a pod handler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from controller.core.errors import ControllerError


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One entry of a `Status`'s `details.causes` (`type` is the wire's `reason` field)."""

    type: str = ""
    message: str = ""
    field: str = ""


def status_causes(status: Mapping[str, Any]) -> tuple[StatusCause, ...]:
    """The causes of a decoded `Status` object; malformed details give none."""
    details = status.get("details")
    raw = details.get("causes") if isinstance(details, Mapping) else None
    if not isinstance(raw, list):
        return ()
    return tuple(
        StatusCause(
            str(c.get("reason") or ""), str(c.get("message") or ""), str(c.get("field") or "")
        )
        for c in raw
        if isinstance(c, Mapping)
    )


class KubeApiError(ControllerError):
    """The API server refused a request, or could not be reached (status 0)."""

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        status: int,
        status_reason: str = "",
        message: str = "",
        *,
        causes: Sequence[StatusCause] = (),
    ) -> None:
        text = f"{status} {status_reason}".rstrip()
        # Base first: ControllerError sets `message` to the whole text, which ours overrides.
        super().__init__(f"{text}: {message}" if message else text)
        self.status = status
        # NOTE: not `reason`: in controller.core.errors that name means the Warning Event's reason.
        self.status_reason = status_reason
        self.message = message
        #: The Status's `details.causes`: some conditions are only stated there (e.g. a
        #: resourceVersion the server has not reached: cause type `ResourceVersionTooLarge`).
        self.causes = tuple(causes)

    @property
    def code(self) -> int:
        """The HTTP status (0: none was received)."""
        return self.status


class KubeUnavailableError(KubeApiError):
    """Transport failure (connection refused, timeout, TLS): no HTTP status was received.

    `refused` is true when nothing listened at the server's address (client-go
    `utilnet.IsConnectionRefused`): the informers then retry without counting it as a failure.
    """

    retryable = True
    refused: bool = False


class BadRequestError(KubeApiError):
    """400: malformed request, e.g. an invalid patch document."""


class UnauthorizedError(KubeApiError):
    """401: the credentials were rejected."""


class ForbiddenError(KubeApiError):
    """403: RBAC denies the verb on this resource."""


class NotFoundError(KubeApiError):
    """404: the object (or its whole API group, e.g. kubevirt not installed) does not exist."""


class ConflictError(KubeApiError):
    """409 Conflict: the resourceVersion precondition failed; re-read and retry."""

    retryable = True


class AlreadyExistsError(KubeApiError):
    """409 AlreadyExists: a create found an object of the same name."""

    retryable = True


class GoneError(KubeApiError):
    """410: the resourceVersion is too old (list/watch)."""

    retryable = True


class InvalidError(KubeApiError):
    """422: the object failed validation."""


class TooManyRequestsError(KubeApiError):
    """429: API priority and fairness throttled the request."""

    retryable = True


class ServerError(KubeApiError):
    """5xx: the API server (or etcd behind it) failed."""

    retryable = True


_BY_STATUS: dict[int, type[KubeApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}


def error_from_status(
    status: int,
    status_reason: str = "",
    message: str = "",
    *,
    causes: Sequence[StatusCause] = (),
) -> KubeApiError:
    """Build the most specific `KubeApiError` for an HTTP status and a Status `reason`."""
    cls: type[KubeApiError]
    if status == 409 and status_reason == "AlreadyExists":
        cls = AlreadyExistsError
    elif status in _BY_STATUS:
        cls = _BY_STATUS[status]
    elif status >= 500:
        cls = ServerError
    elif status == 0:
        cls = KubeUnavailableError
    else:
        cls = KubeApiError
    return cls(status, status_reason, message, causes=causes)


def parse_status_body(data: bytes | None) -> tuple[str, str]:
    """The (reason, message) of an error answer's body: a `Status` object, or plain text.

    Bodies that are not a Status (e.g. "404 page not found" for an API group that is not
    installed, or an HTML page from a proxy) give no reason; their start is kept as the message.
    """
    reason, message, _ = _parse_status(data)
    return reason, message


def _parse_status(data: bytes | None) -> tuple[str, str, tuple[StatusCause, ...]]:
    """`parse_status_body` plus the Status's causes."""
    if not data:
        return "", "", ()
    try:
        decoded = json.loads(data)
    except ValueError:
        return "", data[:512].decode("utf-8", "replace"), ()
    if not isinstance(decoded, dict):
        return "", "", ()
    return (
        str(decoded.get("reason") or ""),
        str(decoded.get("message") or ""),
        status_causes(decoded),
    )


def error_from_response(status: int, data: bytes | None) -> KubeApiError:
    """Map a non-2xx answer to an error, reading a `Status` body (and its causes) if any."""
    reason, message, causes = _parse_status(data)
    return error_from_status(status, reason, message, causes=causes)


def transport_error(exc: BaseException) -> KubeUnavailableError:
    """The error for a request that got no HTTP answer (refused, reset, timed out, TLS)."""
    text = str(exc)
    err = KubeUnavailableError(0, type(exc).__name__, text)
    err.refused = "Connection refused" in text or "NewConnectionError" in text
    return err


class StatusError(KubeApiError):
    """A Status the informer stack builds itself: `code`, `reason` and `message` as sent."""

    def __init__(
        self,
        code: int,
        reason: str = "",
        message: str = "",
        *,
        causes: Sequence[StatusCause] = (),
    ) -> None:
        super().__init__(code, reason, message, causes=causes)
        self.reason = reason

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> StatusError:
        """Build from a `Status` object (e.g. the object of a watch ERROR event)."""
        code = status.get("code")
        return cls(
            code if isinstance(code, int) else 500,
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
            causes=status_causes(status),
        )


def status_error(code: int, data: bytes | None) -> StatusError:
    """A `StatusError` from an error answer's status and body (see `parse_status_body`)."""
    reason, message, causes = _parse_status(data)
    return StatusError(code, reason, message, causes=causes)


class ConnectionFailedError(KubeUnavailableError):
    """`KubeUnavailableError` built from a message, as the informer stack's test doubles raise."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(0, "", message)
        self.refused = refused


class KubeConfigError(ControllerError):
    """The kubeconfig (or the in-cluster service account) could not be loaded."""
