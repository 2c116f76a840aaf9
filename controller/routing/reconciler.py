"""The routing reconciler: the default VPC's router policies, address sets and NAT rules kept
equal to what the caches say they should be (`controller.pod_logic.routing_state`).

Contract:

* Keys (queue `UpdateRouting`): a subnet key `<subnet>`, a node key `<subnet>/<node>`, a
  node policy key `/<node>` (see `routing_state`) and `/`, every node policy key in one pass
  (`controller.routing.node_policies`). A key's handler reads the caches, computes
  its desired rows, reads its rows back from the NB (the controller's mark says which are its)
  and applies the difference in ONE NB transaction (`NbClient.apply_routing`), under the key's
  own lock.
* What enqueues what: the informer events (`controller.routing.events`) enqueue the keys they
  affect; a subnet key's handler enqueues the node keys of every cached node and of every node
  its rows in the NB name. `resync()` (every `--routing-resync-period`) enqueues `//`
  (`ALL_SUBNETS`: every subnet key, then every subnet node key, diffed against one read of
  the router) and `/` (the node policy keys of the cached nodes and of the nodes the NB's node
  policies name, likewise): the periodic proof of convergence; gc's `backstop()` (at the
  start, then every `--gc-interval`) diffs the same keys. A pass writes a key only from a fresh
  read of its rows.
* A subnet switched to distributed gets its node keys applied before its subnet-wide reroute
  (and kube-ovn v1.8's src-ip route of its blocks) goes; switched to centralized, the subnet-wide
  reroute is written first. Old rows are removed in the transaction that writes their
  replacement, so egress never lacks a reroute (renamed address sets included).
* A centralized subnet's `status.activateGateway` is written (merge patch of the status
  subresource) when the gateway the reconciler applied differs from it.
* Pod handlers call `route_pod` (the pod's own rows, written at once, so the add's patch can say
  `routed=true` from what was applied) and `release_pod` (its node key reconciled before its
  address is released); neither trusts the pod's `routed` annotation.
* `backstop()` is the garbage collector's pass: every key diffed under its lock with the same
  functions; anything it has to change is logged as drift and returned, except on a key an
  event queued during the pass (`controller.routing.converging`): that change raced the event.
* A malformed Subnet or Node in the cache is skipped (logged), never raised out of a pass.
* What a key is computed from (the caches, and pods routed before the cache shows their
  allocation) is read through `controller.routing.inputs.RoutingInputs`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable

from controller.config import Config
from controller.core import router_policy as rp
from controller.core.constants import (
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
)
from controller.core.errors import PermanentError
from controller.core.model import Pod, Subnet
from controller.kube.api import KubeApi
from controller.ovn.api import (
    AddressSetInfo,
    NatChange,
    NbClient,
    RouterPolicy,
    RoutingChange,
    SetChange,
)
from controller.pod_logic import routing_state as rs
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.queues.clock import WallClock, utcnow
from controller.routing import events
from controller.routing.changes import combined, describe, removes
from controller.routing.converging import Converging, on_its_own, wait_delivered
from controller.routing.inputs import RoutingInputs
from controller.routing.node_key_rows import NodeKeyRows, node_names_of
from controller.routing.node_policies import ALL_NODE_POLICIES, KeyLocks, NodePolicyKeys
from controller.routing.range_rows import range_rows
from controller.routing.release import released_rows
from controller.runtime.leader_gated import LeaderGated
from controller.runtime.worker import start_workers
from controller.view import CacheView

LOG = logging.getLogger(__name__)

# The key of the full pass over every subnet key and subnet node key (no Subnet or Node name
# holds the separator, so it is no subnet's, node's or node policy's key).
ALL_SUBNETS = rs.KEY_SEP * 2


class RoutingReconciler:
    """The routing reconciler (see the module docstring): informer handlers that queue keys,
    the key handler, the pod handlers' hooks and gc's backstop pass."""

    @classmethod
    def unshared(
        cls,
        *,
        config: Config,
        view: CacheView,
        kube: KubeApi,
        nb: NbClient,
        is_leader: Callable[[], bool],
        wall_clock: WallClock = utcnow,
    ) -> RoutingReconciler:
        """A reconciler with a queue nobody works off, for a pod controller or gc built alone
        (their tests): their own hooks (a pod's rows, the backstop pass) still go through it."""
        reconciler = cls(
            config=config,
            view=view,
            kube=kube,
            nb=nb,
            queue=RateLimitingQueue[str](default_controller_rate_limiter(), name="routing"),
            is_leader=is_leader,
            wall_clock=wall_clock,
        )
        # nobody works its queue off, so nothing it queues is converging
        reconciler._converging = Converging(tracking=False)
        return reconciler

    def __init__(
        self,
        *,
        config: Config,
        view: CacheView,
        kube: KubeApi,
        nb: NbClient,
        queue: RateLimitingQueue[str],
        is_leader: Callable[[], bool],
        wall_clock: WallClock = utcnow,
        events_delivered: Callable[[], bool] = lambda: True,
    ) -> None:
        """The pod informer should carry `controller.view.NODE_INDEX` and `IP_INDEX`; without
        them every pod is scanned per key. `events_delivered`: no notification of the informers
        it handles is still on its way to a handler (the backstop waits for it)."""
        self._config = config
        self._view = view
        self._kube = kube
        self._nb = nb
        self.queue = queue
        self._is_leader = is_leader
        self._wall_clock = wall_clock
        self._locks = KeyLocks()
        self._inputs = RoutingInputs(view)
        self._node_policies = NodePolicyKeys(config, nb, self._inputs, self._cfg, self.enqueue)
        self._converging = Converging()
        self.events_delivered = events_delivered

    # --- configuration ---------------------------------------------------------------------------

    def _cfg(self) -> rs.RoutingConfig:
        cfg = self._config
        return rs.RoutingConfig(
            router=cfg.cluster_router,
            node_switch=cfg.node_switch,
            enable_eip_snat=cfg.enable_eip_snat,
            keep_vm_ip=cfg.enable_keep_vm_ip,
            external_gw_config=self._view.external_gw_config() if cfg.enable_eip_snat else None,
        )

    # --- enqueueing ------------------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        if key and self._is_leader():
            self._converging.enqueued(key)
            self.queue.add(key)

    def queued(self, key: str) -> bool:
        """Is `key` waiting to be handled (or being handled, or retried after a failure)?"""
        return self._converging.has(key)

    def pod_event_handler(self) -> LeaderGated:
        return events.pod_event_handler(self.enqueue, self._is_leader)

    def node_event_handler(self) -> LeaderGated:
        return events.node_event_handler(self.enqueue, self._inputs.subnets, self._is_leader)

    def subnet_event_handler(self) -> LeaderGated:
        return events.subnet_event_handler(self.enqueue, self._is_leader)

    def configmap_event_handler(self) -> LeaderGated:
        """The external gateway ConfigMap feeds every EIP/SNAT pod's rows (when enabled)."""
        resync = self.resync if self._config.enable_eip_snat else _nothing
        return events.configmap_event_handler(resync, self._is_leader)

    def resync(self) -> None:
        """Enqueue the pass over every subnet key and subnet node key (`ALL_SUBNETS`) and the
        pass over every node policy key (`ALL_NODE_POLICIES`): the full pass."""
        if not self._is_leader():
            return
        self.enqueue(ALL_SUBNETS)
        self.enqueue(ALL_NODE_POLICIES)

    # --- handlers --------------------------------------------------------------------------------

    def handle(self, key: str) -> None:
        seen = self._converging.handling(key)
        try:
            self.reconcile(key)  # a retryable failure keeps the key queued: the worker retries
        except PermanentError:
            self._converging.settled(key, seen)  # dropped: the backstop watches it again
            raise
        self._converging.settled(key, seen)

    def reconcile(self, key: str) -> RoutingChange:
        """Bring one key's rows to their desired state; returns the change applied."""
        if key == ALL_NODE_POLICIES:
            return combined(c for _, c in self._node_policies.reconcile_all(self._locks))
        if key == ALL_SUBNETS:
            return combined(c for _, c in self._reconcile_all_subnets())
        subnet, node = rs.split_key(key)
        if not subnet:
            with self._locks.locked(key):
                return self._node_policies.reconcile(node)
        if node:
            with self._locks.locked(key):
                change, _ = self._reconcile_node(subnet, node)
            return change
        with self._locks.locked(key):
            return self._reconcile_subnet(subnet)

    def _reconcile_node(
        self,
        subnet_name: str,
        node_name: str,
        dry_run: bool = False,
        shared: NodeKeyRows | None = None,
    ) -> tuple[RoutingChange, rs.NodeDesired]:
        """Bring node key (subnet, node) to its desired rows. With `shared` (a full pass's one
        read of the router) the key is diffed against that read first and, only when its
        rows differ there, again against a fresh read, which alone is written from."""
        cfg = self._cfg()
        now = self._wall_clock()
        subnet, malformed = self._inputs.subnet(subnet_name)
        empty = rs.NodeDesired(rs.Rows(), frozenset(), frozenset())
        if malformed:
            return RoutingChange(), empty
        desired = rs.desired_node_rows(
            subnet,
            node_name,
            self._inputs.node(node_name),
            self._inputs.pods_on(subnet_name, node_name),
            cfg,
            now,
        )
        key = rs.node_key(subnet_name, node_name)
        claims = self._inputs.claims(cfg, now, exclude=key)
        if shared is not None:
            rows = shared.of(subnet_name, node_name, desired.ips)
            actual = rs.actual_rows(
                subnet_name,
                node_name,
                rows.policies,
                rows.sets,
                rows.nats,
                rows.routes,
                desired.ips,
            )
            if rs.diff_rows(desired.rows, actual, claims).empty():
                return RoutingChange(), desired
        router = cfg.router
        actual = rs.actual_rows(
            subnet_name,
            node_name,
            self._nb.list_router_policies(router),
            # only this key's sets: a read costs the node's pods, not the subnet's
            self._nb.list_address_sets(
                {
                    rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY,
                    rp.SUBNET_KEY: subnet_name,
                    rp.NODE_KEY: node_name,
                }
            ),
            self._nb.list_nat_rules(router) if desired.ips and cfg.enable_eip_snat else (),
            self._nb.list_static_routes(router) if desired.ips else (),
            desired.ips,
        )
        change = rs.diff_rows(desired.rows, actual, claims)
        if not change.empty() and not dry_run:
            LOG.info("routing %s: %s", key, describe(change))
            self._nb.apply_routing(router, change)
        return change, desired

    def _reconcile_subnet(
        self,
        name: str,
        dry_run: bool = False,
        queue_nodes: bool = True,
        shared: NodeKeyRows | None = None,
    ) -> RoutingChange:
        """Bring subnet key `name` to its desired rows; `shared`: as in `_reconcile_node`."""
        cfg = self._cfg()
        now = self._wall_clock()
        subnet, malformed = self._inputs.subnet(name)
        if malformed:
            return RoutingChange()
        nodes = self._inputs.nodes()
        desired = rs.desired_subnet_rows(subnet, nodes, cfg)
        router = cfg.router
        policies = shared.every_policy if shared else self._nb.list_router_policies(router)
        # NOTE: every set is a node key's (and named by its reroute policy); reading the
        # subnet's sets here would cost all its pods' entries on every pod delete.
        sets: list[AddressSetInfo] = []
        node_names = self._node_names_of(name, policies, sets)
        # only a routed subnet's addresses are looked at (a custom VPC may reuse its CIDR)
        routed = subnet is not None and rs.routed_subnet(subnet, cfg)
        cidr = subnet.cidr_block if subnet is not None and routed else ""
        blocks = [b.strip() for b in cidr.split(",") if b.strip()]
        nat = cfg.enable_eip_snat
        in_range = shared.in_range(blocks) if shared else range_rows(self._nb, router, blocks, nat)
        hosts = in_range.hosts
        addresses = {n.logical_ip for n in in_range.nats} | set(blocks) | hosts
        actual = rs.actual_rows(name, "", policies, sets, in_range.nats, in_range.routes, addresses)
        # v1.8 src-ip routes of addresses no live pod holds (a holder's node key moves its own)
        claims = self._inputs.claims(cfg, now)
        desired.rows.stale_routes.update(
            ip for ip in hosts if not any(rs.routable(p, now) for p in self._inputs.holders(ip))
        )
        if desired.centralized and not desired.gateway:
            # no usable gateway: keep the reroute there is rather than cut the subnet's egress
            for key, p in actual.policies.items():
                if key[0] == rp.GATEWAY_PRIORITY:
                    desired.rows.policies.setdefault(key, p)
        moving_to_nodes = subnet is not None and not desired.centralized
        if moving_to_nodes and (
            any(k[0] == rp.GATEWAY_PRIORITY for k in actual.policies)
            or actual.stale_routes & set(blocks)
        ):
            if shared is not None:  # switched to distributed: from a fresh read
                return self._reconcile_subnet(name, dry_run, queue_nodes)
            # the node keys' rows first, then the subnet-wide ones go
            for node in sorted(node_names):
                with self._locks.locked(rs.node_key(name, node)):
                    self._reconcile_node(name, node, dry_run)
            desired.rows.stale_routes.update(blocks)
        change = rs.diff_rows(desired.rows, actual, claims)
        if shared is not None and not change.empty():
            return self._reconcile_subnet(name, dry_run, queue_nodes)  # written from a fresh read
        if not change.empty() and not dry_run:
            LOG.info("routing %s: %s", name, describe(change))
            self._nb.apply_routing(router, change)
        if not dry_run:
            self._write_gateway(subnet, desired)
        if not dry_run and queue_nodes:
            for node in sorted(node_names):
                self.enqueue(rs.node_key(name, node))
        return change

    def _reconcile_all_subnets(self, skip: Collection[str] = ()) -> list[tuple[str, RoutingChange]]:
        """Every subnet key, then every subnet node key but those in `skip`, each under its
        lock; returns each key that had to change, with the change. The keys share one read of
        the router (`NodeKeyRows`, again for the node keys if a subnet key wrote); a write
        follows a fresh read only (a row changed after the shared read that still looks right
        in it is left to the next pass). The node keys are diffed here, not queued: a worker
        could repair their drift before gc's pass counts it."""
        found: list[tuple[str, RoutingChange]] = []
        cfg = self._cfg()
        shared = NodeKeyRows.read(self._nb, cfg.router, cfg.enable_eip_snat)
        names = sorted({s.name for s in self._inputs.subnets()} | shared.subnets())
        for name in names:
            if rs.subnet_key(name) in skip:
                continue
            with self._locks.locked(rs.subnet_key(name)):
                change = on_its_own(
                    name, self.enqueue, RoutingChange(), self._reconcile_subnet, name, False, False,
                    shared,
                )  # fmt: skip
            if not change.empty():
                found.append((name, change))
        if found:
            shared = NodeKeyRows.read(self._nb, cfg.router, cfg.enable_eip_snat)
        cached_nodes = set(self._inputs.nodes())
        for name in names:
            for node in sorted(cached_nodes | shared.nodes_of(name)):
                key = rs.node_key(name, node)
                if key in skip:
                    continue
                with self._locks.locked(key):
                    change, _ = on_its_own(
                        key, self.enqueue, (RoutingChange(), None), self._reconcile_node, name,
                        node, False, shared,
                    )  # fmt: skip
                if not change.empty():
                    found.append((key, change))
        return found

    def _node_names_of(
        self,
        subnet: str,
        policies: Iterable[RouterPolicy] | None = None,
        sets: Iterable[AddressSetInfo] | None = None,
    ) -> list[str]:
        """Every node the subnet may have rows for (`node_key_rows.node_names_of`)."""
        if policies is None:
            policies = self._nb.list_router_policies(self._config.cluster_router)
        if sets is None:
            sets = self._nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY})
        return node_names_of(subnet, self._inputs.nodes(), policies, sets)

    def _write_gateway(self, subnet: Subnet | None, desired: rs.SubnetDesired) -> None:
        if subnet is None or not desired.centralized or not desired.gateway:
            return
        if subnet.activate_gateway == desired.gateway:
            return
        LOG.info("subnet %s: active gateway %s", subnet.name, desired.gateway)
        self._kube.update_subnet_status(subnet.name, {"activateGateway": desired.gateway})

    # --- hooks of the pod handlers ---------------------------------------------------------------

    def route_pod(self, pod: Pod) -> bool:
        """Write `pod`'s own rows (its annotations carry its allocation) in one transaction;
        True when they are all in place (False: its node's join address or the external
        gateway is missing, the key is re-queued and routes it once they are there). Stale
        rows elsewhere are its keys' reconcile's work (enqueued here too)."""
        cfg = self._cfg()
        subnet, _ = self._inputs.subnet(rs.pod_subnet(pod))
        if subnet is None or not rs.routed_subnet(subnet, cfg):
            return True  # nothing to route on the cluster router
        if not rs.routable(pod, self._wall_clock()):
            return False
        rows = rs.pod_rows(pod, subnet, self._inputs.node(pod.node_name), cfg)
        ips = rs.pod_ips(pod)
        nats = list(rows.nats)
        if cfg.enable_eip_snat:
            wanted = {(n.type, n.logical_ip) for n in nats}
            for ip in ips:
                for kind in (NAT_TYPE_DNAT_AND_SNAT, NAT_TYPE_SNAT):
                    if (kind, ip) not in wanted:
                        nats.append(NatChange(kind, ip, ""))
        change = RoutingChange(
            policies=rows.policies,
            sets=tuple(SetChange(name, (ip,), external_ids=ids) for name, ip, ids in rows.members),
            nats=tuple(nats),
            delete_src_routes=ips if rows.complete else (),
        )
        key = rs.node_key(subnet.name, pod.node_name)
        with self._locks.locked(key):
            self._nb.apply_routing(cfg.router, change)
            self._inputs.routed(key, pod)
        if not rows.complete:
            self.enqueue(key)  # routed once what it waits for is there (a node event)
        return rows.complete

    def release_pod(self, pod: Pod, subnet: str, address: str) -> None:
        """`pod`'s `address` ("v4,v6") in `subnet` is going: its rows (set entry, own reroute,
        NAT, v1.8 src-ip route) are removed in one transaction now, before the address can be
        handed out again, except those another live pod still has, or that another subnet
        wrote (`controller.routing.release`); its keys are queued to settle the rest."""
        self._inputs.forget(pod.key)
        cfg = self._cfg()
        nodes = [pod.node_name] if pod.node_name else self._node_names_of(subnet)
        change = released_rows(self._inputs, cfg, self._wall_clock(), pod, subnet, address, nodes)
        lock = rs.node_key(subnet, pod.node_name) if pod.node_name else rs.subnet_key(subnet)
        with self._locks.locked(lock):
            self._nb.apply_routing(cfg.router, change)
        # NOTE: queued after the write: a key handled between the two would settle on the rows
        # before the release and then never look again (an emptied set left with its reroute).
        for node in nodes:
            self.enqueue(rs.node_key(subnet, node))
        self.enqueue(rs.subnet_key(subnet))

    # --- garbage collection backstop -------------------------------------------------------------

    def backstop(self) -> list[tuple[str, RoutingChange]]:
        """Diff every key that is not queued under its lock and apply what differs; returns
        each key that had to change, with the change (a drift the events should have
        prevented, or the first pass of a controller that just started)."""
        # NOTE: a key queued when the pass starts is converging (an event reached it and its
        # handler has not run yet): what differs there is the reconciler's to write, not
        # drift; so is a key an event queued during the pass (the cache had the change first).
        mark = self._converging.mark()
        converging = self._converging.keys()
        found = self._reconcile_all_subnets(skip=converging)
        found += self._node_policies.reconcile_all(self._locks, skip=converging)
        if found:
            wait_delivered(self.events_delivered)
        raced = self._converging.since(mark)
        for key, change in found:
            if key in raced:
                LOG.info("routing gc: %s changed as an event reached it: %s", key, describe(change))
            elif removes(change):
                LOG.warning("routing gc found drift: %s: %s", key, describe(change))
            else:
                LOG.info("routing gc wrote missing rows: %s: %s", key, describe(change))
        return [(key, change) for key, change in found if key not in raced]

    # --- workers ---------------------------------------------------------------------------------

    def run_workers(self, worker_num: int, stop: threading.Event) -> list[threading.Thread]:
        # NOTE: the periodic pass handles every key, nearly always finding nothing to do; a
        # key that changed something logs what it wrote ("routing <key>: ...") at INFO.
        threads = start_workers(
            [(self.queue, self.handle, worker_num)], stop, done_level=logging.DEBUG
        )

        def shut_down_on_stop() -> None:
            stop.wait()
            self.queue.shut_down()

        stopper = threading.Thread(target=shut_down_on_stop, name="routing-stopper", daemon=True)
        stopper.start()
        return [*threads, stopper]


def _nothing() -> None:
    """No resync: EIP/SNAT is off, the ConfigMap feeds nothing."""
