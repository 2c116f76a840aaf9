"""Garbage collection of the pod routing rows on the cluster router (router policies, address
sets and NAT rules of `controller.core.router_policy`): a backstop of the routing reconciler.

Contract:

* The rows belong to the routing reconciler (`controller.routing`), which every pod, node and
  subnet event keeps converged. A pass diffs every key with the reconciler's own desired-state
  functions, under the key's lock (`RoutingReconciler.backstop`), so nothing an add writes
  between a check and a delete is lost; rows of other owners are never looked at.
* What a pass has to change is drift the events missed: it is applied, logged as a warning and
  counted (gc metric `router_policy`, one per key changed). In a healthy cluster a pass finds
  nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

LOG = logging.getLogger(__name__)

RESOURCE_POLICY = "router_policy"
RESOURCE_SET_ENTRY = "address_set_entry"
RESOURCE_SET = "address_set"


class RoutingSweeper:
    """One backstop pass per `sweep()` call (the `GarbageCollector`'s lock serialises it)."""

    def __init__(
        self, *, backstop: Callable[[], list[str]], count: Callable[[str, int], None]
    ) -> None:
        self._backstop = backstop
        self._count = count
        self.last: list[str] = []

    def marked(self) -> bool:
        """Never: a drift is repaired in the pass that finds it (under the key's lock)."""
        return False

    def sweep(self) -> list[str]:
        """Returns a description of every key whose rows had drifted (and were repaired)."""
        self.last = self._backstop()
        if self.last:
            self._count(RESOURCE_POLICY, len(self.last))
        LOG.info("routing gc: %d keys had drifted", len(self.last))
        return self.last
