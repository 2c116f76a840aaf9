"""The SecurityGroup controller (kube-ovn v1.8.18 `pkg/controller/security_group.go`, CR side).

The pod side (a pod's `security_groups` annotation puts its port into `ovn.sg.<name>` and the
deny-all group) lives in the pod controller; this controller turns each
`security-groups.kubeovn.io` object into the rows that give that membership a meaning.

Contract:

* Informer callbacks (cheap, nothing when not the leader): an add, or an update that changes the
  spec or replaces the group (another UID under the name, as a relist shows a delete and
  re-create; the successor's status is empty), queues the name on `UpdateSg`; a delete queues
  it on `DeleteSg`. Any add or delete also re-queues the groups whose rules name that group as
  `remoteSecurityGroup`, so a rule waiting for its remote group heals when it appears, and
  loses its ACL when it goes.
* `handle_add_or_update(name)`: translates the spec (`controller.core.security_group`), then in
  one NB transaction writes the group's port group, its v4/v6 address sets (and the remote
  groups' ones, empty until their own members fill them) and exactly the ACLs of its valid
  rules (`NbClient.apply_security_group`); then syncs its members and address sets from the
  ports associated with it (`sync_sg_ports`, also what the pod side calls). The status is
  merge-patched through the status subresource when it changed: kube-ovn's portGroup,
  allowSameGroupTraffic, ingress/egressMd5, ingress/egressLastSyncSuccess, plus a `Ready`
  condition whose message names every rejected rule.
* A rule that cannot be applied (unknown protocol or policy, malformed address or CIDR, wrong
  family, out-of-range priority or ports, a remote group that does not exist) is left out, as is
  a rule list that is not a list; the group's other rules are applied (an unreadable spec
  applies none: the group keeps its port group, with no ACL), `<direction>LastSyncSuccess` is
  false, and a Warning Event `ValidateSecurityGroupFailed` on the SecurityGroup names each bad
  rule. Such a key is not
  retried: only an edit (or the remote group appearing) can fix it, and both re-queue it.
* An NB or API failure raises: the worker retries with backoff. Before raising on NB, the status
  says both directions failed to sync (as kube-ovn's patchSgStatus on error).
* `handle_delete(name)`: if the group is gone from the cache, deletes its port group (its ACLs
  go with it, and its ports are out of it) and its address sets in one transaction. The ports
  keep their own record of the group (`associated_sg_<name>`), so a group re-created under the
  same name gets its members back.

Deliberate differences from kube-ovn v1.8.18: it records no Events and validates all-or-nothing
(one bad rule and the whole group is retried forever with nothing applied); the md5 fields hash
the rules' JSON, not Go's structhash; and see `controller.core.security_group`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.cache import Indexer
from controller.cache.keys import object_name, replaced
from controller.core.constants import DENY_ALL_SECURITY_GROUP, EVENT_TYPE_WARNING
from controller.core.security_group import (
    RULE_FIELDS,
    SgPlan,
    check_sg_name,
    errors_message,
    plan_security_group,
    plan_status,
)
from controller.kube.api import EventRecorder, KubeObject, ObjectRef
from controller.ovn.api import NbClient, OvnError
from controller.queues import RateLimitingQueue
from controller.queues.clock import WallClock, utcnow
from controller.runtime.keymutex import KeyMutex
from controller.runtime.leader_gated import LeaderGated
from controller.runtime.worker import start_workers
from controller.view import CacheView

LOG = logging.getLogger(__name__)

RESOURCE_SECURITY_GROUPS = "security-groups"
KIND_SECURITY_GROUP = "SecurityGroup"
SECURITY_GROUP_API_VERSION = "kubeovn.io/v1"
#: kube-ovn's queue names (the `name` label of the workqueue_* metrics).
QUEUE_UPDATE_SG = "UpdateSg"
QUEUE_DELETE_SG = "DeleteSg"
#: Warning Event reasons on a SecurityGroup (kube-ovn v1.8 records none for groups).
REASON_VALIDATE_SG_FAILED = "ValidateSecurityGroupFailed"
CONDITION_READY = "Ready"
STATUS_KEYS = (
    "portGroup",
    "allowSameGroupTraffic",
    "ingressMd5",
    "egressMd5",
    "ingressLastSyncSuccess",
    "egressLastSyncSuccess",
)


class SgStatusWriter(Protocol):
    """`KubeClient.update_security_group_status`: a merge patch of the status subresource."""

    def update_security_group_status(
        self, name: str, status_patch: Mapping[str, Any]
    ) -> KubeObject: ...


@dataclass(frozen=True, slots=True)
class SecurityGroupQueues:
    update: RateLimitingQueue[str]  # "UpdateSg" (kube-ovn addOrUpdateSgQueue)
    delete: RateLimitingQueue[str]  # "DeleteSg"

    def all(self) -> tuple[RateLimitingQueue[str], ...]:
        return (self.update, self.delete)


def remote_groups_of(spec: object) -> set[str]:
    """The groups a spec's rules name as remoteSecurityGroup (malformed parts ignored)."""
    out: set[str] = set()
    if not isinstance(spec, Mapping):
        return out
    for field in RULE_FIELDS.values():
        rules = spec.get(field)
        for rule in rules if isinstance(rules, list) else ():
            if isinstance(rule, Mapping) and isinstance(rule.get("remoteSecurityGroup"), str):
                out.add(rule["remoteSecurityGroup"].strip())
    return out


def ready_condition(plan: SgPlan, synced: bool, error: str = "") -> dict[str, str]:
    if not synced:
        return {
            "type": CONDITION_READY,
            "status": "False",
            "reason": "SyncFailed",
            "message": error,
        }
    if plan.errors:
        return {
            "type": CONDITION_READY,
            "status": "False",
            "reason": "InvalidRules",
            "message": errors_message(plan.errors),
        }
    return {"type": CONDITION_READY, "status": "True", "reason": "Synced", "message": ""}


