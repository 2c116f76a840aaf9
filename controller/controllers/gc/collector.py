"""Garbage collection of what pod networking leaves behind (kube-ovn v1.8.18 `gc.go`).

`GarbageCollector` removes three kinds of leftovers that a missed or failed delete leaves (pod
deleted while the controller was down, a delete handler that gave up, a crash between two writes):

* `mark_and_clean_lsp`: logical switch ports of the kinds this controller creates (vendor
  kube-ovn, `ovn.port_kinds.is_controller_port`: never router, localnet, transit or other
  components' ports) that no pod, node or VM accounts for, together with their IP CR, their
  IPAM address and the cluster router's static routes / NAT rules of their addresses
  (kube-ovn `markAndCleanLSP`);
* `gc_ip_crs`: kubeovn.io IP CRs whose pod (or node) is gone and no keep rule covers;
* `gc_static_routes`: src-ip host routes on the cluster router whose address no IPAM key holds
  (or only the key of a pod that is gone: a kept StatefulSet / VM address keeps no route)
  (kube-ovn `gcStaticRoute`; its dst-ip rule is deliberately not ported, see below)
  (`controller.controllers.gc.static_routes`);
* `gc_routing`: the backstop pass of the routing reconciler over the pod routing rows (router
  policies, address sets, NAT): every key diffed under its lock, drift repaired and counted
  (`controller.controllers.gc.routing_rows`).

What is kept (a "kept key" is the IPAM key `ns/<pod or VM name>`):

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
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from controller.apiclient.errors import KubeApiError
from controller.cache import Indexer
from controller.cache.keys import raw_field
from controller.config import Config
from controller.controllers.gc.routing_rows import RoutingSweeper
from controller.controllers.gc.security_groups import SecurityGroupGc
from controller.controllers.gc.static_routes import RESOURCE_STATIC_ROUTE, StaticRouteSweeper
from controller.core import annotations as ann
from controller.core import keep
from controller.core.address import host_prefix
from controller.core.constants import (
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    NODE_PORT_PREFIX,
    OVN_PROVIDER,
    VENDOR,
    annotation_key,
)
from controller.core.errors import MalformedObjectError
from controller.core.model import Pod
from controller.core.naming import node_port_name, pod_name_to_port_name
from controller.ipam import IPAM
from controller.kube.api import KubeApi
from controller.ovn import logic as ovn_logic
from controller.ovn.api import NbClient, OvnError, PortInfo
from controller.ovn.external_ids import POD_KEY
from controller.ovn.port_kinds import is_controller_port
from controller.pod_logic import get_name_by_pod, get_pod_key, is_ovn_provider, is_pod_alive
from controller.queues.clock import REAL_CLOCK, Clock, WallClock, utcnow
from controller.routing import RoutingReconciler
from controller.view import CacheView, OwnerLookup, ParseCache

LOG = logging.getLogger(__name__)


RESOURCE_LSP = "lsp"
RESOURCE_IP = "ip"
RESOURCE_NAT = "nat"


class GcMetrics(Protocol):
    """The part of `controller.runtime.metrics.ControllerMetrics` the collector reports to."""

    def gc_run(self) -> None: ...

    def gc_deleted_objects(self, resource: str, count: int = 1) -> None: ...


class KeyLock(Protocol):
    """`runtime.keymutex.KeyMutex`: serialises the sweep with the pod handlers per key."""

    def locked(self, key: str) -> AbstractContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What the caches account for, read once per pass."""

    kept_keys: frozenset[str]
    kept_names: frozenset[str]
    present_keys: frozenset[str]  # keys of every pod in the cache, kept or not
    expected_ports: dict[str, str] = field(default_factory=dict)  # OVN port -> pod key
    nodes: frozenset[str] = frozenset()


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
        self._kube = kube
        self._nb = nb
        self._ipam = ipam
        self._metrics = metrics
        self._clock: Clock = clock if clock is not None else REAL_CLOCK
        self._wall_clock = wall_clock
        self._key_mutex = key_mutex
        self._ready = ready
        self._router = config.cluster_router
        self._keep_vm_ip = config.enable_keep_vm_ip
        self._lock = threading.Lock()
        self._last_lsp_orphans: set[str] = set()
        self._last_ip_orphans: set[str] = set()
        # each pod parsed once per resourceVersion, only while the start-up passes run
        self._pod_memo: ParseCache[Pod] | None = None
        self._owners = OwnerLookup(self._view)
        self._routes = StaticRouteSweeper(
            nb=nb,
            ipam=ipam,
            router=self._router,
            present_keys=self._present_keys,
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
        self._routing = RoutingSweeper(backstop=self.routing.backstop, count=self._count)
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
        self._pod_memo = pods if pods is not None else ParseCache(Pod.from_dict, max_entries=None)
        try:
            self.run_once()
            # The second pass deletes only what the first one marked (nothing changes between
            # them): after a clean shutdown nothing is, and the pass would only read again.
            if self._marked():
                self.run_once()
            else:
                LOG.info("start-up garbage collection: no orphan found, one pass is enough")
        finally:
            self._pod_memo = None

    def _marked(self) -> bool:
        """Did the last pass mark anything, in any of the collectors?"""
        return bool(
            self._last_lsp_orphans
            or self._last_ip_orphans
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
                    ports = self._list_ports()
                except OvnError as exc:
                    LOG.warning("garbage collection cannot list logical switch ports: %s", exc)
                crs = self._view.ip_crs_raw()
                snap = self._snapshot()
                if ports is not None:
                    self._guarded("logical switch ports", self._sweep_lsps, ports, snap)
                self._guarded("IP CRs", self._sweep_ips, crs, snap)
                self._guarded("static routes", self._routes.sweep)
                if ports is not None and self._sg_gc is not None:
                    self._guarded("security groups", self._sg_gc.sweep, ports)
                self._guarded("router policies and address sets", self._routing.sweep)
        if self._metrics is not None:
            self._metrics.gc_run()
        LOG.info("take %d ms to collect garbage", round((self._clock.now() - start) * 1000))

    @staticmethod
    def _guarded(what: str, step: Callable[..., list[str]], *args: Any) -> None:
        try:
            step(*args)
        # NOTE: the loop must outlive NB / API outages; the next pass retries.
        except Exception:
            LOG.exception("garbage collection of %s failed", what)

    # -- logical switch ports ------------------------------------------------------------------

    def mark_and_clean_lsp(self) -> list[str]:
        """One mark-and-sweep pass over the kube-ovn LSPs; returns the names deleted."""
        with self._lock:
            if not self._is_ready():
                return []
            ports = self._list_ports()
            return self._sweep_lsps(ports, self._snapshot())

    def _list_ports(self) -> list[PortInfo]:
        # NOTE: kube-ovn v1.8 markAndCleanLSP judges every vendor=kube-ovn port of type "" it
        # does not recognise, which takes the localnet uplinks of underlay subnets (and would
        # take transit and other components' ports); only our own kinds are judged here.
        return [p for p in self._nb.list_ports(VENDOR) if is_controller_port(p)]

    def _sweep_lsps(self, ports: list[PortInfo], snap: _Snapshot) -> list[str]:
        names = {p.name for p in ports}
        orphans = {p.name: p for p in ports if not self._port_kept(p, snap)}
        for port_name, key in sorted(snap.expected_ports.items()):
            if port_name not in names:
                # NOTE: the inspection (PodController.inspect_pods) re-creates it.
                LOG.warning("lsp lost for pod %s (port %s)", key, port_name)
        due = [orphans[n] for n in sorted(orphans) if n in self._last_lsp_orphans]
        self._last_lsp_orphans = set(orphans)
        LOG.info("lsp gc: %d ports, %d orphans, %d due", len(ports), len(orphans), len(due))
        if not due:
            return []
        # address -> how many rows, read once per pass (a port's cleanup is then O(1))
        routes = Counter(
            ip
            for r in self._nb.list_static_routes(self._router)
            if (ip := host_prefix(r.ip_prefix)) is not None
        )
        nats = Counter(n.logical_ip for n in self._nb.list_nat_rules(self._router))
        deleted: list[str] = []
        for port in due:
            try:
                gone = self._delete_orphan_port(port, snap, routes, nats)
            except (OvnError, KubeApiError) as exc:
                LOG.warning("gc lsp %s failed, retrying next pass: %s", port.name, exc)
                continue
            if gone:
                deleted.append(port.name)
            else:
                self._last_lsp_orphans.discard(port.name)
        self._count(RESOURCE_LSP, len(deleted))
        return deleted

    def _port_kept(self, port: PortInfo, snap: _Snapshot) -> bool:
        if port.name in snap.kept_names:
            return True
        key = port.external_ids.get(POD_KEY, "")
        if not key:
            return False
        return key in snap.kept_keys or self._absent_key_kept(key)

    def _delete_orphan_port(
        self,
        port: PortInfo,
        snap: _Snapshot,
        routes: Counter[str],
        nats: Counter[str],
    ) -> bool:
        key = port.external_ids.get(POD_KEY, "")
        is_node_port = not key and port.name.startswith(NODE_PORT_PREFIX)
        with self._locked(key):
            if key and self._key_kept_now(key):
                LOG.info("lsp %s is in use again (%s); not deleting", port.name, key)
                return False
            if is_node_port and self._view.has_node(port.name[len(NODE_PORT_PREFIX) :]):
                return False
            LOG.info("gc logical switch port %s (pod %s)", port.name, key or "-")
            self._delete_routes_and_nat(ovn_logic.address_ips(port.addresses), key, routes, nats)
            self._nb.delete_port(port.name)
            self._release(key or (port.name if is_node_port else ""), snap)
            if self._kube.delete_ip(port.name):
                self._count(RESOURCE_IP, 1)
        return True

    def _delete_routes_and_nat(
        self, ips: set[str], key: str, routes: Counter[str], nats: Counter[str]
    ) -> None:
        for ip in sorted(ips):
            if self._held_by_other(ip, key):
                LOG.info("address %s now belongs to another pod; keeping its routes", ip)
                continue
            if routes[ip]:
                self._nb.delete_static_route(ip, self._router)
                self._count(RESOURCE_STATIC_ROUTE, routes.pop(ip))
            if nats[ip]:
                self._nb.delete_nat_rule(ip, self._router)
                self._count(RESOURCE_NAT, nats.pop(ip))

    # -- IP CRs --------------------------------------------------------------------------------

    def gc_ip_crs(self) -> list[str]:
        """One mark-and-sweep pass over the IP CRs in the cache; returns the names deleted."""
        with self._lock:
            if not self._is_ready():
                return []
            crs = self._view.ip_crs_raw()
            return self._sweep_ips(crs, self._snapshot())

    def _sweep_ips(self, crs: list[Any], snap: _Snapshot) -> list[str]:
        orphans: dict[str, tuple[str, bool]] = {}  # CR name -> (IPAM key, is a node's)
        for raw in crs:
            name = str(raw_field(raw, "metadata").get("name") or "")
            owner = self._ip_cr_owner(raw)
            if not name or owner is None:
                continue
            if not self._ip_cr_kept(name, *owner, snap):
                orphans[name] = owner
        due = sorted(n for n in orphans if n in self._last_ip_orphans)
        self._last_ip_orphans = set(orphans)
        LOG.info("ip gc: %d CRs, %d orphans, %d due", len(crs), len(orphans), len(due))
        deleted: list[str] = []
        for name in due:
            try:
                gone = self._delete_orphan_ip(name, *orphans[name], snap)
            except KubeApiError as exc:
                LOG.warning("gc ip %s failed, retrying next pass: %s", name, exc)
                continue
            if gone:
                deleted.append(name)
            else:
                self._last_ip_orphans.discard(name)
        return deleted

    @staticmethod
    def _ip_cr_owner(raw: Any) -> tuple[str, bool] | None:
        """(IPAM key, is a node's) of an IP CR; None when the CR names no owner."""
        spec = raw.get("spec") if isinstance(raw, dict) else None
        if not isinstance(spec, dict):
            return None
        pod_name = spec.get("podName")
        namespace = spec.get("namespace") or ""
        if not isinstance(pod_name, str) or not pod_name or not isinstance(namespace, str):
            return None
        if not namespace:  # kube-ovn: node IPs have no namespace
            return node_port_name(pod_name), True
        return f"{namespace}/{pod_name}", False

    def _ip_cr_kept(self, name: str, key: str, is_node: bool, snap: _Snapshot) -> bool:
        if name in snap.kept_names or key in snap.kept_names:
            return True
        if is_node:
            return False
        return key in snap.kept_keys or self._absent_key_kept(key)

    def _delete_orphan_ip(self, name: str, key: str, is_node: bool, snap: _Snapshot) -> bool:
        with self._locked("" if is_node else key):
            if is_node:
                if self._view.has_node(key[len(NODE_PORT_PREFIX) :]):
                    return False
            elif self._key_kept_now(key):
                LOG.info("IP CR %s is in use again (%s); not deleting", name, key)
                return False
            LOG.info("gc IP CR %s (%s)", name, key)
            # NOTE: release before deleting the CR, so subnet status never counts a freed
            # address as used (kube-ovn PR #2769).
            self._release(key, snap)
            if self._kube.delete_ip(name):
                self._count(RESOURCE_IP, 1)
        return True

    # -- static routes ---------------------------------------------------------------------------

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

    # -- what the caches account for -------------------------------------------------------------

    def _present_keys(self) -> frozenset[str]:
        """The keys of every cached pod, kept or not (a pod's own key, and its VM's key under
        --keep-vm-ip); the route and routing sweeps ask for it on every pass without judging
        each pod as `_snapshot` does."""
        present: set[str] = set()
        for raw in self._view.pods_raw():
            meta = raw_field(raw, "metadata")
            present.add(f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")
            if self._keep_vm_ip:  # a VM's pods hold their addresses under the VM's key
                with contextlib.suppress(MalformedObjectError):
                    present.add(get_pod_key(self._parse_pod(raw), True))
        return frozenset(present)

    def _snapshot(self) -> _Snapshot:
        now = self._wall_clock()
        kept_keys: set[str] = set()
        kept_names: set[str] = set()
        expected: dict[str, str] = {}
        for raw in self._view.pods_raw():
            try:
                pod = self._parse_pod(raw)
            except MalformedObjectError as exc:
                # Cannot judge it: keep everything under its name.
                meta = raw_field(raw, "metadata")
                key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
                LOG.warning("gc keeps the resources of malformed pod %s: %s", key, exc)
                kept_keys.add(key)
                continue
            key = get_pod_key(pod, self._keep_vm_ip)
            if pod.host_network or not self._pod_kept(pod, now):
                continue
            kept_keys.add(key)
            name = get_name_by_pod(pod, self._keep_vm_ip)
            for provider in ann.allocated_providers(pod.annotations):
                port = pod_name_to_port_name(name, pod.namespace, provider)
                kept_names.add(port)
                if self._is_ovn_provided(pod, provider) and self._switch_known(pod, provider):
                    expected[port] = key
        nodes = self._view.node_names()
        kept_names.update(node_port_name(n) for n in nodes if n)
        if self._keep_vm_ip:
            for vm in self._view.virtual_machines():
                if vm.deletion_timestamp is None:
                    kept_keys.add(f"{vm.namespace}/{vm.name}")
        # read after the pods above: a pod cached meanwhile only counts as present (kept)
        present = self._present_keys()
        return _Snapshot(frozenset(kept_keys), frozenset(kept_names), present, expected, nodes)

    def _parse_pod(self, raw: Any) -> Pod:
        memo = self._pod_memo
        return Pod.from_dict(raw) if memo is None else memo.get(raw)

    def _pod_kept(self, pod: Pod, now: datetime) -> bool:
        alive = is_pod_alive(pod, now)
        return self._owners.keeps(
            lambda owners: keep.pod_kept(
                pod, alive=alive, keep_vm_ip=self._keep_vm_ip, owners=owners
            )
        )

    def _absent_key_kept(self, key: str) -> bool:
        """Keep rules for a key no kept pod accounts for: its VM, or its StatefulSet ordinal."""
        namespace, _, name = key.partition("/")
        return self._owners.keeps(
            lambda owners: keep.name_kept(
                namespace, name, keep_vm_ip=self._keep_vm_ip, owners=owners
            )
        )

    def _key_kept_now(self, key: str) -> bool:
        """Re-check one key against the live caches (just before a deletion)."""
        raw = self._view.pod_raw(key)
        if raw is not None:
            try:
                pod = Pod.from_dict(raw)
            except MalformedObjectError:
                return True
            if self._pod_kept(pod, self._wall_clock()):
                return True
        return self._absent_key_kept(key)

    def _switch_known(self, pod: Pod, provider: str) -> bool:
        """The pod's annotated logical_switch is a subnet: only then can its port be lost (a
        port on a switch that does not exist was never made; the pod controller's inspection
        gives such a pod its Warning Event)."""
        switch = pod.annotations.get(
            annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""
        )
        try:
            return self._view.subnet(switch) is not None
        except MalformedObjectError:
            return True  # a malformed subnet is still a subnet: its ports may be lost

    def _is_ovn_provided(self, pod: Pod, provider: str) -> bool:
        """kube-ovn `isOVNProvided`: the provider's subnet belongs to OVN (has an LSP)."""
        if provider == OVN_PROVIDER:
            return True
        switch = pod.annotations.get(
            annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""
        )
        try:
            subnet = self._view.subnet(switch)
        except MalformedObjectError:
            return False
        return subnet is not None and is_ovn_provider(subnet.provider)

    # -- helpers -------------------------------------------------------------------------------

    def _release(self, key: str, snap: _Snapshot) -> None:
        if not key:
            return
        if key in snap.present_keys or self._view.pod_raw(key) is not None:
            LOG.info("not releasing addresses of %s: a pod with that key exists", key)
            return
        if self._ipam.get_pod_address(key):
            LOG.info("release addresses of %s", key)
            self._ipam.release_address_by_pod(key)

    def _held_by_other(self, ip: str, key: str) -> bool:
        for subnet in self._ipam.subnet_names():
            owner = self._ipam.get_ip_owner(ip, subnet)
            if owner is not None and owner != key:
                return True
        return False

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
