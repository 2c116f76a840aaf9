"""handleDeletePod: routing and NAT (the routing reconciler's keys of the pod, reconciled
before the address is released), ports, IP CRs, IPAM release (kube-ovn pod.go).

The delete queue holds keys; the object to clean up is the deleting map's entry for the key
(`DeletingPod`, filled by the informer callbacks), which is removed only once a cleanup of that
very object succeeded. A pod re-created under the same name is never touched
(`pod_logic.is_replaced_by`); the StatefulSet / VM keep rules are `pod_logic.decide_delete`'s,
fed by one `OwnerLookup` of the pod's owner.
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.apiclient.errors import KubeApiError
from controller.core import annotations as ann
from controller.core.errors import MalformedObjectError
from controller.core.model import Pod
from controller.core.naming import pod_name_to_port_name
from controller.ovn import external_ids as ext
from controller.ovn.api import OvnError
from controller.pod.base import LOG, PodControllerBase, pod_or_none
from controller.view import OwnerLookup


class DeleteHandlers(PodControllerBase):
    """`handle_delete_pod` (the DeletePod queue's handler)."""

    def handle_delete_pod(self, key: str) -> None:
        with self._deleting_lock:
            entry = self._deleting.get(key)
        if entry is None:
            return  # already cleaned up by an earlier run of this key
        if entry.not_before is not None:
            remaining = entry.not_before - self._clock.now()
            if remaining > 0:
                self.queues.delete.add_after(key, remaining)
                return
        with self._key_mutex.locked(key):
            try:
                pod = Pod.from_dict(entry.obj)
            except MalformedObjectError as exc:
                LOG.error("dropping the delete of malformed pod %s: %s", key, exc)
            else:
                self._delete_pod(key, pod)
        with self._deleting_lock:
            # NOTE: only the object this run cleaned up; a newer event stays for its own run.
            if self._deleting.get(key) is entry:
                del self._deleting[key]

    def _unroute_address(self, pod: Pod, subnet: str, address: str) -> None:
        """The pod's routing and NAT rows of its `address` in `subnet` go now (one transaction),
        unless a live pod still claims them; the routing reconciler settles its keys after."""
        if address.strip():
            self._routing.release_pod(pod, subnet, address)

    def _delete_pod(self, key: str, pod: Pod) -> None:
        current_raw = self._view.pod_raw(key)
        current = (
            pod_or_none(current_raw, self._view.pod_model) if current_raw is not None else None
        )
        if pl.is_replaced_by(pod, current):
            LOG.info(
                "pod %s was re-created (uid %s), skipping the cleanup of uid %s",
                key,
                current.uid if current else "",
                pod.uid,
            )
            return
        pod_name = pl.get_name_by_pod(pod, self._keep_vm_ip)
        ipam_key = pl.get_pod_key(pod, self._keep_vm_ip)
        for address in self._ipam.get_pod_address(ipam_key):
            self._unroute_address(pod, address.subnet, address.ip)
        listed = self._nb.list_pod_ports(pod_name, pod.namespace)
        owner = OwnerLookup(self._view).of(pod)
        decision = pl.decide_delete(
            pod,
            keep_vm_ip=self._keep_vm_ip,
            owner_to_delete=owner.to_delete,
            check_pod_to_del=owner.check_pod_to_del,
        )
        if decision.skip:
            LOG.info("keeping the network of %s (its owner keeps the pod's address)", key)
            return
        stale_sgs: list[str] = []
        for port in pl.ports_to_delete(listed, pod_name, pod.namespace):
            info = self._nb.get_port(port)
            if info is not None:
                stale_sgs.extend(ext.split_sgs(info.external_ids.get(ext.SECURITY_GROUPS_KEY, "")))
            self._nb.delete_port(port)
            if not decision.keep_ip_cr and not self._foreign_ip_cr(port, pod.namespace, pod_name):
                self._kube.delete_ip(port)
        if not decision.keep_ip_cr:
            for provider in ann.attachment_providers_to_release(pod.annotations):
                name = pod_name_to_port_name(pod_name, pod.namespace, provider)
                if self._foreign_ip_cr(name, pod.namespace, pod_name):
                    continue
                try:
                    self._kube.delete_ip(name)
                except KubeApiError as exc:
                    LOG.error(
                        "failed to delete attachment IP %s (delete it manually): %s", name, exc
                    )
        for sg in dict.fromkeys(stale_sgs):
            try:
                self._nb.sync_sg_ports(sg)
            except OvnError as exc:
                LOG.warning("failed to sync security group %s after deleting %s: %s", sg, key, exc)
        if decision.keep_ip_cr:
            # NOTE: kube-ovn releases the address even when it keeps the IP CR, so a re-created
            # sts pod gets a new address until the next restart restores the CR's (InitIPAM);
            # keeping both together gives the pod its address back at once, as after a restart.
            # The gc releases the pair once the StatefulSet no longer wants the ordinal.
            LOG.info("kept the IP CR and address of pod %s for its StatefulSet", key)
            return
        self._ipam.release_address_by_pod(ipam_key)
        with self._deleting_lock:
            self._unfinished.pop(key, None)  # released with the rest
        LOG.info("released the network of pod %s", key)
