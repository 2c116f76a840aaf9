"""The Kubernetes API errors, re-exported from `controller.apiclient.errors` (their one home)."""

from controller.apiclient.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubeApiError,
    KubeConfigError,
    KubeUnavailableError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    UnauthorizedError,
    error_from_status,
)

__all__ = [
    "AlreadyExistsError",
    "BadRequestError",
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "KubeApiError",
    "KubeConfigError",
    "KubeUnavailableError",
    "NotFoundError",
    "ServerError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "error_from_status",
]