def wanted_status(
    plan: SgPlan, current: Mapping[str, Any] | None, now: str, synced: bool = True, error: str = ""
) -> dict[str, Any] | None:
    """The status to write, or None when `current` already says it (timestamps aside)."""
    current = current if isinstance(current, Mapping) else {}
    status = plan_status(plan)
    if not synced:
        status["ingressLastSyncSuccess"] = status["egressLastSyncSuccess"] = False
    cond = ready_condition(plan, synced, error)
    old = next(
        (
            c
            for c in current.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == CONDITION_READY
        ),
        None,
    )
    same_cond = old is not None and all(old.get(k) == v for k, v in cond.items())
    if same_cond and all(current.get(k) == status[k] for k in STATUS_KEYS):
        return None
    transition = now
    if old is not None and old.get("status") == cond["status"] and old.get("lastTransitionTime"):
        transition = str(old["lastTransitionTime"])
    status["conditions"] = [{**cond, "lastUpdateTime": now, "lastTransitionTime": transition}]
    return status


class SecurityGroupController:
    def __init__(
        self,
        *,
        kube: SgStatusWriter,
        nb: NbClient,
        recorder: EventRecorder,
        queues: SecurityGroupQueues,
        is_leader: Callable[[], bool],
        wall_clock: WallClock = utcnow,
        view: CacheView | None = None,
        sgs: Indexer | None = None,
    ) -> None:
        """The SecurityGroups are read through `view`, or a view over the `sgs` indexer."""
        self._view = view if view is not None else CacheView(security_groups=sgs)
        self._kube = kube
        self._nb = nb
        self._recorder = recorder
        self.queues = queues
        self._is_leader = is_leader
        self._wall_clock = wall_clock
        # add/update and delete of one group never overlap (kube-ovn sgKeyMutex)
        self._mutex = KeyMutex(97)

    # --- informer callbacks ----------------------------------------------------------------------
    def event_handler(self) -> LeaderGated:
        return LeaderGated(
            self._is_leader, added=self._added, updated=self._updated, deleted=self._deleted
        )

    def _added(self, obj: KubeObject, is_in_initial_list: bool) -> None:
        name = object_name(obj)
        if name:
            self.queues.update.add(name)
            if not is_in_initial_list:
                self._requeue_referrers(name)

    def _updated(self, old: KubeObject, new: KubeObject) -> None:
        name = object_name(new)
        if name and (old.get("spec") != new.get("spec") or replaced(old, new)):
            self.queues.update.add(name)

    def _deleted(self, obj: KubeObject) -> None:
        name = object_name(obj)
        if name:
            self.queues.delete.add(name)
            self._requeue_referrers(name)

    def _requeue_referrers(self, name: str) -> None:
        for other in self._view.security_groups():
            if other.name and other.name != name and name in remote_groups_of(other.spec):
                self.queues.update.add(other.name)

    # --- handlers --------------------------------------------------------------------------------
    def handle_add_or_update(self, name: str) -> None:
        with self._mutex.locked(name):
            cached = self._view.security_group(name)
            if cached is None:
                return
            # the spec as cached: the plan reports one that is not an object
            plan = plan_security_group(name, cached.obj.get("spec"), self._view.has_security_group)
            now = self._wall_clock().strftime("%Y-%m-%dT%H:%M:%SZ")
            if check_sg_name(name) is not None or name == DENY_ALL_SECURITY_GROUP:
                # NOTE: a name NB rows cannot carry, or the built-in deny-all group's: the plan
                # says why (status and Event); that group's rows are never touched.
                self._write_status(name, wanted_status(plan, cached.status, now))
                self._warn(cached.obj, REASON_VALIDATE_SG_FAILED, errors_message(plan.errors))
                return
            try:
                self._nb.apply_security_group(name, plan.acls, plan.remote_groups)
                self._nb.sync_sg_ports(name)
            except OvnError as exc:
                status = wanted_status(plan, cached.status, now, False, str(exc))
                try:
                    self._write_status(name, status)
                except Exception:
                    LOG.exception("security group %s: status not written", name)
                raise
            self._write_status(name, wanted_status(plan, cached.status, now))
            if plan.errors:
                self._warn(cached.obj, REASON_VALIDATE_SG_FAILED, errors_message(plan.errors))
            LOG.info(
                "security group %s: %d ACLs on %s, %d rules rejected",
                name,
                len(plan.acls),
                plan.port_group,
                len(plan.errors),
            )

    def _write_status(self, name: str, status: dict[str, Any] | None) -> None:
        if status is not None:
            self._kube.update_security_group_status(name, status)

    def _warn(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        ref = ObjectRef.from_object(
            obj, default_kind=KIND_SECURITY_GROUP, default_api_version=SECURITY_GROUP_API_VERSION
        )
        LOG.warning("security group %s: %s", ref.name, message)
        self._recorder.event(ref, EVENT_TYPE_WARNING, reason, message)

    def handle_delete(self, name: str) -> None:
        with self._mutex.locked(name):
            if self._view.has_security_group(name) or name == DENY_ALL_SECURITY_GROUP:
                return  # re-created meanwhile: the update queue owns it
            self._nb.delete_security_group(name)
            LOG.info("deleted security group %s", name)

    # --- workers ---------------------------------------------------------------------------------
    def run_workers(self, worker_num: int, stop: threading.Event) -> list[threading.Thread]:
        return start_workers(
            [
                (self.queues.update, self.handle_add_or_update, worker_num),
                (self.queues.delete, self.handle_delete, 1),
            ],
            stop,
        )
