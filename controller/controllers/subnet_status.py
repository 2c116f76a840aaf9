"""Subnet `status.conditions`, reconciled from the caches and the NB (kube-ovn v1.8.18 semantics).

Contract:

* `SubnetConditions.reconcile(subnet)` (the cached subnet, as the `CacheView` reads it)
  derives the subnet's health and merge-patches `status.conditions` (the whole list, as
  kube-ovn's `patchSubnetStatus` does, since a JSON merge patch replaces lists) only when the
  merged conditions differ from the cached ones; the merge and timestamp rules are
  `controller.core.subnet_conditions`'. Other status fields (the usage counters,
  `activateGateway`) are never touched here.
* Health, in order (kube-ovn v1.8.18 `pkg/controller/subnet.go` handleAddOrUpdateSubnet):
  a spec `formatSubnet` rejects is invalid (`ValidateLogicalSwitchFailed`, its message); a subnet
  of another provider is IPAM-only and gets no conditions (v1.8.18 returns before validating it,
  line 511); a subnet whose logical switch is not in the NB yet is retried (ResourceNotReadyError,
  the status queue's backoff) until the add handler has created it; a centralized,
  non-VLAN subnet other than the node switch whose `spec.gatewayNode` names no Ready node with a
  join address (`controller.core.gateway.active_gateway`) is `NoReadyGateway`; any other is in
  place.
* `subnet_event_handler(enqueue, is_leader)` queues a subnet's status on add and on every spec
  change.
* `node_event_handler(enqueue, is_leader)` re-queues the centralized subnets that list a node
  whenever that node appears, goes, or changes readiness or join address, so NoReadyGateway
  follows the nodes. Both run only while `is_leader()` (`LeaderGated`).
* The CNI daemon routes a subnet on the node's ovn0 only while Ready is True
  (v1.8.18 `pkg/daemon/controller.go` line 551); that is why a subnet in place must say so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.cache import Indexer
from controller.cache.keys import meta_str
from controller.core.constants import (
    GATEWAY_TYPE_CENTRALIZED,
    REASON_VALIDATE_LOGICAL_SWITCH_FAILED,
)
from controller.core.errors import MalformedObjectError, ResourceNotReadyError
from controller.core.gateway import active_gateway, gateway_node_names, join_ips
from controller.core.model import Node
from controller.core.subnet_conditions import SubnetHealth, timestamp, wanted_conditions
from controller.core.subnet_spec import format_subnet_spec
from controller.kube.api import KubeApi, KubeObject
from controller.ovn.api import NbClient
from controller.pod_logic import is_ovn_provider
from controller.queues.clock import WallClock, utcnow
from controller.runtime.leader_gated import LeaderGated
from controller.view import CachedObject, CacheView

LOG = logging.getLogger(__name__)


def _gateway_view(raw: KubeObject) -> tuple[bool, tuple[str, ...]] | None:
    """What a centralized subnet's health depends on in a node: readiness and join addresses."""
    try:
        node = Node.from_dict(raw)
    except MalformedObjectError:
        return None
    return (node.ready, tuple(join_ips(node)))


class SubnetConditions:
    def __init__(
        self,
        *,
        kube: KubeApi,
        nb: NbClient,
        node_switch: str,
        wall_clock: WallClock = utcnow,
        view: CacheView | None = None,
        **caches: Indexer | None,
    ) -> None:
        """The caches are read through `view`, or a view over `caches` (nodes=, subnets=)."""
        self._kube = kube
        self._nb = nb
        self._view = CacheView.given_or_over(view, kube, caches)
        self._node_switch = node_switch
        self._wall_clock = wall_clock

    def health(self, subnet: CachedObject) -> SubnetHealth | None:
        """The subnet's health, None when its conditions are not this controller's to write
        yet (an IPAM-only subnet, or a switch still being created)."""
        name = subnet.name
        try:
            spec = format_subnet_spec(name, subnet.spec)
        except MalformedObjectError as exc:
            return SubnetHealth.invalid(REASON_VALIDATE_LOGICAL_SWITCH_FAILED, exc.message)
        if not is_ovn_provider(str(spec["provider"])):
            return None
        if name not in self._nb.list_logical_switches():
            # the add handler creates it; retried (with backoff) until it is there
            raise ResourceNotReadyError(f"subnet {name}: logical switch not created yet")
        if (
            spec.get("gatewayType") == GATEWAY_TYPE_CENTRALIZED
            and not spec.get("vlan")
            and name != self._node_switch
        ):
            current = str(subnet.status.get("activateGateway") or "")
            listed = str(spec.get("gatewayNode") or "")
            nodes = {n.name: n for n in self._view.well_formed_nodes()}
            if active_gateway(listed, current, nodes) is None:
                return SubnetHealth.no_ready_gateway()
        return SubnetHealth.in_place(bool(spec.get("private")))

    def reconcile(self, subnet: CachedObject) -> bool:
        """Write the subnet's conditions if they changed; True when a write was made."""
        health = self.health(subnet)
        if health is None:
            return False
        current = subnet.status.get("conditions") or []
        wanted = wanted_conditions(current, health, timestamp(self._wall_clock()))
        if wanted == current:
            return False
        LOG.info("subnet %s: %s (%s)", subnet.name, health.state, health.reason)
        self._kube.update_subnet_status(subnet.name, {"conditions": wanted})
        return True

    # --- nodes: a gateway's readiness or join address decides NoReadyGateway ---------------------
    def subnets_listing(self, node_name: str) -> list[str]:
        """The centralized subnets whose `spec.gatewayNode` names the node."""
        return [
            s.name
            for s in self._view.subnet_objects()
            if s.name
            and s.spec.get("gatewayType") == GATEWAY_TYPE_CENTRALIZED
            and node_name in gateway_node_names(str(s.spec.get("gatewayNode") or ""))
        ]

    def subnet_event_handler(
        self, enqueue: Callable[[str], None], is_leader: Callable[[], bool]
    ) -> LeaderGated:
        """A Subnet added or its spec changed: its conditions are due, whether or not the add
        handler gets as far as queueing its status (a gateway that cannot be routed stops it)."""

        def added(obj: KubeObject, *_: object) -> None:
            name = meta_str(obj, "name")
            if name:
                enqueue(name)

        def updated(old: KubeObject, new: KubeObject) -> None:
            if old.get("spec") != new.get("spec"):
                added(new)

        return LeaderGated(is_leader, added=added, updated=updated)

    def node_event_handler(
        self, enqueue: Callable[[str], None], is_leader: Callable[[], bool]
    ) -> LeaderGated:
        """A node appeared, went, or changed what a gateway's health depends on: the
        centralized subnets that list it are due."""

        def touched(obj: KubeObject, *_: object) -> None:
            name = meta_str(obj, "name")
            for subnet in self.subnets_listing(name) if name else ():
                enqueue(subnet)

        def updated(old: KubeObject, new: KubeObject) -> None:
            if _gateway_view(old) != _gateway_view(new):
                touched(new)

        return LeaderGated(is_leader, added=touched, updated=updated, deleted=touched)
