"""The seam between the sandbox kubelet and whatever plays the CNI for a pod.

The sandbox kubelet (kubelet.py) decides *when* a pod is ready to be wired (its networks are
allocated, and routed for the default network, as kube-ovn's CNI daemon waits for) and what the
pod's status says afterwards; a `PodWiring` decides *how* the pod's interfaces come to exist.
`NoWiring` wires nothing (the API-only test bed); the OVN data plane (ovn/dataplane.py) puts each
pod in a network namespace plugged into br-int.

Both calls take the pod as the API server returned it (a JSON dict) and are idempotent: the
kubelet may call `wire` again for a pod it already wired (after a restart, or when annotations
change) and `unwire` for a pod that was never wired. `wire` returns only once the pod's ports are
usable (bound), or raises `WiringError` saying why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class WiringError(Exception):
    """A pod could not be wired (bad annotations, a port that never bound, a failed command)."""


class PodWiring(Protocol):
    def wire(self, pod: Mapping[str, Any]) -> None: ...

    def unwire(self, pod: Mapping[str, Any]) -> None: ...


class NoWiring:
    """Wires nothing: pods become Running as soon as the controller has allocated them."""

    def wire(self, pod: Mapping[str, Any]) -> None:
        return None

    def unwire(self, pod: Mapping[str, Any]) -> None:
        return None
