"""The controller's error tree (pure): what a handler raises decides what the worker does.

Worker policy (mirrors kube-ovn `processNextWorkItem`, with kopf's permanent/temporary split):

* success -> `forget`;
* `PermanentError` -> log, Warning Event (`reason`), `forget`: retrying cannot help until the
  object itself changes;
* anything else (`RetryableError`, Kubernetes / IPAM / OVN errors, bugs) -> `add_rate_limited`;
  a `RetryableError` with `delay` asks for that delay instead of the limiter's.

NOTE: kube-ovn v1.8 retries *every* failure with backoff, including invalid pod annotations; we
stop retrying those (an edit of the pod's annotations produces an update event the handler can use
to re-enqueue).

`ControllerError` is the one root. Each package defines its own errors under it: the Kubernetes
API errors (`controller.apiclient.errors.KubeApiError`), the OVN errors
(`controller.ovn.api.OvnError`), the IPAM errors (`controller.ipam.errors.IPAMError`), the
informer stack's (`controller.cache.errors.CacheError`) and the Lease lock's
(`controller.runtime.leaderelection.LockError`).

Every error may carry an Event `reason` (kube-ovn's, see `constants.REASON_*`) so the handler can
emit the Warning Event kube-ovn emits without a second mapping table. The Kubernetes and OVN
errors leave it unset; an IPAM error's is kube-ovn's sentinel string ("AddressConflict", ...).
"""

from __future__ import annotations

from typing import ClassVar


class ControllerError(Exception):
    """Base of the errors this package raises on purpose."""

    #: Default Event reason for this class; an instance may override it.
    default_reason: ClassVar[str | None] = None

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason if reason is not None else self.default_reason


class ConfigError(ControllerError, ValueError):
    """The command line or environment is invalid; `main` prints it and exits with status 2."""


class MalformedObjectError(ControllerError, ValueError):
    """An API object (as cached by the informers) has a field of the wrong type or syntax."""


class RetryableError(ControllerError):
    """Try again later: requeue via `add_rate_limited`, or after `delay` seconds when set."""

    def __init__(
        self, message: str, *, delay: float | None = None, reason: str | None = None
    ) -> None:
        super().__init__(message, reason=reason)
        self.delay = delay


class ResourceNotReadyError(RetryableError):
    """Something the pod depends on does not exist yet (subnet, namespace annotation, NAD...)."""


class PermanentError(ControllerError):
    """Retrying cannot help until the object changes: emit a Warning Event and forget the key."""


class InvalidPodNetworkError(PermanentError):
    """The pod's network annotations are invalid (kube-ovn ValidatePodNetwork / ValidatePodCidr)."""

    default_reason = "ValidatePodNetworkFailed"
