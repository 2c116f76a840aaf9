"""The ports every part of the pod controller works through, as one frozen value.

`PodContext` holds what the parts of controller/pod/ read and write through: the config, the
typed cache view, the Kubernetes and NB clients, IPAM, the Event recorder, the per-key lock,
the four queues, the routing reconciler, the clocks and the metrics. It is built once by
`PodController` and handed to each part; it holds no state of its own, so two parts given the
same context share nothing but the ports. The helpers here are the few every part needs over
those ports: Warning Events, the IP CR ownership check, the parsing of informer objects, and
the two routing hooks (`route`, `unroute`): routing rows are derived state the routing
reconciler owns, and the pod handlers only ask it for one pod at the moments kube-ovn routes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller import pod_logic as pl
from controller.config import Config
from controller.core.constants import EVENT_TYPE_WARNING
from controller.core.errors import (
    ControllerError,
    MalformedObjectError,
    PermanentError,
    ResourceNotReadyError,
)
from controller.core.model import Pod
from controller.ipam import IPAM
from controller.kube.api import EventRecorder, KubeApi, KubeObject
from controller.ovn.api import NbClient
from controller.queues import Clock, RateLimitingQueue
from controller.queues.clock import WallClock
from controller.routing import RoutingReconciler
from controller.runtime.keymutex import KeyMutex
from controller.runtime.metrics import ControllerMetrics
from controller.view import CacheView

# One logger for the whole pod controller, whichever module of it logs (operators filter on it).
LOG = logging.getLogger("controller.pod.controller")


@dataclass(frozen=True, slots=True)
class PodQueues:
    """The four pod queues; every item is a pod key "ns/name"."""

    add: RateLimitingQueue[str]
    update: RateLimitingQueue[str]
    delete: RateLimitingQueue[str]
    security: RateLimitingQueue[str]

    def all(self) -> tuple[RateLimitingQueue[str], ...]:
        return (self.add, self.update, self.delete, self.security)


@dataclass(frozen=True, slots=True)
class PodContext:
    """The pod controller's ports (see the module docstring)."""

    config: Config
    view: CacheView
    kube: KubeApi
    nb: NbClient
    ipam: IPAM
    recorder: EventRecorder
    key_mutex: KeyMutex
    queues: PodQueues
    routing: RoutingReconciler
    is_leader: Callable[[], bool]
    clock: Clock  # monotonic, shared with the queues (delete deadlines, handler durations)
    wall_clock: WallClock  # pod liveness (deletionTimestamp arithmetic)
    metrics: ControllerMetrics | None = None

    @property
    def keep_vm_ip(self) -> bool:
        return self.config.enable_keep_vm_ip

    def pod_of(self, raw: KubeObject) -> Pod:
        """The model of a cached pod (parsed once per version by the view); a malformed pod is
        permanent until the pod itself changes."""
        return to_pod(raw, self.view.pod_model)

    def on_cached_pod(self, key: str, handle: Callable[[str, KubeObject, Pod], None]) -> None:
        """Run `handle(key, raw, pod)` on the cached pod under the key's lock (so one pod's
        handlers never overlap); nothing when the pod is no longer cached."""
        with self.key_mutex.locked(key):
            raw = self.view.pod_raw(key)
            if raw is not None:
                handle(key, raw, self.pod_of(raw))

    def warn(self, raw: KubeObject, reason: str, exc: BaseException) -> None:
        """A Warning Event on the pod. Every caller re-raises, and the worker logs the one line
        per attempt that names the item and the error, so this line is only for debugging."""
        LOG.debug("pod %s: %s: %s", pod_label(raw), reason, exc)
        if raw:
            self.recorder.event(raw, EVENT_TYPE_WARNING, reason, str(exc))

    def warn_with_reason(self, raw: KubeObject, exc: ControllerError) -> None:
        """A Warning Event for an error that carries kube-ovn's reason (none otherwise)."""
        if exc.reason:
            self.warn(raw, exc.reason, exc)

    def route(self, pod: Pod) -> None:
        """The routing hook of the add and update: write `pod`'s own routing rows through the
        routing reconciler (its annotations carry the allocation). ResourceNotReadyError when
        they cannot all be written yet (its node's join address, the external gateway): the
        reconciler routes it once they can."""
        if not self.routing.route_pod(pod):
            raise ResourceNotReadyError(
                f"pod {pod.key}: routing waits for its node {pod.node_name!r} or the external"
                " gateway"
            )

    def unroute(self, pod: Pod, subnet: str, address: str) -> None:
        """The routing hook of the delete and the add's rollback: the pod's routing and NAT rows
        of its `address` in `subnet` go now (one transaction), unless a live pod still claims
        them; the reconciler settles its keys after."""
        if address.strip():
            self.routing.release_pod(pod, subnet, address)

    def foreign_ip_cr(self, name: str, namespace: str, pod_name: str) -> bool:
        """Does the cached IP CR `name` record another owner than pod `namespace/pod_name` (a
        node's, or a pod whose name and namespace join to the same string)? Such a CR is
        neither written nor deleted for this pod (`pod_logic.owns_other`)."""
        owner = self.view.ip_cr_owner(name)
        return owner is not None and pl.owns_other(name, owner, (namespace, pod_name))


def pod_or_none(obj: KubeObject, parse: Callable[[KubeObject], Pod] = Pod.from_dict) -> Pod | None:
    """The model of an informer object (`parse`: the view's `pod_model`, which parses each
    version once); None (logged) for anything that is not a valid pod."""
    try:
        return parse(obj)
    except MalformedObjectError as exc:
        LOG.error("ignoring malformed pod: %s", exc)
        return None


def to_pod(raw: KubeObject, parse: Callable[[KubeObject], Pod] = Pod.from_dict) -> Pod:
    """The model of a cached pod; a malformed pod is permanent until the pod itself changes."""
    try:
        return parse(raw)
    except MalformedObjectError as exc:
        raise PermanentError(str(exc)) from None


def pod_label(raw: Mapping[str, object]) -> str:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if isinstance(meta, Mapping):
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return "?"
