"""handleDeletePod: routing and NAT (the routing reconciler's keys of the pod, reconciled
before the address is released), ports, IP CRs, IPAM release (kube-ovn pod.go).

The delete queue holds keys; the object to clean up is the key's entry in `PendingDeletes`
(filled by the informer callbacks), which is removed only once a cleanup of that very object
succeeded. A pod re-created under the same name is never touched (`pod_logic.is_replaced_by`);
the StatefulSet / VM keep rules are `pod_logic.decide_delete`'s, fed by one `OwnerLookup` of
the pod's owner.
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
from controller.pod.context import LOG, PodContext, pod_or_none
from controller.pod.pending import PendingDeletes
from controller.view import OwnerLookup


class DeleteHandler:
    """The DeletePod queue's handler (see the module docstring)."""

    def __init__(self, ctx: PodContext, *, pending: PendingDeletes) -> None:
        self._ctx = ctx
        self._pending = pending

    def handle(self, key: str) -> None:
        ctx = self._ctx
        entry = self._pending.get(key)
        if entry is None:
            return  # already cleaned up by an earlier run of this key
        if entry.not_before is not None:
            remaining = entry.not_before - ctx.clock.now()
            if remaining > 0:
                ctx.queues.delete.add_after(key, remaining)
                return
        with ctx.key_mutex.locked(key):
            try:
                pod = Pod.from_dict(entry.obj)
            except MalformedObjectError as exc:
                LOG.error("dropping the delete of malformed pod %s: %s", key, exc)
            else:
                self._delete_pod(key, pod)
        self._pending.done(key, entry)

    def _delete_pod(self, key: str, pod: Pod) -> None:
        ctx = self._ctx
        current_raw = ctx.view.pod_raw(key)
        current = pod_or_none(current_raw, ctx.view.pod_model) if current_raw is not None else None
        if pl.is_replaced_by(pod, current):
            LOG.info(
                "pod %s was re-created (uid %s), skipping the cleanup of uid %s",
                key,
                current.uid if current else "",
                pod.uid,
            )
            return
        pod_name = pl.get_name_by_pod(pod, ctx.keep_vm_ip)
        ipam_key = pl.get_pod_key(pod, ctx.keep_vm_ip)
        for address in ctx.ipam.get_pod_address(ipam_key):
            ctx.unroute(pod, address.subnet, address.ip)
        listed = ctx.nb.list_pod_ports(pod_name, pod.namespace)
        owner = OwnerLookup(ctx.view).of(pod)
        decision = pl.decide_delete(
            pod,
            keep_vm_ip=ctx.keep_vm_ip,
            owner_to_delete=owner.to_delete,
            check_pod_to_del=owner.check_pod_to_del,
        )
        if decision.skip:
            LOG.info("keeping the network of %s (its owner keeps the pod's address)", key)
            return
        stale_sgs = self._delete_ports(pod, listed, pod_name, keep_ip_cr=decision.keep_ip_cr)
        if not decision.keep_ip_cr:
            self._delete_attachment_ip_crs(pod, pod_name)
        for sg in dict.fromkeys(stale_sgs):
            try:
                ctx.nb.sync_sg_ports(sg)
            except OvnError as exc:
                LOG.warning("failed to sync security group %s after deleting %s: %s", sg, key, exc)
        if decision.keep_ip_cr:
            # NOTE: kube-ovn releases the address even when it keeps the IP CR, so a re-created
            # sts pod gets a new address until the next restart restores the CR's (InitIPAM);
            # keeping both together gives the pod its address back at once, as after a restart.
            # The gc releases the pair once the StatefulSet no longer wants the ordinal.
            LOG.info("kept the IP CR and address of pod %s for its StatefulSet", key)
            return
        ctx.ipam.release_address_by_pod(ipam_key)
        self._pending.forget_unfinished(key)  # released with the rest
        LOG.info("released the network of pod %s", key)

    def _delete_ports(
        self, pod: Pod, listed: list[str], pod_name: str, *, keep_ip_cr: bool
    ) -> list[str]:
        """Delete the pod's ports (and their IP CRs unless kept); the security groups they were
        in, whose port lists then need a sync."""
        ctx = self._ctx
        stale_sgs: list[str] = []
        for port in pl.ports_to_delete(listed, pod_name, pod.namespace):
            info = ctx.nb.get_port(port)
            if info is not None:
                stale_sgs.extend(ext.split_sgs(info.external_ids.get(ext.SECURITY_GROUPS_KEY, "")))
            ctx.nb.delete_port(port)
            if not keep_ip_cr and not ctx.foreign_ip_cr(port, pod.namespace, pod_name):
                ctx.kube.delete_ip(port)
        return stale_sgs

    def _delete_attachment_ip_crs(self, pod: Pod, pod_name: str) -> None:
        """kube-ovn deleteAttachmentNetWorkIP: the IP CRs of every allocated attachment (the
        ones without a port too), unless another owner's."""
        ctx = self._ctx
        for provider in ann.attachment_providers_to_release(pod.annotations):
            name = pod_name_to_port_name(pod_name, pod.namespace, provider)
            if ctx.foreign_ip_cr(name, pod.namespace, pod_name):
                continue
            try:
                ctx.kube.delete_ip(name)
            except KubeApiError as exc:
                LOG.error("failed to delete attachment IP %s (delete it manually): %s", name, exc)
