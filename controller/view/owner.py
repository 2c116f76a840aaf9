"""`OwnerLookup`: StatefulSets and VirtualMachines as the keep rules read them, with one policy.

The policy: the informer's answer is believed when it keeps an address; when it says "release"
(owner missing, being deleted, fewer replicas) and an owner informer runs, the answer is
confirmed with one GET per owner and the API's answer wins. kube-ovn reads owners from the API,
and an owner cache that lags or has not synced yet (right after a restart) must not take a
running pod's network, whether the pod delete path or the garbage collector asks.

* `keeps(rule)`: for the garbage collector and the audit, any `controller.core.keep` rule over
  the cached owners, re-run over owners read by GET when it says release. An owner that cannot
  be read (API error, malformed object) is logged and raises `OwnerUnknownError` into the rule,
  which keeps.
* `of(pod)`: a `PodOwner`, for the pod delete path (a lookup over a `CacheView`).

Where owners come from is an `OwnerSource`: the `CacheView` (informers, else GETs) for the
controller; `ListedOwners` (the lists one audit pass read, and the API to confirm them) for the
`check` audit, whose lists are as much a snapshot that may lag as an informer's cache.

`PodOwner`: `pod_logic.decide_delete` asks two questions of a deleting pod's owner (is it to be
deleted? may its IP CR go?); kube-ovn GETs the owner for each. This reads it once through the
`CacheView` (informer, else one GET) and answers both:

* `to_delete()`: kube-ovn isStatefulSetPodToDel / isVmPodToDel; an unreadable owner (API error,
  malformed object) is logged and counts as "keep";
* `check_pod_to_del()`: kube-ovn appendCheckPodToDel; an unreadable owner raises (the delete is
  retried).

Under the one policy, the API's answer (when a cached release was confirmed) is used by both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from controller import pod_logic as pl
from controller.apiclient.errors import KubeApiError
from controller.core import keep
from controller.core.errors import MalformedObjectError
from controller.core.model import Pod, StatefulSet, VirtualMachine
from controller.kube.api import KubeObject
from controller.view.cache_view import CacheView

LOG = logging.getLogger(__name__)

_O = TypeVar("_O")


class OwnerSource(Protocol):
    """Where `OwnerLookup` reads owners: a cached answer, or (`from_api`) one GET. None is
    NotFound; `KubeApiError` / `MalformedObjectError` / `OwnerUnknownError` mean "cannot tell"."""

    def statefulset(
        self, namespace: str, name: str, *, from_api: bool = False
    ) -> StatefulSet | None: ...

    def virtual_machine(
        self, namespace: str, name: str, *, from_api: bool = False
    ) -> VirtualMachine | None: ...

    def owners_cached(self) -> bool:
        """Is the plain read a cached one (so a release it says is worth a GET)?"""
        ...


class OwnerApi(Protocol):
    """The GETs that confirm what a listed snapshot says (`KubeApi` has them)."""

    def get_statefulset(self, namespace: str, name: str) -> KubeObject | None: ...

    def get_virtual_machine(self, namespace: str, name: str) -> KubeObject | None: ...


class ListedOwners:
    """Owners from lists read once (None: that kind was not read, so its owners are unknown
    and every address they may keep is kept), confirmed through `api` when one is given."""

    def __init__(
        self,
        statefulsets: Iterable[StatefulSet] | None,
        virtual_machines: Iterable[VirtualMachine] | None,
        api: OwnerApi | None = None,
    ) -> None:
        self._sts = None
        if statefulsets is not None:
            self._sts = {(s.namespace, s.name): s for s in statefulsets}
        self._vms = None
        if virtual_machines is not None:
            self._vms = {(v.namespace, v.name): v for v in virtual_machines}
        self._api = api

    def statefulset(
        self, namespace: str, name: str, *, from_api: bool = False
    ) -> StatefulSet | None:
        if from_api and self._api is not None:
            raw = self._api.get_statefulset(namespace, name)
            return None if raw is None else StatefulSet.from_dict(raw)
        if self._sts is None:
            raise keep.OwnerUnknownError
        return self._sts.get((namespace, name))

    def virtual_machine(
        self, namespace: str, name: str, *, from_api: bool = False
    ) -> VirtualMachine | None:
        if from_api and self._api is not None:
            raw = self._api.get_virtual_machine(namespace, name)
            return None if raw is None else VirtualMachine.from_dict(raw)
        if self._vms is None:
            raise keep.OwnerUnknownError
        return self._vms.get((namespace, name))

    def owners_cached(self) -> bool:
        return self._api is not None


class OwnerLookup:
    """Owners read from a source under the one policy (see the module docstring)."""

    def __init__(self, source: OwnerSource) -> None:
        self._view = source
        self.cached = keep.OwnerReaders(self._cached_statefulset, self._cached_virtual_machine)
        self.confirmed = keep.OwnerReaders(self._api_statefulset, self._api_virtual_machine)

    def keeps(self, rule: Callable[[keep.OwnerReaders], bool]) -> bool:
        """`rule` over the cached owners; a release is confirmed by `rule` over GETs."""
        if rule(self.cached):
            return True
        return self._view.owners_cached() and rule(self.confirmed)

    def of(self, pod: Pod) -> PodOwner:
        """The owner of a deleting pod; only a lookup over a `CacheView` reads the namespace
        and subnets `check_pod_to_del` needs."""
        if not isinstance(self._view, CacheView):
            raise TypeError("OwnerLookup.of needs a CacheView source")
        return PodOwner(self._view, pod)

    def _read(self, kind: str, read: Callable[[], _O]) -> _O:
        try:
            return read()
        except (KubeApiError, MalformedObjectError) as exc:
            LOG.warning("cannot read %s: %s", kind, exc)
            raise keep.OwnerUnknownError from exc

    def _cached_statefulset(self, namespace: str, name: str) -> StatefulSet | None:
        return self._read(
            f"statefulset {namespace}/{name}", lambda: self._view.statefulset(namespace, name)
        )

    def _api_statefulset(self, namespace: str, name: str) -> StatefulSet | None:
        return self._read(
            f"statefulset {namespace}/{name}",
            lambda: self._view.statefulset(namespace, name, from_api=True),
        )

    def _cached_virtual_machine(self, namespace: str, name: str) -> VirtualMachine | None:
        return self._read(
            f"virtual machine {namespace}/{name}",
            lambda: self._view.virtual_machine(namespace, name),
        )

    def _api_virtual_machine(self, namespace: str, name: str) -> VirtualMachine | None:
        return self._read(
            f"virtual machine {namespace}/{name}",
            lambda: self._view.virtual_machine(namespace, name, from_api=True),
        )


class PodOwner:
    """The owner of one pod, fetched at most once (see the module docstring)."""

    def __init__(self, view: CacheView, pod: Pod) -> None:
        self._view = view
        self._pod = pod
        self._fetched = False
        self._owner: StatefulSet | VirtualMachine | None = None
        self._error: Exception | None = None

    def _fetch(self) -> StatefulSet | VirtualMachine | None:
        if not self._fetched:
            self._fetched = True
            try:
                self._owner = self._view.owner_of(self._pod)
                if self._view.owner_cached(self._pod) and self._verdict(self._owner):
                    self._owner = self._view.owner_of(self._pod, from_api=True)
            except (KubeApiError, MalformedObjectError) as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        return self._owner

    def _verdict(self, owner: StatefulSet | VirtualMachine | None) -> bool:
        if pl.is_vm_pod(self._pod) is not None and pl.is_statefulset_pod(self._pod) is None:
            return pl.is_vm_pod_to_del(owner if isinstance(owner, VirtualMachine) else None)
        return pl.is_statefulset_pod_to_del(
            self._pod, owner if isinstance(owner, StatefulSet) else None
        )

    def to_delete(self) -> bool:
        try:
            owner = self._fetch()
        except (KubeApiError, MalformedObjectError) as exc:
            # NOTE: kube-ovn: a GET error other than NotFound means "not to delete".
            LOG.warning("cannot read the owner of pod %s: %s", self._pod.key, exc)
            return False
        return self._verdict(owner)

    def check_pod_to_del(self) -> bool:
        owner = self._fetch()  # a failed GET propagates: the delete is retried
        view = self._view
        return pl.append_check_pod_to_del(
            self._pod, owner, view.namespace(self._pod.namespace), view.subnet_map()
        )
