"""Garbage collection of kubeovn.io IP CRs whose pod (or node) is gone and that no keep rule
covers, with their IPAM address (see collector.py's "What is kept" and "Safety rules").

A CR is deleted only when it was an orphan in the previous pass too, and is re-checked under
its pod's key lock just before; its address is released before the CR goes, so the subnet
status never counts a freed address as used (kube-ovn PR #2769).
"""

from __future__ import annotations

import logging

from controller.apiclient.errors import KubeApiError
from controller.cache.keys import raw_field
from controller.controllers.gc.kept import KeepRules, Kept, OrphanMarks, SweepActions
from controller.controllers.gc.ports import RESOURCE_IP
from controller.core.constants import NODE_PORT_PREFIX
from controller.core.naming import node_port_name
from controller.kube.api import KubeApi, KubeObject
from controller.view import CacheView

LOG = logging.getLogger(__name__)


def ip_cr_owner(raw: KubeObject) -> tuple[str, bool] | None:
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


class IpCrSweeper:
    """One mark-and-sweep pass over the cached IP CRs per `sweep()` call (not thread-safe: the
    `GarbageCollector`'s lock serialises it)."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        view: CacheView,
        rules: KeepRules,
        actions: SweepActions,
    ) -> None:
        self._kube = kube
        self._view = view
        self._rules = rules
        self._actions = actions
        self._marks = OrphanMarks()

    def marked(self) -> bool:
        """Did the last pass find an orphan (which the next pass may delete)?"""
        return self._marks.any()

    def sweep(self, crs: list[KubeObject], kept: Kept) -> list[str]:
        """Mark the orphans of `crs` (listed before `kept` was read), delete those marked in
        the previous pass too; returns the names deleted."""
        orphans: dict[str, tuple[str, bool]] = {}  # CR name -> (IPAM key, is a node's)
        for raw in crs:
            name = str(raw_field(raw, "metadata").get("name") or "")
            owner = ip_cr_owner(raw)
            if not name or owner is None:
                continue
            if not self._kept(name, *owner, kept):
                orphans[name] = owner
        due = self._marks.due(orphans)
        LOG.info("ip gc: %d CRs, %d orphans, %d due", len(crs), len(orphans), len(due))
        deleted: list[str] = []
        for name in due:
            try:
                gone = self._delete_orphan(name, *orphans[name], kept)
            except KubeApiError as exc:
                LOG.warning("gc ip %s failed, retrying next pass: %s", name, exc)
                continue
            if gone:
                deleted.append(name)
            else:
                self._marks.unmark(name)
        return deleted

    def _kept(self, name: str, key: str, is_node: bool, kept: Kept) -> bool:
        if name in kept.kept_names or key in kept.kept_names:
            return True
        if is_node:
            return False
        return key in kept.kept_keys or self._rules.absent_key_kept(key)

    def _delete_orphan(self, name: str, key: str, is_node: bool, kept: Kept) -> bool:
        with self._actions.locked("" if is_node else key):
            if is_node:
                if self._view.has_node(key[len(NODE_PORT_PREFIX) :]):
                    return False
            elif self._rules.key_kept_now(key):
                LOG.info("IP CR %s is in use again (%s); not deleting", name, key)
                return False
            LOG.info("gc IP CR %s (%s)", name, key)
            # NOTE: release before deleting the CR, so subnet status never counts a freed
            # address as used (kube-ovn PR #2769).
            self._actions.release(key, kept)
            if self._kube.delete_ip(name):
                self._actions.count(RESOURCE_IP, 1)
        return True
