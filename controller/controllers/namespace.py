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
from typing import Any

from controller.cache import (
    Indexer,
    ResourceEventHandlerFuncs,
    unwrap_tombstone,
)
from controller.cache.keys import object_name
from controller.config import Config
from controller.core.constants import (
    CIDR_ANNOTATION,
    EXCLUDE_IPS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.core.errors import MalformedObjectError, ResourceNotReadyError
from controller.core.subnet_spec import format_subnet_spec
from controller.kube.api import KubeApi
from controller.queues import RateLimitingQueue
from controller.runtime.worker import start_workers

LOG = logging.getLogger(__name__)

NAMESPACE_KEYS = (LOGICAL_SWITCH_ANNOTATION, CIDR_ANNOTATION, EXCLUDE_IPS_ANNOTATION)


def _namespaces_of(subnet: Any) -> list[str]:
    spec = subnet.get("spec") if isinstance(subnet, Mapping) else None
    names = (spec or {}).get("namespaces") or []
    return [n for n in names if isinstance(n, str) and n]


def _vpc_default_subnet(namespace: str, vpcs: Iterable[Mapping[str, Any]]) -> str:
    """The default subnet of the (first by name) Vpc listing `namespace`, "" for none."""
    for vpc in sorted(vpcs, key=object_name):
        if namespace in _namespaces_of(vpc):
            status = vpc.get("status")
            ls = (status or {}).get("defaultLogicalSwitch") if isinstance(status, Mapping) else ""
            return ls if isinstance(ls, str) else ""
    return ""


def desired_namespace_annotations(
    namespace: str,
    subnets: Iterable[Mapping[str, Any]],
    default_subnet: Mapping[str, Any] | None,
    vpcs: Iterable[Mapping[str, Any]] = (),
) -> dict[str, str]:
    """The three namespace annotations (see the module docstring); subnets being deleted skip.

    Raises ResourceNotReadyError when the namespace is bound to nothing and its subnet (its
    VPC's default subnet, else the default subnet) is not known yet.
    """
    subnets = list(subnets)
    bound = sorted(
        (
            s
            for s in subnets
            if namespace in _namespaces_of(s)
            and not (s.get("metadata") or {}).get("deletionTimestamp")
        ),
        key=object_name,
    )
    vpc_subnet = _vpc_default_subnet(namespace, vpcs) if not bound else ""
    if not bound and vpc_subnet:
        # NOTE: kube-ovn handleAddNamespace: a custom VPC's namespace uses its default subnet
        found = [s for s in subnets if object_name(s) == vpc_subnet]
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
        name = object_name(subnet)
        try:
            spec = format_subnet_spec(name, subnet.get("spec") or {})
        except MalformedObjectError as exc:
            raise ResourceNotReadyError(f"namespace {namespace}: {exc}") from None
        names.append(name)
        cidrs.append(spec["cidrBlock"])
        excludes.append(",".join(spec["excludeIps"]))
    return {
        LOGICAL_SWITCH_ANNOTATION: ",".join(names),
        CIDR_ANNOTATION: ";".join(cidrs),
        EXCLUDE_IPS_ANNOTATION: ";".join(excludes),
    }


class NamespaceController:
    def __init__(
        self,
        *,
        config: Config,
        namespaces: Indexer,
        subnets: Indexer,
        kube: KubeApi,
        queue: RateLimitingQueue[str],
        is_leader: Callable[[], bool],
        vpcs: Indexer | None = None,
    ) -> None:
        self._config = config
        self._namespaces = namespaces
        self._subnets = subnets
        self._vpcs = vpcs
        self._kube = kube
        self.queue = queue
        self._is_leader = is_leader

    # --- namespace informer ----------------------------------------------------------------------
    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        if self._is_leader() and object_name(obj):
            self.queue.add(object_name(obj))

    def on_update(self, old: Any, new: Any) -> None:
        if not self._is_leader():
            return
        old_ann = (old.get("metadata") or {}).get("annotations") or {}
        new_ann = (new.get("metadata") or {}).get("annotations") or {}
        if any(old_ann.get(k) != new_ann.get(k) for k in NAMESPACE_KEYS) or not all(
            k in new_ann for k in NAMESPACE_KEYS
        ):
            self.queue.add(object_name(new))

    def on_delete(self, obj: Any) -> None:
        """Nothing to clean up: the annotations go with the namespace."""

    # --- subnet informer -------------------------------------------------------------------------
    def subnet_event_handler(self) -> ResourceEventHandlerFuncs:
        def touched(*objs: Any) -> None:
            if not self._is_leader():
                return
            names: set[str] = set()
            for obj in objs:
                obj = unwrap_tombstone(obj)  # noqa: PLW2901
                if object_name(obj) == self._config.default_logical_switch:
                    names.update(self._namespaces.list_keys())
                names.update(_namespaces_of(obj))
            for name in sorted(names):
                self.queue.add(name)

        def updated(old: Any, new: Any) -> None:
            if old.get("spec") != new.get("spec") or (new.get("metadata") or {}).get(
                "deletionTimestamp"
            ):
                touched(old, new)

        return ResourceEventHandlerFuncs(touched, updated, touched)

    # --- vpc informer ----------------------------------------------------------------------------
    def vpc_event_handler(self) -> ResourceEventHandlerFuncs:
        def touched(*objs: Any) -> None:
            if not self._is_leader():
                return
            names: set[str] = set()
            for obj in objs:
                obj = unwrap_tombstone(obj)  # noqa: PLW2901
                names.update(_namespaces_of(obj))
            for name in sorted(names):
                self.queue.add(name)

        def updated(old: Any, new: Any) -> None:
            if old.get("spec") != new.get("spec") or old.get("status") != new.get("status"):
                touched(old, new)

        return ResourceEventHandlerFuncs(touched, updated, touched)

    # --- handler ---------------------------------------------------------------------------------
    def handle_add_namespace(self, name: str) -> None:
        cached = self._namespaces.get_by_key(name)
        if cached is None or (cached.get("metadata") or {}).get("deletionTimestamp"):
            return
        wanted = desired_namespace_annotations(
            name,
            self._subnets.list(),
            self._subnets.get_by_key(self._config.default_logical_switch),
            self._vpcs.list() if self._vpcs is not None else (),
        )
        current = (cached.get("metadata") or {}).get("annotations") or {}
        if all(current.get(k) == v for k, v in wanted.items()):
            return
        self._kube.annotate_namespace(name, dict(wanted))
        LOG.info("namespace %s uses logical switch(es) %s", name, wanted[LOGICAL_SWITCH_ANNOTATION])

    def run_workers(self, stop: threading.Event) -> list[threading.Thread]:
        return start_workers([(self.queue, self.handle_add_namespace, 1)], stop)
