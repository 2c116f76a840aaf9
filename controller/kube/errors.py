"""Typed errors at the Kubernetes API boundary.

Contract:

* Only the adapter (`controller.kube.client`) and the in-memory fake
  (`controller.testing.fake_kube`) raise these; nothing outside `controller.kube` ever sees
  `kubernetes.client.ApiException` or a urllib3 exception.
* `error_from_status(status, reason, message)` maps an HTTP status plus the Kubernetes `Status`
  reason onto one class, the way kuryr-kubernetes' `_raise_from_response` does. 409 is split by
  the Status reason: `AlreadyExists` (a create lost a race) versus `Conflict` (a stale
  resourceVersion).
* `retryable` tells the worker whether a requeue can help (conflicts, throttling, server-side and
  transport failures) or not (validation, authorisation).

`KubeApiError` derives from `Exception`, not from `controller.core.errors.ControllerError`. The
Status reason is kept as `status_reason` so it cannot be mistaken for ControllerError's Event
`reason`.
"""

from __future__ import annotations

from typing import ClassVar


class KubeApiError(Exception):
    """The API server refused a request, or could not be reached (status 0)."""

    retryable: ClassVar[bool] = False

    def __init__(self, status: int, status_reason: str = "", message: str = "") -> None:
        text = f"{status} {status_reason}".rstrip()
        # Base first: a future ControllerError base sets its own `message`, which ours overrides.
        super().__init__(f"{text}: {message}" if message else text)
        self.status = status
        # NOTE: not `reason`: in controller.core.errors that name means the Warning Event's reason.
        self.status_reason = status_reason
        self.message = message


class KubeUnavailableError(KubeApiError):
    """Transport failure (connection refused, timeout, TLS): no HTTP status was received."""

    retryable = True


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


class KubeConfigError(Exception):
    """The kubeconfig (or the in-cluster service account) could not be loaded."""
