"""Garbage collection of the pod routing rows on the cluster router: router policies and
address-set entries (`controller.core.router_policy`), two passes like the rest of gc.

Contract:

* Only rows with the controller's `kube-ovn-route` mark are ever looked at; policies, sets and
  routes of other owners are never touched.
* Orphans: a routing-set entry whose address no IPAM key holds, or only the key of a pod that
  is gone (a kept StatefulSet / VM address keeps its IP CR and port, not its routing: the same
  rule as `gc_routes`), or whose holder is a pod scheduled on another node; a per-pod reroute
  policy (29250) whose address no IPAM key holds, or only keys of pods that are gone;
  a node's policies and sets once the node is gone; a subnet's policies and sets once the
  subnet is gone (not in the cache). A row is deleted only when it was an orphan in the
  previous pass too, and is re-checked just before (an address allocated meanwhile stays).
* Order: entries, then policies, then the sets no policy names any more, so a policy never
  names a set that is gone.
* A pass is skipped while IPAM knows no subnet (every address would look free).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from controller.controllers.gc_routes import ip_owners, pod_gone
from controller.core import router_policy as rp
from controller.ipam import IPAM
from controller.ovn.api import NbClient, OvnError
from controller.view import CacheView

LOG = logging.getLogger(__name__)

RESOURCE_POLICY = "router_policy"
RESOURCE_SET_ENTRY = "address_set_entry"
RESOURCE_SET = "address_set"


class RoutingSweeper:
    """One mark-and-sweep pass over the routing rows per `sweep()` call (not thread-safe: the
    `GarbageCollector`'s lock serialises it)."""

    def __init__(
        self,
        *,
        nb: NbClient,
        ipam: IPAM,
        view: CacheView,
        router: str,
        present_keys: Callable[[], frozenset[str]],
        count: Callable[[str, int], None],
    ) -> None:
        """`present_keys`: the keys of every pod in the cache now, kept or not."""
        self._nb = nb
        self._present_keys = present_keys
        self._ipam = ipam
        self._view = view
        self._router = router
        self._count = count
        self._last: set[tuple[Any, ...]] = set()

    def marked(self) -> bool:
        """Did the last pass find an orphan (which the next pass may delete)?"""
        return bool(self._last)

    def sweep(self) -> list[str]:
        """Returns a description of every row deleted."""
        if not self._ipam.subnet_names():
            LOG.warning("skip routing gc: IPAM has no subnet (not rebuilt yet?)")
            return []
        sets = self._nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY})
        policies = [
            p
            for p in self._nb.list_router_policies(self._router)
            if p.external_ids.get(rp.ROUTE_KIND_KEY)
        ]
        orphans: dict[tuple[Any, ...], Any] = {}
        present = self._present_keys()
        for aset in sets:
            if self._owner_gone(aset.external_ids):
                orphans[("set", aset.name)] = aset
            for ip in aset.addresses:
                if self._entry_orphan(ip, aset.external_ids, present):
                    orphans[("entry", aset.name, ip)] = aset
        for p in policies:
            if self._owner_gone(p.external_ids) or self._pod_policy_orphan(
                p.match, p.external_ids, present
            ):
                orphans[("policy", p.priority, p.match)] = p
        due = [k for k in orphans if k in self._last]
        self._last = set(orphans)
        deleted: list[str] = []
        for kind in ("entry", "policy", "set"):
            for key in sorted((k for k in due if k[0] == kind), key=str):
                try:
                    if self._delete(key, orphans[key]):
                        deleted.append(" ".join(map(str, key)))
                    else:
                        self._last.discard(key)
                except OvnError as exc:
                    LOG.warning("gc of %s failed, retrying next pass: %s", key, exc)
        LOG.info(
            "routing gc: %d sets, %d policies, %d orphans, %d deleted",
            len(sets),
            len(policies),
            len(orphans),
            len(deleted),
        )
        return deleted

    # -- what is an orphan ---------------------------------------------------------------------

    def _owner_gone(self, ids: Any) -> bool:
        node = ids.get(rp.NODE_KEY, "")
        if node and not self._view.has_node(node):
            return True
        subnet = ids.get(rp.SUBNET_KEY, "")
        return bool(subnet) and self._view.subnet(subnet) is None

    def _entry_orphan(self, ip: str, ids: Any, present: frozenset[str]) -> bool:
        subnet = ids.get(rp.SUBNET_KEY, "")
        owner = self._ipam.get_ip_owner(ip, subnet) if subnet else None
        if owner is None:
            return not self._ipam.contain_address(ip) or bool(subnet)
        if pod_gone(owner, present):
            return True
        raw = self._view.pod_raw(owner)
        node = ((raw or {}).get("spec") or {}).get("nodeName") or ""
        # NOTE: the address now belongs to a pod on another node: this entry would send its
        # traffic through the wrong node (the right set gets it from the pod's own update).
        return bool(node) and node != ids.get(rp.NODE_KEY, node)

    def _pod_policy_orphan(self, match: str, ids: Any, present: frozenset[str]) -> bool:
        if ids.get(rp.ROUTE_KIND_KEY) != rp.KIND_POD:
            return False
        ip = match.split("==", 1)[-1].strip()
        if not self._ipam.contain_address(ip):
            return True
        owners = ip_owners(self._ipam, ip)
        return bool(owners) and all(pod_gone(o, present) for o in owners)

    # -- deletion ------------------------------------------------------------------------------

    def _delete(self, key: tuple[Any, ...], row: Any) -> bool:
        kind = key[0]
        if kind == "entry":
            _, name, ip = key
            if not self._entry_orphan(ip, row.external_ids, self._present_keys()):
                return False
            LOG.info("gc address set %s entry %s", name, ip)
            self._nb.remove_address_set_addresses(name, [ip])
            self._count(RESOURCE_SET_ENTRY, 1)
            return True
        if kind == "policy":
            _, priority, match = key
            if not (
                self._owner_gone(row.external_ids)
                or self._pod_policy_orphan(match, row.external_ids, self._present_keys())
            ):
                return False
            LOG.info("gc router policy %s %r on %s", priority, match, self._router)
            self._nb.delete_router_policy(self._router, priority, match)
            self._count(RESOURCE_POLICY, 1)
            return True
        _, name = key
        if not self._owner_gone(row.external_ids):
            return False
        LOG.info("gc address set %s", name)
        self._nb.delete_address_set(name)
        self._count(RESOURCE_SET, 1)
        return True
