"""Garbage collection of security-group NB rows whose SecurityGroup is gone.

`SecurityGroupGc.sweep(ports)` is one pass, called by `GarbageCollector.run_once` with the
kube-ovn ports it listed. A group name `<sg>` (from the port groups' and address sets'
external_ids `sg`, the deny-all group never) whose SecurityGroup is not in the cache is:

* not referenced by any port (no LSP has `associated_sg_<sg>=true`): an orphan group, deleted
  whole (port group, its ACLs, address sets) with `NbClient.delete_security_group`;
* still referenced by ports (their pods' `security_groups` annotation names it): the port group
  and address sets are the pod side's and stay (they carry the members, and a SecurityGroup
  created later under that name finds them), but ACLs on that port group are the rules of a
  group that no longer exists: they are removed (`apply_security_group(sg, [])`).

Same safety rules as the rest of the gc: NB is listed (by the caller, and here) before the
SecurityGroup cache is read, so a group created after the NB listing is in the cache; an action
is taken only when the same (group, action) was found in the previous pass as well; just before
acting, the cache is read again and the group is skipped if it exists now.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from controller.core.constants import DENY_ALL_SECURITY_GROUP
from controller.ovn import external_ids as ext
from controller.ovn.api import NbClient, OvnError, PortInfo

LOG = logging.getLogger(__name__)

RESOURCE_SG = "security_group"
RESOURCE_SG_ACLS = "security_group_acls"
ACTION_DELETE = "delete"
ACTION_CLEAR_ACLS = "clear-acls"


class SecurityGroupGc:
    def __init__(
        self,
        nb: NbClient,
        sg_exists: Callable[[str], bool],
        count: Callable[[str, int], None] | None = None,
    ) -> None:
        self._nb = nb
        self._exists = sg_exists
        self._count = count
        self._last: set[tuple[str, str]] = set()

    def marked(self) -> bool:
        """Did the last pass find an orphan (which the next pass may delete)?"""
        return bool(self._last)

    def orphans(self, ports: Sequence[PortInfo]) -> set[tuple[str, str]]:
        """(group, action) pairs due to this pass's rules (no two-pass guard)."""
        rows = self._nb.list_security_groups()
        referenced = {sg for p in ports for sg in ext.associated_sgs(dict(p.external_ids))}
        out: set[tuple[str, str]] = set()
        for r in rows:
            if r.sg == DENY_ALL_SECURITY_GROUP or self._exists(r.sg):
                continue
            if r.sg not in referenced:
                out.add((r.sg, ACTION_DELETE))
            elif r.acls:
                out.add((r.sg, ACTION_CLEAR_ACLS))
        return out

    def sweep(self, ports: Sequence[PortInfo]) -> list[str]:
        """One mark-and-sweep pass; returns "<action> <group>" for what it did."""
        found = self.orphans(ports)
        due = sorted(found & self._last)
        self._last = found
        LOG.info("security group gc: %d orphans, %d due", len(found), len(due))
        done: list[str] = []
        for sg, action in due:
            if self._exists(sg):
                self._last.discard((sg, action))
                continue
            try:
                if action == ACTION_DELETE:
                    LOG.info("gc security group %s: port group and address sets", sg)
                    self._nb.delete_security_group(sg)
                else:
                    LOG.info("gc security group %s: ACLs (its ports still name it)", sg)
                    self._nb.apply_security_group(sg, [])
            except OvnError as exc:
                LOG.warning("gc security group %s failed, retrying next pass: %s", sg, exc)
                continue
            done.append(f"{action} {sg}")
            if self._count is not None:
                self._count(RESOURCE_SG if action == ACTION_DELETE else RESOURCE_SG_ACLS, 1)
        return done
