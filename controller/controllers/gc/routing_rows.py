"""Garbage collection of the pod routing rows on the cluster router (router policies, address
sets and NAT rules of `controller.core.router_policy`): a backstop of the routing reconciler.

Contract:

* The rows belong to the routing reconciler (`controller.routing`), which every pod, node and
  subnet event keeps converged. A pass diffs every key with the reconciler's own desired-state
  functions, under the key's lock (`RoutingReconciler.backstop`), so nothing an add writes
  between a check and a delete is lost; rows of other owners are never looked at.
* What a pass has to remove is drift the events missed: it is applied, logged as a warning and
  counted in the gc metric (`router_policy` per policy, `address_set_entry` per entry,
  `address_set` per set removed, `static_route` per kube-ovn v1.8 static route a key
  migrates away: a node's dst-ip route, an address's src-ip route). What it has to write (a
  row missing or different) is counted in the added metric (`router_policy` per policy
  written, `address_set_entry` per entry added, `nat_rule` per NAT rule set), except in the
  start-up pass (`counting_adds` False), the reconciler's first full pass. In a healthy
  cluster a periodic pass finds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

# the label gc's own sweep of orphan src-ip routes counts under
from controller.controllers.gc.static_routes import RESOURCE_STATIC_ROUTE
from controller.ovn.api import RoutingChange
from controller.routing import describe

LOG = logging.getLogger(__name__)

RESOURCE_POLICY = "router_policy"
RESOURCE_SET_ENTRY = "address_set_entry"
RESOURCE_SET = "address_set"
RESOURCE_NAT = "nat_rule"


class RoutingSweeper:
    """One backstop pass per `sweep()` call (the `GarbageCollector`'s lock serialises it)."""

    def __init__(
        self,
        *,
        backstop: Callable[[], list[tuple[str, RoutingChange]]],
        count: Callable[[str, int], None],
        count_added: Callable[[str, int], None] | None = None,
    ) -> None:
        self._backstop = backstop
        self._count = count
        self._count_added = count_added
        self.counting_adds = True
        self.last: list[str] = []

    def marked(self) -> bool:
        """Never: a drift is repaired in the pass that finds it (under the key's lock)."""
        return False

    def sweep(self) -> list[str]:
        """Returns "<key>: <change>" for every key whose rows had to change (now repaired)."""
        found = self._backstop()
        policies = entries = sets = routes = 0
        for _, change in found:
            policies += len(change.delete_policies)
            entries += sum(len(s.remove) for s in change.sets if not s.delete)
            sets += sum(1 for s in change.sets if s.delete)
            routes += len(change.delete_src_routes) + len(change.delete_dst_routes)
        for resource, n in (
            (RESOURCE_POLICY, policies),
            (RESOURCE_SET_ENTRY, entries),
            (RESOURCE_SET, sets),
            (RESOURCE_STATIC_ROUTE, routes),
        ):
            if n:
                self._count(resource, n)
        if self._count_added is not None and self.counting_adds:
            added = (
                (RESOURCE_POLICY, sum(len(c.policies) for _, c in found)),
                (RESOURCE_SET_ENTRY, sum(len(s.add) for _, c in found for s in c.sets)),
                (RESOURCE_NAT, sum(1 for _, c in found for n in c.nats if n.external_ip)),
            )
            for resource, n in added:
                if n:
                    self._count_added(resource, n)
        self.last = [f"{key}: {describe(change)}" for key, change in found]
        LOG.info("routing gc: %d keys changed", len(found))
        return self.last
