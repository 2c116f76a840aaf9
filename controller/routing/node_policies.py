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
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from controller.config import Config
from controller.core import router_policy as rp
from controller.ovn.api import NbClient, RoutingChange
from controller.pod_logic import node_policies as node_rows
from controller.pod_logic import routing_state as rs
from controller.routing.changes import describe
from controller.routing.inputs import RoutingInputs

LOG = logging.getLogger(__name__)


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


class NodePolicyKeys:
    """The node policy keys' diff and the nodes that have one (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        nb: NbClient,
        inputs: RoutingInputs,
        routing_config: Callable[[], rs.RoutingConfig],
    ) -> None:
        self._config = config
        self._nb = nb
        self._inputs = inputs
        self._routing_config = routing_config

    def reconcile(self, name: str) -> RoutingChange:
        """Bring node `name`'s policies to their desired state; returns the change applied.
        The caller holds the key's lock."""
        if not self._config.enable_node_controller:
            return RoutingChange()
        cfg = self._routing_config()
        owners = node_rows.internal_ip_owners(self._inputs.nodes().values())
        desired = node_rows.desired_node_policies(name, self._inputs.node(name), cfg, owners)
        policies = self._nb.list_router_policies(cfg.router)
        actual = rs.actual_rows("", name, policies, (), (), (), ())
        routes = self._nb.list_static_routes(cfg.router)
        change = node_rows.diff_node_policies(desired, actual, routes)
        if not change.empty():
            LOG.info("routing %s: %s", rs.node_policy_key(name), describe(change))
            self._nb.apply_routing(cfg.router, change)
        return change

    def node_names(self) -> list[str]:
        """Every node that may have node policies: the cached ones and those the NB names."""
        if not self._config.enable_node_controller:
            return []
        names = set(self._inputs.nodes())
        for p in self._nb.list_router_policies(self._config.cluster_router):
            ids = p.external_ids
            if ids.get(rp.ROUTE_KIND_KEY) == rp.KIND_NODE and ids.get(rp.NODE_KEY):
                names.add(ids[rp.NODE_KEY])
        return sorted(names)
