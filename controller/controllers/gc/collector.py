"""Garbage collection of what pod networking leaves behind (kube-ovn v1.8.18 `gc.go`).

`GarbageCollector` removes three kinds of leftovers that a missed or failed delete leaves (pod
deleted while the controller was down, a delete handler that gave up, a crash between two writes):

* `mark_and_clean_lsp`: logical switch ports of the kinds this controller creates (vendor
  kube-ovn, `ovn.port_kinds.is_controller_port`: never router, localnet, transit or other
  components' ports) that no pod, node or VM accounts for, together with their IP CR, their
  IPAM address and the cluster router's static routes / NAT rules of their addresses
  (kube-ovn `markAndCleanLSP`) (`controller.controllers.gc.ports`);
* `gc_ip_crs`: kubeovn.io IP CRs whose pod (or node) is gone and no keep rule covers
  (`controller.controllers.gc.ip_crs`);
* `gc_static_routes`: src-ip host routes on the cluster router whose address no IPAM key holds
  (or only the key of a pod that is gone: a kept StatefulSet / VM address keeps no route)
  (kube-ovn `gcStaticRoute`; its dst-ip rule is deliberately not ported, see below)
  (`controller.controllers.gc.static_routes`);
* `gc_routing`: the backstop pass of the routing reconciler over the pod routing rows (router
  policies, address sets, NAT): every key diffed under its lock, drift repaired and counted
  (`controller.controllers.gc.routing_rows`).

What is kept (a "kept key" is the IPAM key `ns/<pod or VM name>`; `controller.controllers.gc.kept`
reads it once per pass):

* every pod in the cache that is alive and not terminating, whatever its annotations say: its
  add may be in flight (LSP created, annotations not yet patched), so its ports and CRs are
  matched by external_ids `pod` / `spec.podName`, not only by its `allocated` annotations;
* a terminating or dead StatefulSet pod whose StatefulSet still wants its ordinal (exists, not
  deleting, ordinal < replicas), and, when the pod is absent from the cache, the same test on the
  name `<sts>-<ordinal>` (this keeps the LSP, the IP CR and the address together, so a re-created
  sts pod gets its IP back, kube-ovn #897 / PR #1038);
* under --keep-vm-ip, everything of a VirtualMachine that exists and is not being deleted;
* `node-<name>` ports and node IP CRs of nodes in the cache;
* `<pod>.<ns>[.<provider>]` names of every allocated provider of a kept pod.

Deviation (listed in docs/deviations.md): kube-ovn drops the ports of a StatefulSet pod with
ordinal >= replicas even while the pod still runs (scale-down in progress); we never touch an
alive, non-terminating pod.

Safety rules (the "older than" guard):

* Two passes: an object is deleted only when it was orphaned in the previous pass as well, so in
  periodic mode it has been orphaned for at least one --gc-interval. NB rows carry no creation
  time, so the age is measured from the first orphan sighting rather than from creation (neutron's
  maintenance task uses a creation-time guard; here the interval plays that role). A pass in
  which the object is kept resets its mark.
* NB is listed before the caches are read: a port in the listing was created before the cache
  read, and the controller creates a port only for a pod already in its cache, so a fresh pod's
  port is never judged against a cache that predates the pod.
* Just before deleting, each object is re-checked against the live caches, under the pod's key
  lock when a `key_mutex` (the pod handlers' `KeyMutex`) is given, so an add or delete handler for
  that key is never interleaved with the sweep. (The handlers lock `ns/<pod name>`; a VM port
  under --keep-vm-ip carries `ns/<vm name>`, so for those the re-check alone guards.)
* An IPAM key is released only if no pod with that key is in the cache (a dead pod's own delete
  handler owns its release, and a re-created pod keeps what it holds); routes and NAT of an
  address are removed only if no other IPAM key holds that address now (kube-ovn #4304: the
  address may already belong to a new pod).
* `ready()` (e.g. "all informers have synced") gates every pass; `gc_static_routes` also skips a
  pass while IPAM knows no subnet, since an empty IPAM would make every route look stale.

Ordering requirement: `run_startup_gc` must run AFTER the IPAM rebuild (InitIPAM) and after the
informer caches have synced, and BEFORE the pod workers start. It runs two passes back to back
(as kube-ovn's `gc()` does), so the two-pass guard collapses to "orphaned twice in a row"; that is
safe only because no handler is running yet. The second pass runs only when the first marked an
orphan (it could delete nothing else). Run before the rebuild, it would find every route
stale and release nothing that the rebuild then re-allocates.

Errors: a failing object is logged and stays marked so the next pass retries it; a failing step
(NB unreachable) is logged by `run_once`; `run()` never dies from one.

NOTE: kube-ovn's gcStaticRoute also deletes dst-ip routes whose nexthop is not in IPAM; the
pod controller never creates such routes and the rule would hit routes other components own
(e.g. join / gateway routes), so it is not ported.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from controller.cache import Indexer
from controller.config import Config
from controller.controllers.gc.ip_crs import IpCrSweeper
from controller.controllers.gc.kept import KeepRules, Kept, SweepActions
from controller.controllers.gc.ports import PortSweeper
from controller.controllers.gc.routing_rows import RoutingSweeper
from controller.controllers.gc.security_groups import SecurityGroupGc
from controller.controllers.gc.static_routes import StaticRouteSweeper
from controller.core.model import Pod
from controller.ipam import IPAM
from controller.kube.api import KubeApi
from controller.ovn.api import NbClient, OvnError, PortInfo
from controller.queues.clock import REAL_CLOCK, Clock, WallClock, utcnow
from controller.routing import RoutingReconciler
from controller.view import CacheView, ParseCache

LOG = logging.getLogger(__name__)


class GcMetrics(Protocol):
    """The part of `controller.runtime.metrics.ControllerMetrics` the collector reports to."""

    def gc_run(self) -> None: ...

    def gc_deleted_objects(self, resource: str, count: int = 1) -> None: ...

    def gc_added_objects(self, resource: str, count: int = 1) -> None: ...


class KeyLock(Protocol):
    """`runtime.keymutex.KeyMutex`: serialises the sweep with the pod handlers per key."""

    def locked(self, key: str) -> AbstractContextManager[None]: ...


class GarbageCollector:
    """Periodic orphan sweep of LSPs, IP CRs, src-ip routes and routing rows (see the module
    docstring).

    Guarantees: only vendor=kube-ovn, non-router ports and src-ip host routes of the cluster
    router are ever deleted; nothing is deleted on its first orphan sighting; every public method
    is serialised by one lock, so `run()` and a manual call never interleave.
    """

    def __init__(
        self,
        *,
        config: Config,
        kube: KubeApi,
        nb: NbClient,
        ipam: IPAM,
        metrics: GcMetrics | None = None,
        clock: Clock | None = None,
        wall_clock: WallClock = utcnow,
        key_mutex: KeyLock | None = None,
        ready: Callable[[], bool] | None = None,
        view: CacheView | None = None,
        routing: RoutingReconciler | None = None,
        **caches: Indexer | None,
    ) -> None:
        """The caches are read through `view` (shared with the pod controller, so each object
        is parsed once) or, without one, through a view over `caches`: the informer indexers
        by kind, as `CacheView` takes them (pods=, nodes=, ips=, subnets=; statefulsets=, vms=
        are optional: without them owners are GET through `kube`; without security_groups=,
        the rows of deleted security groups are not collected)."""
        self._config = config
        self._view = CacheView.given_or_over(view, kube, caches)
        self._ipam = ipam
        self._metrics = metrics
        self._clock: Clock = clock if clock is not None else REAL_CLOCK
        self._key_mutex = key_mutex
        self._ready = ready
        self._lock = threading.Lock()
        self._rules = KeepRules(
            self._view, keep_vm_ip=config.enable_keep_vm_ip, wall_clock=wall_clock
        )
        router = config.cluster_router
        actions = SweepActions(self._locked, self._release, self._count)
        self._ports = PortSweeper(
            nb=nb,
            kube=kube,
            ipam=ipam,
            view=self._view,
            rules=self._rules,
            router=router,
            actions=actions,
        )
        self._ips = IpCrSweeper(kube=kube, view=self._view, rules=self._rules, actions=actions)
        self._routes = StaticRouteSweeper(
            nb=nb,
            ipam=ipam,
            router=router,
            present_keys=self._rules.present_keys,
            count=self._count,
        )
        self.routing = (
            routing
            if routing is not None
            else RoutingReconciler.unshared(
                config=config,
                view=self._view,
                kube=kube,
                nb=nb,
                is_leader=lambda: True,
                wall_clock=wall_clock,
            )
        )
        self._routing = RoutingSweeper(
            backstop=self.routing.backstop, count=self._count, count_added=self._count_added
        )
        # rows of deleted SecurityGroups (gc/security_groups.py), when the SGs are cached
        self._sg_gc = None
        if self._view.security_groups_cached():
            self._sg_gc = SecurityGroupGc(nb, self._view.has_security_group, self._count)

    # -- entry points ------------------------------------------------------------------------

    def run_startup_gc(self, pods: ParseCache[Pod] | None = None) -> None:
        """kube-ovn's `gc()` at start: two full passes in a row (see "Ordering requirement"),
        the second one only when the first marked an orphan. `pods`: the start-up's parse
        cache of the pods (the IPAM rebuild just parsed every one of them)."""
        LOG.info("start garbage collection at startup")
        # NOTE: the two passes read the same pods (nothing has started to change them yet):
        # parse each one once. An updated pod has a new resourceVersion and is parsed again.
        memo = pods if pods is not None else ParseCache(Pod.from_dict, max_entries=None)
        self._rules.pod_memo = memo
        # the start-up pass is the reconciler's first full pass: rows it writes are not drift
        self._routing.counting_adds = False
        try:
            self.run_once()
            # The second pass deletes only what the first one marked (nothing changes between
            # them): after a clean shutdown nothing is, and the pass would only read again.
            if self._marked():
                self.run_once()
            else:
                LOG.info("start-up garbage collection: no orphan found, one pass is enough")
        finally:
            self._rules.pod_memo = None
            self._routing.counting_adds = True

    def _marked(self) -> bool:
        """Did the last pass mark anything, in any of the collectors?"""
        return bool(
            self._ports.marked()
            or self._ips.marked()
            or self._routes.marked()
            or self._routing.marked()
            or (self._sg_gc is not None and self._sg_gc.marked())
        )

    def run(self, stop: threading.Event, interval: float | None = None) -> None:
        """Run `run_once` every `interval` seconds (default --gc-interval) until `stop` is set.

        Waits on `stop` through the injected clock, so it returns promptly once `stop` is set;
        an interval <= 0 disables the loop.
        """
        period = self._config.gc_interval if interval is None else interval
        if period <= 0:
            LOG.info("periodic garbage collection disabled (interval %s)", period)
            return
        while not self._clock.sleep(period, stop):
            self.run_once()
        LOG.info("periodic garbage collection stopped")

    def run_once(self) -> None:
        """One pass of every collector; a failing step is logged and the others still run.

        The LSP and IP CR sweeps share one read of the caches (NB ports and IP CRs are listed
        first, see "Safety rules").
        """
        start = self._clock.now()
        with self._lock:
            if self._is_ready():
                ports: list[PortInfo] | None = None
                try:
                    ports = self._ports.list_ports()
                except OvnError as exc:
                    LOG.warning("garbage collection cannot list logical switch ports: %s", exc)
                crs = self._view.ip_crs_raw()
                kept = self._rules.snapshot()
                if ports is not None:
                    self._guarded("logical switch ports", lambda: self._ports.sweep(ports, kept))
                self._guarded("IP CRs", lambda: self._ips.sweep(crs, kept))
                self._guarded("static routes", self._routes.sweep)
                if ports is not None and self._sg_gc is not None:
                    sg_gc = self._sg_gc
                    self._guarded("security groups", lambda: sg_gc.sweep(ports))
                self._guarded("router policies and address sets", self._routing.sweep)
        if self._metrics is not None:
            self._metrics.gc_run()
        LOG.info("take %d ms to collect garbage", round((self._clock.now() - start) * 1000))

    @staticmethod
    def _guarded(what: str, step: Callable[[], object]) -> None:
        try:
            step()
        # NOTE: the loop must outlive NB / API outages; the next pass retries.
        except Exception:
            LOG.exception("garbage collection of %s failed", what)

    # -- one collector at a time ---------------------------------------------------------------

    def mark_and_clean_lsp(self) -> list[str]:
        """One mark-and-sweep pass over the kube-ovn LSPs; returns the names deleted."""
        with self._lock:
            if not self._is_ready():
                return []
            ports = self._ports.list_ports()
            return self._ports.sweep(ports, self._rules.snapshot())

    def gc_ip_crs(self) -> list[str]:
        """One mark-and-sweep pass over the IP CRs in the cache; returns the names deleted."""
        with self._lock:
            if not self._is_ready():
                return []
            crs = self._view.ip_crs_raw()
            return self._ips.sweep(crs, self._rules.snapshot())

    def gc_static_routes(self) -> list[str]:
        """Delete src-ip host routes of the cluster router whose address IPAM does not hold
        (after two consecutive sightings); returns the prefixes deleted."""
        with self._lock:
            if not self._is_ready():
                return []
            return self._routes.sweep()

    def gc_routing(self) -> list[str]:
        """One mark-and-sweep pass over the routing policies and address sets."""
        with self._lock:
            if not self._is_ready():
                return []
            return self._routing.sweep()

    # -- helpers of the sweeps -------------------------------------------------------------------

    def _release(self, key: str, kept: Kept) -> None:
        """Release the IPAM addresses of `key`, unless a pod with that key is cached (a dead
        pod's own delete handler owns its release; a re-created pod keeps what it holds)."""
        if not key:
            return
        if key in kept.present_keys or self._view.pod_raw(key) is not None:
            LOG.info("not releasing addresses of %s: a pod with that key exists", key)
            return
        if self._ipam.get_pod_address(key):
            LOG.info("release addresses of %s", key)
            self._ipam.release_address_by_pod(key)

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        if self._key_mutex is None or not key:
            yield
            return
        with self._key_mutex.locked(key):
            yield

    def _is_ready(self) -> bool:
        if self._ready is None or self._ready():
            return True
        LOG.info("skip garbage collection: caches not ready")
        return False

    def _count(self, resource: str, n: int) -> None:
        if self._metrics is not None and n > 0:
            self._metrics.gc_deleted_objects(resource, n)

    def _count_added(self, resource: str, n: int) -> None:
        if self._metrics is not None and n > 0:
            self._metrics.gc_added_objects(resource, n)
