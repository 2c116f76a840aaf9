"""The built-in minimal subnet controller (kube-ovn `subnet.go`, only what pods need).

Contract:

* Specs are normalised by `controller.core.subnet_spec.format_subnet_spec` (kube-ovn's
  `formatSubnet`).
* A Subnet whose spec cannot be formatted gets a Warning Event `ValidateLogicalSwitchFailed`
  (kube-ovn's reason) and the handler raises `PermanentError`: the worker forgets the key instead
  of retrying it with backoff forever, since only an edit of the spec can fix it (and that edit
  re-queues it like any spec change).
* A Subnet add, or an update that changed its spec or replaced it (another UID under the name:
  a relist's view of a delete and re-create), queues `AddSubnet`, which writes the formatted
  spec back when it differs, registers the subnet in IPAM (`add_or_update_subnet` with the
  formatted exclude list, so the gateway is never handed out even before the write lands),
  and, for an OVN subnet (provider `ovn` or `<nad>.<ns>.ovn`; an IPAM-only subnet stops after
  IPAM, as kube-ovn's), ensures its logical switch exists, attached to the VPC's router (the
  cluster router for the default VPC; its routing rows are the routing reconciler's,
  `controller.routing`, which follows the Subnet's own events). A custom VPC's router is the
  one its Vpc's `status.router` names; with no VPC controller here, that router is created on
  the spot (retried until the Vpc has a router). Idempotent. Once the subnet is registered (and its
  switch exists), `on_ready(name)` re-queues the pods waiting for it.
* A Subnet delete (queue `DeleteSubnet`, also for a subnet being deleted) forgets it in IPAM,
  deletes its logical switch and its metric series (the routing reconciler removes its rows).
* The status handler also reconciles `status.conditions` through `SubnetConditions`
  (controllers/subnet_status.py): queued after every add, also for a spec that fails validation.
* Status counts (`v4availableIPs`, `v4usingIPs`, `v6availableIPs`, `v6usingIPs`) come from IPAM
  usage, queue `UpdateSubnetStatus`. Every IP CR add/delete (kube-ovn `ip.go`) schedules the
  subnet's status `status_delay` seconds later; the delaying queue keeps one pending entry per
  subnet, so a burst of allocations becomes one status write (debounce). The status is written
  only when a count changed, and the `subnet_*_ip_count` gauges follow it.
* Informer callbacks are cheap and run only while this replica leads (`LeaderGated`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.cache import Indexer
from controller.cache.keys import object_name, raw_field, replaced
from controller.config import Config
from controller.controllers.subnet_status import SubnetConditions
from controller.core.address import check_protocol
from controller.core.constants import (
    DEFAULT_VPC,
    EVENT_TYPE_WARNING,
    KUBEOVN_API_VERSION,
    REASON_VALIDATE_LOGICAL_SWITCH_FAILED,
)
from controller.core.errors import MalformedObjectError, PermanentError, ResourceNotReadyError
from controller.core.subnet_spec import format_subnet_spec
from controller.ipam import IPAM, SubnetNotFoundError
from controller.kube.api import EventRecorder, KubeApi, KubeObject, ObjectRef
from controller.kube.cluster import ClusterApi
from controller.ovn.api import NbClient
from controller.pod_logic import is_ovn_provider
from controller.queues import RateLimitingQueue
from controller.runtime.leader_gated import LeaderGated
from controller.runtime.metrics import ControllerMetrics
from controller.runtime.worker import start_workers
from controller.view import CachedObject, CacheView

LOG = logging.getLogger(__name__)

USAGE_KEYS = ("v4availableIPs", "v4usingIPs", "v6availableIPs", "v6usingIPs")
DEFAULT_STATUS_DELAY = 0.5


def status_from_usage(
    v4_available: int, v4_used: int, v6_available: int, v6_used: int
) -> dict[str, int]:
    return {
        "v4availableIPs": v4_available,
        "v4usingIPs": v4_used,
        "v6availableIPs": v6_available,
        "v6usingIPs": v6_used,
    }


def status_differs(current: Mapping[str, Any] | None, wanted: Mapping[str, int]) -> bool:
    current = current or {}
    for key in USAGE_KEYS:
        try:
            have = float(current.get(key) or 0)
        except (TypeError, ValueError):
            return True
        if have != wanted[key] or key not in current:
            return True
    return False


@dataclass(frozen=True, slots=True)
class SubnetQueues:
    add: RateLimitingQueue[str]  # "AddSubnet"
    delete: RateLimitingQueue[str]  # "DeleteSubnet"
    status: RateLimitingQueue[str]  # "UpdateSubnetStatus"

    def all(self) -> tuple[RateLimitingQueue[str], ...]:
        return (self.add, self.delete, self.status)


class SubnetController:
    def __init__(
        self,
        *,
        config: Config,
        kube: KubeApi,
        cluster: ClusterApi,
        nb: NbClient,
        ipam: IPAM,
        recorder: EventRecorder,
        queues: SubnetQueues,
        is_leader: Callable[[], bool],
        metrics: ControllerMetrics | None = None,
        status_delay: float = DEFAULT_STATUS_DELAY,
        on_ready: Callable[[str], None] | None = None,
        conditions: SubnetConditions | None = None,
        view: CacheView | None = None,
        **caches: Indexer | None,
    ) -> None:
        """The caches are read through `view`, or a view over `caches` (subnets=, vpcs=)."""
        self._view = CacheView.given_or_over(view, kube, caches)
        self._conditions = conditions
        self._config = config
        self._kube = kube
        self._cluster = cluster
        self._nb = nb
        self._ipam = ipam
        self._recorder = recorder
        self.queues = queues
        self._is_leader = is_leader
        self._metrics = metrics
        self._status_delay = status_delay
        self._on_ready = on_ready

    # --- informer callbacks (subnets) ------------------------------------------------------------
    def event_handler(self) -> LeaderGated:
        return LeaderGated(
            self._is_leader, added=self._added, updated=self._updated, deleted=self._deleted
        )

    def _added(self, obj: KubeObject, is_in_initial_list: bool) -> None:
        name = object_name(obj)
        if name:
            self.queues.add.add(name)

    def _updated(self, old: KubeObject, new: KubeObject) -> None:
        name = object_name(new)
        if not name:
            return
        if raw_field(new, "metadata").get("deletionTimestamp"):
            self.queues.delete.add(name)
        elif old.get("spec") != new.get("spec") or replaced(old, new):
            self.queues.add.add(name)

    def _deleted(self, obj: KubeObject) -> None:
        name = object_name(obj)
        if name:
            self.queues.delete.add(name)

    # --- IP CR callbacks (kube-ovn ip.go: keep subnet status fresh) ------------------------------
    def ip_event_handler(self) -> LeaderGated:
        def changed(obj: KubeObject, *_: object) -> None:
            spec = raw_field(obj, "spec")
            names = [spec.get("subnet") or "", *(spec.get("attachSubnets") or [])]
            for name in names:
                if isinstance(name, str) and name:
                    self.queues.status.add_after(name, self._status_delay)

        def updated(old: KubeObject, new: KubeObject) -> None:
            if raw_field(old, "spec").get("subnet") != raw_field(new, "spec").get("subnet"):
                changed(old)
                changed(new)

        return LeaderGated(self._is_leader, added=changed, updated=updated, deleted=changed)

    def enqueue_status(self, name: str) -> None:
        if self._is_leader():
            self.queues.status.add_after(name, self._status_delay)

    def resync_status(self) -> None:
        """Recompute every subnet's status (kube-ovn resyncSubnetMetrics)."""
        for name in self._ipam.subnet_names():
            self.enqueue_status(name)

    # --- handlers --------------------------------------------------------------------------------
    def handle_add_subnet(self, name: str) -> None:
        cached = self._view.subnet_object(name)
        if cached is None:
            return
        if cached.deleting:
            self.handle_delete_subnet(name)
            return
        try:
            spec = format_subnet_spec(name, cached.spec)
        except MalformedObjectError as exc:
            ref = ObjectRef.from_object(
                cached.obj, default_kind="Subnet", default_api_version=KUBEOVN_API_VERSION
            )
            reason = REASON_VALIDATE_LOGICAL_SWITCH_FAILED
            self._recorder.event(ref, EVENT_TYPE_WARNING, reason, exc.message)
            self.queues.status.add(name)  # Error + NotValidated + NotReady
            raise PermanentError(exc.message, reason=reason) from exc
        if spec != cached.spec:
            LOG.info("format subnet %s spec", name)
            self._cluster.replace_subnet({**cached.obj, "spec": spec})
        stale = self._ipam.add_or_update_subnet(name, spec["cidrBlock"], spec["excludeIps"])
        for item in stale:
            LOG.warning(
                "subnet %s: %s no longer holds %s (%s)", name, item.pod_key, item.ip, item.reason
            )
        if not is_ovn_provider(spec["provider"]):
            # kube-ovn isOvnSubnet: an IPAM-only subnet (macvlan & co.) has addresses, no switch
            self.queues.status.add(name)
            self._ready(name)
            return
        router = self._router_of(name, spec)
        if router and router != self._config.cluster_router:
            # NOTE: there is no VPC controller here; a custom Vpc's status.router names the
            # router its subnets hang off, so it is created with the first such subnet.
            self._nb.ensure_logical_router(router)
        self._nb.ensure_logical_switch(
            name,
            router,
            spec["cidrBlock"],
            spec["gateway"],
            {"vpc": spec["vpc"]},
        )
        self.queues.status.add(name)
        self._ready(name)

    def _ready(self, name: str) -> None:
        if self._on_ready is not None:
            try:
                self._on_ready(name)
            except Exception:
                LOG.exception("re-queueing the pods of subnet %s failed", name)

    def _router_of(self, name: str, spec: Mapping[str, Any]) -> str:
        if spec.get("vlan") and not spec.get("logicalGateway"):
            return ""  # an underlay subnet is routed by the physical network
        vpc = spec.get("vpc") or DEFAULT_VPC
        if vpc == DEFAULT_VPC:
            return self._config.cluster_router
        cached = self._view.vpc(str(vpc))
        router = cached.router if cached is not None else ""
        if not router:
            raise ResourceNotReadyError(f"subnet {name}: router of vpc {vpc} not ready")
        return router

    def handle_delete_subnet(self, name: str) -> None:
        cached = self._view.subnet_object(name)
        if cached is not None and not cached.deleting:
            return  # re-created meanwhile: the add queue owns it
        self._ipam.delete_subnet(name)
        self._nb.delete_logical_switch(name)
        if self._metrics is not None:
            self._metrics.remove_subnet(name)
        LOG.info("deleted subnet %s", name)

    def handle_update_subnet_status(self, name: str) -> None:
        cached = self._view.subnet_object(name)
        if cached is None:
            return
        try:
            self._update_usage(name, cached)
        finally:
            if self._conditions is not None:
                self._conditions.reconcile(cached)  # may wait (retry) for the switch

    def _update_usage(self, name: str, cached: CachedObject) -> None:
        try:
            usage = self._ipam.subnet_usage(name)
        except SubnetNotFoundError:
            return  # not registered yet: the add handler enqueues the status when it is
        wanted = status_from_usage(
            usage.v4_available, usage.v4_used, usage.v6_available, usage.v6_used
        )
        spec = cached.spec
        if status_differs(cached.status, wanted):
            spec = raw_field(self._kube.update_subnet_status(name, wanted), "spec")
        if self._metrics is not None:
            protocol = spec.get("protocol") or check_protocol(spec.get("cidrBlock") or "")
            self._metrics.set_subnet_ip_counts(
                name,
                str(protocol),
                str(spec.get("cidrBlock") or ""),
                v4_available=usage.v4_available,
                v6_available=usage.v6_available,
                v4_used=usage.v4_used,
                v6_used=usage.v6_used,
            )

    # --- workers ---------------------------------------------------------------------------------
    def run_workers(self, worker_num: int, stop: threading.Event) -> list[threading.Thread]:
        return start_workers(
            [
                (self.queues.add, self.handle_add_subnet, 1),
                (self.queues.delete, self.handle_delete_subnet, 1),
                (self.queues.status, self.handle_update_subnet_status, worker_num),
            ],
            stop,
        )
