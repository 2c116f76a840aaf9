"""handleUpdatePodSecurity: a pod's ports follow its security annotations (kube-ovn pod.go).

`SecurityHandler.handle` re-associates each of the pod's ports with its security groups (every
group listed), and re-applies the port_security column when the annotation changed (kube-ovn
v1.8 sets it only at creation: kubeovn/kube-ovn#1143, #2343). A port not created yet is the
add's; a lost one the inspection's.
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.core import annotations as ann
from controller.core.address import split_string_ip
from controller.core.model import Pod, PodNet, ProviderType
from controller.core.naming import pod_name_to_port_name
from controller.kube.api import KubeObject
from controller.ovn import external_ids as ext
from controller.ovn.api import PortInfo
from controller.ovn.logic import port_columns
from controller.pod.context import LOG, PodContext
from controller.pod.nets import PodNets


class SecurityHandler:
    """The UpdatePodSecurity queue's handler (see the module docstring)."""

    def __init__(self, ctx: PodContext, *, nets: PodNets) -> None:
        self._ctx = ctx
        self._nets = nets

    def handle(self, key: str) -> None:
        self._ctx.on_cached_pod(key, self._sync_security)

    def _sync_security(self, _key: str, raw: KubeObject, pod: Pod) -> None:
        ctx = self._ctx
        name = pl.get_name_by_pod(pod, ctx.keep_vm_ip)
        for net in self._nets.of(raw, pod):
            if net.type is ProviderType.IPAM:
                continue
            port = pod_name_to_port_name(name, pod.namespace, net.provider_name)
            info = ctx.nb.get_port(port)
            if info is None:
                continue  # not created yet (the add owns it) or lost (inspection re-adds)
            to_sync = set(self._reapply_port_security(pod, net, info))
            # NOTE: without port security a port takes no part in any group.
            sgs = pl.security_groups_to_sync(pod, net)
            if sgs or info.external_ids.get(ext.SECURITY_GROUPS_KEY):
                to_sync.update(ctx.nb.reconcile_port_sg(port, sgs))
            for sg in sorted(to_sync):
                ctx.nb.sync_sg_ports(sg)

    def _reapply_port_security(self, pod: Pod, net: PodNet, info: PortInfo) -> list[str]:
        """Rewrite the port when its port_security column no longer matches the annotation.

        NOTE: kube-ovn v1.8 sets port_security only at creation (kubeovn/kube-ovn#1143), so a
        pod that gets `port_security=true` later never joins its security groups
        (kubeovn/kube-ovn#2343). Returns the groups whose membership this may change (the
        port's old and new ones).
        """
        ctx = self._ctx
        allocation = ann.PodNetworkAnnotations.from_annotations(pod.annotations, net.provider_name)
        if not allocation.allocated or not allocation.ip_address or not allocation.mac_address:
            return []
        cached = ctx.view.subnet(allocation.logical_switch)
        subnet = cached if cached is not None else net.subnet
        v4, v6 = split_string_ip(allocation.ip_address)
        spec = pl.build_port_spec(
            pod, net, subnet, v4=v4, v6=v6, mac=allocation.mac_address, keep_vm_ip=ctx.keep_vm_ip
        )
        if port_columns(spec).port_security == tuple(info.port_security):
            return []
        LOG.info("pod %s: port security of %s is now %s", pod.key, spec.name, spec.port_security)
        ctx.nb.create_port(spec)
        old = ext.split_sgs(info.external_ids.get(ext.SECURITY_GROUPS_KEY, ""))
        return [*old, *spec.security_groups, ext.DENY_ALL_SG]
