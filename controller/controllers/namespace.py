"""The built-in minimal namespace controller (kube-ovn `namespace.go` handleAddNamespace).

Contract:

* Every namespace carries the annotations the pod controller reads to pick a pod's subnet:
  `ovn.kubernetes.io/logical_switch` = the subnets whose `spec.namespaces` include it (sorted by
  name, comma-joined), or the default subnet (`--default-ls`) when none does;
  `ovn.kubernetes.io/cidr` = their CIDR blocks joined with `;`; `ovn.kubernetes.io/exclude_ips`
  = each subnet's exclude list (comma-joined, gateway included as kube-ovn's formatSubnet adds
  it) joined with `;`. `desired_namespace_annotations` (pure) computes them. A namespace no
  subnet binds but a Vpc lists (`spec.namespaces`) uses that VPC's default subnet
  (`status.defaultLogicalSwitch`, kube-ovn handleAddNamespace); a Vpc change re-queues the
  namespaces it lists before and after.
* Queue `AddNamespace`, key = namespace name. A namespace add/update enqueues it; a subnet add,
  update or delete enqueues the namespaces it names before and after (every namespace when the
  default subnet changes, since unbound namespaces follow it). The handler patches only when an
  annotation differs (merge patch of our three keys), so it is idempotent.
* A subnet that is not in the cache yet (the default one at start-up) is a retryable error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from controller.cache import Indexer
from controller.cache.keys import object_name, raw_field
from controller.config import Config
from controller.core.constants import (
    CIDR_ANNOTATION,
    EXCLUDE_IPS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.core.errors import MalformedObjectError, ResourceNotReadyError
from controller.core.model import Vpc
from controller.core.subnet_spec import format_subnet_spec
from controller.kube.api import KubeApi, KubeObject
from controller.queues import RateLimitingQueue
from controller.runtime.leader_gated import LeaderGated
from controller.runtime.worker import start_workers
from controller.view import CachedObject, CacheView

LOG = logging.getLogger(__name__)

NAMESPACE_KEYS = (LOGICAL_SWITCH_ANNOTATION, CIDR_ANNOTATION, EXCLUDE_IPS_ANNOTATION)


def desired_namespace_annotations(
    namespace: str,
    subnets: Iterable[CachedObject],
    default_subnet: CachedObject | None,
    vpcs: Iterable[Vpc] = (),
) -> dict[str, str]:
    """The three namespace annotations (see the module docstring); subnets being deleted skip.

    Raises ResourceNotReadyError when the namespace is bound to nothing and its subnet (its
    VPC's default subnet, else the default subnet) is not known yet.
    """
    subnets = list(subnets)
    bound = sorted(
        (s for s in subnets if namespace in _str_list(s.spec, "namespaces") and not s.deleting),
        key=lambda s: s.name,
    )
    # the first VPC by name that lists the namespace
    vpc_subnet = next(
        (v.default_logical_switch for v in sorted(vpcs, key=_name) if namespace in v.namespaces),
        "",
    )
    if not bound and vpc_subnet:
        # NOTE: kube-ovn handleAddNamespace: a custom VPC's namespace uses its default subnet
        found = [s for s in subnets if s.name == vpc_subnet]
        if not found:
            raise ResourceNotReadyError(
                f"default subnet {vpc_subnet} of the vpc of namespace {namespace} not found"
            )
        bound = found
    if not bound:
        if default_subnet is None:
            raise ResourceNotReadyError(f"default subnet of namespace {namespace} not found")
        bound = [default_subnet]
    names, cidrs, excludes = [], [], []
    for subnet in bound:
        try:
            spec = format_subnet_spec(subnet.name, subnet.spec)
        except MalformedObjectError as exc:
            raise ResourceNotReadyError(f"namespace {namespace}: {exc}") from None
        names.append(subnet.name)
        cidrs.append(spec["cidrBlock"])
        excludes.append(",".join(spec["excludeIps"]))
    return {
        LOGICAL_SWITCH_ANNOTATION: ",".join(names),
        CIDR_ANNOTATION: ";".join(cidrs),
        EXCLUDE_IPS_ANNOTATION: ";".join(excludes),
    }


def _name(vpc: Vpc) -> str:
    return vpc.name


def _str_list(fields: Mapping[str, object], key: str) -> list[str]:
    """The non-empty strings of a list field (anything else in it, or a non-list, is skipped)."""
    value = fields.get(key)
    items = value if isinstance(value, list) else []
    return [n for n in items if isinstance(n, str) and n]


class NamespaceController:
    def __init__(
        self,
        *,
        config: Config,
        kube: KubeApi,
        queue: RateLimitingQueue[str],
        is_leader: Callable[[], bool],
        view: CacheView | None = None,
        **caches: Indexer | None,
    ) -> None:
        """The caches are read through `view`, or a view over `caches` (namespaces=, subnets=,
        vpcs=)."""
        self._config = config
        self._view = CacheView.given_or_over(view, kube, caches)
        self._kube = kube
        self.queue = queue
        self._is_leader = is_leader

    # --- namespace informer ----------------------------------------------------------------------
    def event_handler(self) -> LeaderGated:
        """Adds and annotation changes; nothing to clean up on a delete (the annotations go
        with the namespace)."""
        return LeaderGated(self._is_leader, added=self._added, updated=self._updated)

    def _added(self, obj: KubeObject, is_in_initial_list: bool) -> None:
        if object_name(obj):
            self.queue.add(object_name(obj))

    def _updated(self, old: KubeObject, new: KubeObject) -> None:
        old_ann = raw_field(raw_field(old, "metadata"), "annotations")
        new_ann = raw_field(raw_field(new, "metadata"), "annotations")
        if any(old_ann.get(k) != new_ann.get(k) for k in NAMESPACE_KEYS) or not all(
            k in new_ann for k in NAMESPACE_KEYS
        ):
            self.queue.add(object_name(new))

    def _queue_listed(self, *objs: KubeObject, default_follows: bool = False) -> None:
        """Queue the namespaces the objects' `spec.namespaces` list (every namespace when one
        is the default subnet, which the unbound namespaces follow)."""
        names: set[str] = set()
        for obj in objs:
            if default_follows and object_name(obj) == self._config.default_logical_switch:
                names.update(self._view.namespace_names())
            names.update(_str_list(raw_field(obj, "spec"), "namespaces"))
        for name in sorted(names):
            self.queue.add(name)

    # --- subnet informer -------------------------------------------------------------------------
    def subnet_event_handler(self) -> LeaderGated:
        def touched(obj: KubeObject, *_: object) -> None:
            self._queue_listed(obj, default_follows=True)

        def updated(old: KubeObject, new: KubeObject) -> None:
            if old.get("spec") != new.get("spec") or raw_field(new, "metadata").get(
                "deletionTimestamp"
            ):
                self._queue_listed(old, new, default_follows=True)

        return LeaderGated(self._is_leader, added=touched, updated=updated, deleted=touched)

    # --- vpc informer ----------------------------------------------------------------------------
    def vpc_event_handler(self) -> LeaderGated:
        def touched(obj: KubeObject, *_: object) -> None:
            self._queue_listed(obj)

        def updated(old: KubeObject, new: KubeObject) -> None:
            if old.get("spec") != new.get("spec") or old.get("status") != new.get("status"):
                self._queue_listed(old, new)

        return LeaderGated(self._is_leader, added=touched, updated=updated, deleted=touched)

    # --- handler ---------------------------------------------------------------------------------
    def handle_add_namespace(self, name: str) -> None:
        cached = self._view.namespace_object(name)
        if cached is None or cached.deleting:
            return
        wanted = desired_namespace_annotations(
            name,
            self._view.subnet_objects(),
            self._view.subnet_object(self._config.default_logical_switch),
            self._view.vpcs(),
        )
        if all(cached.annotations.get(k) == v for k, v in wanted.items()):
            return
        self._kube.annotate_namespace(name, dict(wanted))
        LOG.info("namespace %s uses logical switch(es) %s", name, wanted[LOGICAL_SWITCH_ANNOTATION])

    def run_workers(self, stop: threading.Event) -> list[threading.Thread]:
        return start_workers([(self.queue, self.handle_add_namespace, 1)], stop)
