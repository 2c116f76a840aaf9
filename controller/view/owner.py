"""`OwnerLookup`: a StatefulSet / VirtualMachine pod's owner, read once for both keep checks.

`pod_logic.decide_delete` asks two questions of a deleting pod's owner (is it to be deleted? may
its IP CR go?); kube-ovn GETs the owner for each. This reads it once through the `CacheView`
(informer, else one GET) and answers both:

* `to_delete()`: kube-ovn isStatefulSetPodToDel / isVmPodToDel; an unreadable owner (API error,
  malformed object) is logged and counts as "keep";
* `check_pod_to_del()`: kube-ovn appendCheckPodToDel; an unreadable owner raises (the delete is
  retried).

An informer's owner that says "release" (missing, being deleted, fewer replicas) is confirmed
with one GET before it is believed, and the API's answer is used by both checks: kube-ovn reads
the owner from the API, and an owner cache that lags or has not synced yet (right after a
restart) must not take a running pod's network.
"""

from __future__ import annotations

import logging

from controller import pod_logic as pl
from controller.apiclient.errors import KubeApiError
from controller.core.errors import MalformedObjectError
from controller.core.model import Pod, StatefulSet, VirtualMachine
from controller.view.cache_view import CacheView

LOG = logging.getLogger(__name__)


class OwnerLookup:
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
        if pl.is_vm_pod(self._pod)[0] and not pl.is_statefulset_pod(self._pod)[0]:
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
