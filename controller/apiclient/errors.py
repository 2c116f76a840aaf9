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
  resourceVersion). `error_from_response(status, body)` reads the reason and message from the
  answer's body first; `transport_error(exc)` is the one mapping of a failure to reach the server.
* `retryable` tells the worker whether a requeue can help (conflicts, throttling, server-side and
  transport failures) or not (validation, authorisation).
* `StatusError` and `ConnectionFailedError` are the informer stack's constructors for errors it
  builds itself (a watch `ERROR` event carries a Status object, not an HTTP answer) and that its
  test doubles raise. Instances are `KubeApiError`s; for a `StatusError`, `reason` is the Status
  reason too (client-go's `StatusError.Status().Reason`), as it never reaches a pod handler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from controller.core.errors import ControllerError


class KubeApiError(ControllerError):
    """The API server refused a request, or could not be reached (status 0)."""

    retryable: ClassVar[bool] = False

    def __init__(self, status: int, status_reason: str = "", message: str = "") -> None:
        text = f"{status} {status_reason}".rstrip()
        # Base first: ControllerError sets `message` to the whole text, which ours overrides.
        super().__init__(f"{text}: {message}" if message else text)
        self.status = status
        # NOTE: not `reason`: in controller.core.errors that name means the Warning Event's reason.
        self.status_reason = status_reason
        self.message = message

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


def error_from_status(status: int, status_reason: str = "", message: str = "") -> KubeApiError:
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
    return cls(status, status_reason, message)


def parse_status_body(data: bytes | None) -> tuple[str, str]:
    """The (reason, message) of an error answer's body: a `Status` object, or plain text.

    Bodies that are not a Status (e.g. "404 page not found" for an API group that is not
    installed, or an HTML page from a proxy) give no reason; their start is kept as the message.
    """
    reason, message = "", ""
    if data:
        try:
            decoded = json.loads(data)
        except ValueError:
            message = data[:512].decode("utf-8", "replace")
        else:
            if isinstance(decoded, dict):
                reason = str(decoded.get("reason") or "")
                message = str(decoded.get("message") or "")
    return reason, message


def error_from_response(status: int, data: bytes | None) -> KubeApiError:
    """Map a non-2xx answer to an error, reading a `Status` body when there is one."""
    return error_from_status(status, *parse_status_body(data))


def transport_error(exc: BaseException) -> KubeUnavailableError:
    """The error for a request that got no HTTP answer (refused, reset, timed out, TLS)."""
    text = str(exc)
    err = KubeUnavailableError(0, type(exc).__name__, text)
    err.refused = "Connection refused" in text or "NewConnectionError" in text
    return err


class StatusError(KubeApiError):
    """A Status the informer stack builds itself: `code`, `reason` and `message` as sent."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        super().__init__(code, reason, message)
        self.reason = reason

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> StatusError:
        """Build from a `Status` object (e.g. the object of a watch ERROR event)."""
        code = status.get("code")
        return cls(
            code if isinstance(code, int) else 500,
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
        )


def status_error(code: int, data: bytes | None) -> StatusError:
    """A `StatusError` from an error answer's status and body (see `parse_status_body`)."""
    return StatusError(code, *parse_status_body(data))


class ConnectionFailedError(KubeUnavailableError):
    """`KubeUnavailableError` built from a message, as the informer stack's test doubles raise."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(0, "", message)
        self.refused = refused


class KubeConfigError(ControllerError):
    """The kubeconfig (or the in-cluster service account) could not be loaded."""
