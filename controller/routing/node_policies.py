"""Node policy keys `/<node>` of the routing reconciler, and the per-key locks every key kind
is applied under.

A node policy key owns the node's priority-30000 reroutes of its InternalIPs to its join
address, kube-ovn v1.9's form (v1.9.0 pkg/controller/node.go l.305-320 handleAddNode, l.400
handleDeleteNode; v1.8.18 routed to a node with a dst-ip static route instead, node.go
l.254-268): planned by `pod_logic.node_policies.desired_node_policies` from the cached nodes, diffed
against the marked rows that name the node and no subnet, applied in one NB transaction
together with the removal of the v1.8 static routes they replace
(`pod_logic.node_policies.v18_node_routes`). They belong to the built-in node
controller's part of the job: with `--enable-node-controller=false` whoever registers the nodes
writes them, and the key changes nothing.

A key's cost is its own node's: the owner of each of its InternalIPs is looked up in the node
cache (`RoutingInputs.internal_ip_owners`, fresh for every key). The full pass
(`ALL_NODE_POLICIES`, queued by the periodic resync, and gc's backstop) reads the router's
policies and static routes once and diffs every node against that read; a node whose rows
differ from it is diffed again against a fresh read before anything is written, so a write
never follows a stale read (a row another writer changed after the pass's read and that the
node still wants as it was is left to the next pass).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from controller.config import Config
from controller.core import router_policy as rp
from controller.ovn.api import NbClient, RouterPolicy, RoutingChange, StaticRoute
from controller.pod_logic import node_policies as node_rows
from controller.pod_logic import routing_state as rs
from controller.routing.changes import describe
from controller.routing.converging import on_its_own
from controller.routing.inputs import RoutingInputs

LOG = logging.getLogger(__name__)

# The key of the full pass over every node policy key (a node name is never empty).
ALL_NODE_POLICIES = rs.node_policy_key("")


class KeyLocks:
    """One lock per key (no striping: a subnet key's handler holds its node keys' locks too)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = defaultdict(threading.Lock)

    @contextmanager
    def locked(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks[key]
        with lock:
            yield


@dataclass(frozen=True)
class RouterRows:
    """One read of what a node policy key diffs against: the router's policies and routes."""

    policies: list[RouterPolicy]
    routes: list[StaticRoute]

    @classmethod
    def read(cls, nb: NbClient, router: str) -> RouterRows:
        return cls(nb.list_router_policies(router), nb.list_static_routes(router))


class NodePolicyKeys:
    """The node policy keys' diff and the nodes that have one (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        nb: NbClient,
        inputs: RoutingInputs,
        routing_config: Callable[[], rs.RoutingConfig],
        retry: Callable[[str], None] = lambda _key: None,
    ) -> None:
        """`retry(key)`: queue a key that failed in the full pass to be retried alone."""
        self._config = config
        self._nb = nb
        self._inputs = inputs
        self._routing_config = routing_config
        self._retry = retry

    def reconcile(self, name: str) -> RoutingChange:
        """Bring node `name`'s policies to their desired state against a fresh read; returns
        the change applied. The caller holds the key's lock."""
        if not self._config.enable_node_controller:
            return RoutingChange()
        return self._reconcile(name, self._routing_config(), None)

    def reconcile_all(
        self, locks: KeyLocks, skip: Collection[str] = ()
    ) -> list[tuple[str, RoutingChange]]:
        """The full pass: every node policy key but those in `skip`, each under its lock in
        `locks`, diffed against one shared read of the router (see the module docstring);
        returns each key that had to change, with the change applied. A key that fails is
        queued to be retried alone and the pass goes on (`converging.on_its_own`)."""
        if not self._config.enable_node_controller:
            return []
        cfg = self._routing_config()
        shared = RouterRows.read(self._nb, cfg.router)
        found: list[tuple[str, RoutingChange]] = []
        for name in self._names(shared.policies):
            key = rs.node_policy_key(name)
            if key in skip:
                continue
            with locks.locked(key):
                change = on_its_own(
                    key, self._retry, RoutingChange(), self._reconcile, name, cfg, shared
                )
            if not change.empty():
                found.append((key, change))
        return found

    def _reconcile(
        self, name: str, cfg: rs.RoutingConfig, shared: RouterRows | None
    ) -> RoutingChange:
        node = self._inputs.node(name)
        owners = self._inputs.internal_ip_owners(node) if node is not None else {}
        desired = node_rows.desired_node_policies(name, node, cfg, owners)
        if shared is not None and self._diff(name, desired, shared).empty():
            return RoutingChange()
        change = self._diff(name, desired, RouterRows.read(self._nb, cfg.router))
        if not change.empty():
            LOG.info("routing %s: %s", rs.node_policy_key(name), describe(change))
            self._nb.apply_routing(cfg.router, change)
        return change

    @staticmethod
    def _diff(name: str, desired: rs.Rows, rows: RouterRows) -> RoutingChange:
        actual = rs.actual_rows("", name, rows.policies, (), (), (), ())
        return node_rows.diff_node_policies(desired, actual, rows.routes)

    def _names(self, policies: list[RouterPolicy]) -> list[str]:
        """Every node that may have node policies: the cached ones and those `policies` name."""
        names = set(self._inputs.node_names())
        for p in policies:
            ids = p.external_ids
            if ids.get(rp.ROUTE_KIND_KEY) == rp.KIND_NODE and ids.get(rp.NODE_KEY):
                names.add(ids[rp.NODE_KEY])
        names.discard("")  # not a node: "/" is the pass's own key
        return sorted(names)
