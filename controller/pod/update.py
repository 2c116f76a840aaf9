"""handleUpdatePod and handleUpdatePodSecurity (kube-ovn pod.go).

* `handle_update_pod`: the default network's routing rows of the pod (the routing reconciler's
  `route_pod`: its entry in its node's address set for a distributed gateway, its own reroute
  policy for a north gateway or the EIP/SNAT external gateway, NAT rules, and the removal of its
  v1.8 src-ip static routes in the same transaction), then `routed=true`. The reconciler keeps
  them right afterwards, whatever `routed` says. A routed pod whose key is in the reroute set
  (`request_reroute`) is routed again the same way.
* `handle_update_pod_security`: re-associates the pod's ports with their security groups (every
  group listed), and re-applies the port_security column when the annotation changed (kube-ovn
  v1.8 sets it only at creation, #1143 / #2343).
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.apiclient.errors import NotFoundError as KubeNotFoundError
from controller.core import annotations as ann
from controller.core.address import split_string_ip
from controller.core.constants import ROUTED_ANNOTATION
from controller.core.errors import ResourceNotReadyError
from controller.core.model import Pod, PodNet, ProviderType
from controller.core.naming import pod_name_to_port_name
from controller.ovn import external_ids as ext
from controller.ovn.api import PortInfo
from controller.ovn.logic import port_columns
from controller.pod.base import LOG, PodControllerBase, to_pod


class UpdateHandlers(PodControllerBase):
    """`handle_update_pod` (UpdatePod) and `handle_update_pod_security` (UpdatePodSecurity)."""

    def handle_update_pod(self, key: str) -> None:
        with self._key_mutex.locked(key):
            raw = self._view.pod_raw(key)
            if raw is None:
                return
            pod = to_pod(raw, self._view.pod_model)
            rerouting = self._reroute_requested(key)
            if not pl.needs_update(pod, self._wall_clock()) and not (
                rerouting and pl.needs_reroute(pod, self._wall_clock())
            ):
                self._reroute_done(key)
                return
            self._route_pod(pod, self._pod_nets(raw, pod))
            self._reroute_done(key)
            if ann.is_routed(pod.annotations):
                return
            try:
                self._kube.patch_pod_annotations(
                    pod.namespace, pod.name, {ROUTED_ANNOTATION: ann.TRUE}
                )
            except KubeNotFoundError:
                LOG.info("pod %s deleted during its update, cleaning up", key)
                self._enqueue_vanished(key, raw)

    def _route_pod(self, pod: Pod, nets: list[PodNet]) -> None:
        """Write `pod`'s own routing rows through the routing reconciler (its annotations carry
        the allocation); ResourceNotReadyError when they cannot all be written yet (its node's
        join address, the external gateway), the reconciler routes it once they can."""
        if not self._routing.route_pod(pod):
            raise ResourceNotReadyError(
                f"pod {pod.key}: routing waits for its node {pod.node_name!r} or the external"
                " gateway"
            )

    def handle_update_pod_security(self, key: str) -> None:
        with self._key_mutex.locked(key):
            raw = self._view.pod_raw(key)
            if raw is None:
                return
            pod = to_pod(raw, self._view.pod_model)
            name = pl.get_name_by_pod(pod, self._keep_vm_ip)
            for net in self._pod_nets(raw, pod):
                if net.type is ProviderType.IPAM:
                    continue
                port = pod_name_to_port_name(name, pod.namespace, net.provider_name)
                info = self._nb.get_port(port)
                if info is None:
                    continue  # not created yet (the add owns it) or lost (inspection re-adds)
                to_sync = set(self._reapply_port_security(pod, net, info))
                # NOTE: without port security a port takes no part in any group.
                sgs = pl.security_groups_to_sync(pod, net)
                if sgs or info.external_ids.get(ext.SECURITY_GROUPS_KEY):
                    to_sync.update(self._nb.reconcile_port_sg(port, sgs))
                for sg in sorted(to_sync):
                    self._nb.sync_sg_ports(sg)

    def _reapply_port_security(self, pod: Pod, net: PodNet, info: PortInfo) -> list[str]:
        """Rewrite the port when its port_security column no longer matches the annotation.

        NOTE: kube-ovn v1.8 sets port_security only at creation (#1143), so a pod that gets
        `port_security=true` later never joins its security groups (#2343). Returns the groups
        whose membership this may change (the port's old and new ones).
        """
        allocation = ann.PodNetworkAnnotations.from_annotations(pod.annotations, net.provider_name)
        if not allocation.allocated or not allocation.ip_address or not allocation.mac_address:
            return []
        cached = self._view.subnet(allocation.logical_switch)
        subnet = cached if cached is not None else net.subnet
        v4, v6 = split_string_ip(allocation.ip_address)
        spec = pl.build_port_spec(
            pod,
            net,
            subnet,
            v4=v4,
            v6=v6,
            mac=allocation.mac_address,
            keep_vm_ip=self._keep_vm_ip,
        )
        if port_columns(spec).port_security == tuple(info.port_security):
            return []
        LOG.info("pod %s: port security of %s is now %s", pod.key, spec.name, spec.port_security)
        self._nb.create_port(spec)
        old = ext.split_sgs(info.external_ids.get(ext.SECURITY_GROUPS_KEY, ""))
        return [*old, *spec.security_groups, ext.DENY_ALL_SG]
