"""What every pod handler shares: the controller's state, the pod's networks, the deleting map.

`PodControllerBase` holds the ports and caches a `PodController` is built with, and the helpers
the add / update / delete / security / inspection handlers (controller/pod/add.py, update.py,
delete.py, inspection.py) all call: `_pod_nets` (kube-ovn getPodKubeovnNets over the
`CacheView`), `_enqueue_vanished` (a handler found its pod gone), and the Warning Events. It does
no work by itself; controller/pod/controller.py assembles the handlers into `PodController`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller import pod_logic as pl
from controller.config import Config
from controller.core.constants import (
    EVENT_TYPE_WARNING,
    LOGICAL_SWITCH_ANNOTATION,
    REASON_VALIDATE_POD_NETWORK_FAILED,
)
from controller.core.errors import (
    ControllerError,
    MalformedObjectError,
    PermanentError,
    ResourceNotReadyError,
)
from controller.core.model import Namespace, Pod, PodNet, Subnet
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
class DeletingPod:
    """The last seen object of a pod whose delete is pending, and when it may run."""

    obj: KubeObject
    not_before: float | None = None  # on the controller's clock; None: at once


class PodControllerBase:
    """The state of a `PodController` and the helpers its handlers share."""

    _config: Config
    _view: CacheView
    _kube: KubeApi
    _nb: NbClient
    _ipam: IPAM
    _recorder: EventRecorder
    _key_mutex: KeyMutex
    queues: PodQueues
    _is_leader: Callable[[], bool]
    _metrics: ControllerMetrics | None
    _clock: Clock
    _wall_clock: WallClock
    _keep_vm_ip: bool
    _deleting_lock: threading.Lock
    _deleting: dict[str, DeletingPod]
    # pod key -> (net, subnet) a failed add allocated and kept for its retry (under the lock)
    _unfinished: dict[str, list[tuple[PodNet, str]]]
    _routing: RoutingReconciler
    _reroute_lock: threading.Lock
    _reroute: set[str]  # routed pods to route again (migration of v1.8 src-ip routes)
    # allocated pods whose networks cannot be resolved -> the resourceVersion warned about
    _inspect_warned: dict[str, str]

    def _reroute_requested(self, key: str) -> bool:
        raise NotImplementedError

    def _reroute_done(self, key: str) -> None:
        raise NotImplementedError

    def migrate_static_routes(self) -> int:
        raise NotImplementedError  # controller/pod/migration.py

    def _route_pod(self, pod: Pod, nets: list[PodNet]) -> None:
        raise NotImplementedError  # controller/pod/update.py

    def _unroute_address(self, pod: Pod, subnet: str, address: str) -> None:
        raise NotImplementedError  # controller/pod/delete.py

    def _pod_nets(
        self,
        raw: KubeObject,
        pod: Pod,
        *,
        record: bool = True,
        subnets: list[Subnet] | None = None,
        namespaces: dict[str, Namespace | None] | None = None,
    ) -> list[PodNet]:
        """kube-ovn getPodKubeovnNets over the caches; a failure with an Event reason is
        recorded on the pod (unless `record` is False). `subnets` may pass a pre-read list,
        `namespaces` a memo of parsed namespaces (filled here) for a pass over many pods."""
        try:
            self._check_named_subnet(pod)
            if namespaces is None:
                namespace = self._view.namespace(pod.namespace)
            elif pod.namespace in namespaces:
                namespace = namespaces[pod.namespace]
            else:
                namespace = namespaces[pod.namespace] = self._view.namespace(pod.namespace)
            return pl.get_pod_kubeovn_nets(
                pod,
                namespace,
                subnets if subnets is not None else self._view.subnets(),
                self._view.nads_of(pod),
            )
        except ControllerError as exc:
            if record:
                self._warn_with_reason(raw, exc)
            raise

    def _check_named_subnet(self, pod: Pod) -> None:
        """A subnet the pod's `logical_switch` names exists but is malformed (wrong types, or a
        spec the subnet controller refuses, so IPAM never registers it): say so, rather than
        "not found" / "not registered" (retryable: fixing the subnet heals the pod)."""
        name = pod.annotations.get(LOGICAL_SWITCH_ANNOTATION, "")
        parsed = self._view.parsed_subnet(name)
        if parsed is None:
            return
        error = parsed.parse_error or parsed.spec_error
        if error:
            raise ResourceNotReadyError(
                f"subnet {name} of pod {pod.key} is malformed: {error}",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )

    def _foreign_ip_cr(self, name: str, namespace: str, pod_name: str) -> bool:
        """Does the cached IP CR `name` record another owner than pod `namespace/pod_name` (a
        node's, or a pod whose name and namespace join to the same string)? Such a CR is
        neither written nor deleted for this pod (`pod_logic.owns_other`)."""
        owner = self._view.ip_cr_owner(name)
        return owner is not None and pl.owns_other(name, owner, (namespace, pod_name))

    def _enqueue_vanished(self, key: str, raw: KubeObject) -> None:
        """A handler found its pod gone: clean up, unless the informer already asked to.

        NOTE: kube-ovn `deletePodQueue.AddRateLimited(pod)`. The informer's own delete event
        carries the final object (with its deletionTimestamp, which the StatefulSet keep-IP rule
        reads), so it is never overwritten by the handler's older copy; the rate-limited add gives
        that event time to arrive.
        """
        with self._deleting_lock:
            self._deleting.setdefault(key, DeletingPod(raw))
        self.queues.delete.add_rate_limited(key)

    def _warn(self, raw: KubeObject, reason: str, exc: BaseException) -> None:
        # Every caller re-raises, and the worker logs the one line per attempt that names the
        # item and the error; the reason goes to the Event, so this line is only for debugging.
        LOG.debug("pod %s: %s: %s", describe(raw), reason, exc)
        if raw:
            self._recorder.event(raw, EVENT_TYPE_WARNING, reason, str(exc))

    def _warn_with_reason(self, raw: KubeObject, exc: ControllerError) -> None:
        if exc.reason:
            self._warn(raw, exc.reason, exc)


def guard(event: str, callback: Callable[..., None], *args: Any) -> None:
    """Informer callbacks must never raise into the informer: log a bug instead."""
    try:
        callback(*args)
    except Exception:
        LOG.exception("pod %s event handler failed", event)


def pod_or_none(obj: Any, parse: Callable[[Any], Pod] = Pod.from_dict) -> Pod | None:
    """The model of an informer object (`parse`: the view's `pod_model`, which parses each
    version once); None (logged) for anything that is not a valid pod."""
    try:
        return parse(obj)
    except MalformedObjectError as exc:
        LOG.error("ignoring malformed pod: %s", exc)
        return None


def to_pod(raw: KubeObject, parse: Callable[[Any], Pod] = Pod.from_dict) -> Pod:
    """The model of a cached pod; a malformed pod is permanent until the pod itself changes."""
    try:
        return parse(raw)
    except MalformedObjectError as exc:
        raise PermanentError(str(exc)) from None


def describe(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if isinstance(meta, Mapping):
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return "?"
