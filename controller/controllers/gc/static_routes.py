"""Garbage collection of the pod src-ip host routes on the cluster router (kube-ovn v1.8.18
`gcStaticRoute`), two passes like the rest of gc (see collector.py's "Safety rules").

Contract:

* Only src-ip host routes of the cluster router are ever looked at.
* Orphan: a route whose address no IPAM key holds, or only pod keys whose pod is not in the
  cache (`present_keys`). A route is deleted only when it was an orphan in the previous pass
  too, and is re-checked just before (an address allocated meanwhile keeps its route).
* A pass is skipped while IPAM knows no subnet (every route would look stale).
* A failing delete is logged and retried next pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.controllers.gc.kept import OrphanMarks
from controller.core.address import host_prefix
from controller.core.constants import POLICY_SRC_IP
from controller.ipam import IPAM
from controller.ovn.api import NbClient, OvnError

LOG = logging.getLogger(__name__)

RESOURCE_STATIC_ROUTE = "static_route"


class StaticRouteSweeper:
    """One mark-and-sweep pass over the src-ip routes per `sweep()` call (not thread-safe: the
    `GarbageCollector`'s lock serialises it)."""

    def __init__(
        self,
        *,
        nb: NbClient,
        ipam: IPAM,
        router: str,
        present_keys: Callable[[], frozenset[str]],
        count: Callable[[str, int], None],
    ) -> None:
        """`present_keys`: the keys of every pod in the cache now, kept or not."""
        self._nb = nb
        self._ipam = ipam
        self._router = router
        self._present_keys = present_keys
        self._count = count
        self._marks = OrphanMarks()

    def marked(self) -> bool:
        """Did the last pass find an orphan (which the next pass may delete)?"""
        return self._marks.any()

    def sweep(self) -> list[str]:
        if not self._ipam.subnet_names():
            LOG.warning("skip static route gc: IPAM has no subnet (not rebuilt yet?)")
            return []
        routes = self._nb.list_static_routes(self._router)
        present = self._present_keys()
        stale: dict[str, int] = {}
        for route in routes:
            if route.policy != POLICY_SRC_IP:
                continue
            ip = host_prefix(route.ip_prefix)
            if ip is not None and self._route_unowned(ip, present):
                stale[ip] = stale.get(ip, 0) + 1
        due = self._marks.due(stale)
        deleted: list[str] = []
        for ip in due:
            if not self._route_unowned(ip, self._present_keys()):  # allocated meanwhile
                self._marks.unmark(ip)
                continue
            try:
                self._nb.delete_static_route(ip, self._router)
            except OvnError as exc:
                LOG.warning("gc static route %s failed, retrying next pass: %s", ip, exc)
                continue
            LOG.info("gc static route %s on %s", ip, self._router)
            deleted.append(ip)
            self._count(RESOURCE_STATIC_ROUTE, stale[ip])
        return deleted

    def _route_unowned(self, ip: str, present: frozenset[str]) -> bool:
        """No IPAM key holds `ip`, or only pod keys whose pod is gone.

        NOTE: a StatefulSet / VM address outlives its pod (IP CR and port kept for the pod to
        come back), but not its route: the delete handler removes the route of every pod it
        sees go, kept or not, so the route of such a pod deleted while no controller ran is
        stale as well. Keys without a '/' (node join addresses) are never judged by pods."""
        return all(pod_gone(owner, present) for owner in ip_owners(self._ipam, ip))


def ip_owners(ipam: IPAM, ip: str) -> set[str]:
    """The IPAM keys holding `ip`, over every subnet."""
    return {
        owner
        for subnet in ipam.subnet_names()
        if (owner := ipam.get_ip_owner(ip, subnet)) is not None
    }


def pod_gone(owner: str, present: frozenset[str]) -> bool:
    """`owner` is a pod key (node join keys have no '/') whose pod is not in the cache."""
    return "/" in owner and owner not in present
