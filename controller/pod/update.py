"""handleUpdatePod and handleUpdatePodSecurity (kube-ovn pod.go).

* `handle_update_pod`: the default network's routing (router policies and the pod's entry in its
  node's address set for a distributed gateway; its own reroute policy for a north gateway or
  the EIP/SNAT external gateway) and NAT rules of `pod_logic.plan_update_pod`, then the removal
  of the pod's v1.8 src-ip static routes (after the policies exist: the pod never lacks a way
  out), then `routed=true`. A routed pod whose key is in the reroute set (`request_reroute`,
  the migration of v1.8 routes) is routed again the same way.
* `handle_update_pod_security`: re-associates the pod's ports with their security groups (every
  group listed), and re-applies the port_security column when the annotation changed (kube-ovn
  v1.8 sets it only at creation, #1143 / #2343).
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.core import annotations as ann
from controller.core.address import split_string_ip
from controller.core.constants import POLICY_SRC_IP, ROUTED_ANNOTATION
from controller.core.model import Pod, PodNet, ProviderType
from controller.core.naming import pod_name_to_port_name
from controller.kube.errors import NotFoundError as KubeNotFoundError
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
            if not pl.needs_update(pod, self._now()) and not (
                rerouting and pl.needs_reroute(pod, self._now())
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
        """Write the routing and NAT of `plan_update_pod` for `pod` (its annotations carry the
        allocation), then drop its v1.8 src-ip routes; raises what the plan or the NB raise."""
        plan = pl.plan_update_pod(
            pod,
            nets,
            node=self._view.node(pod.node_name),
            external_gw_config=self._view.external_gw_config(),
            cluster_router=self._config.cluster_router,
            enable_eip_snat=self._config.enable_eip_snat,
            keep_vm_ip=self._keep_vm_ip,
            join=self._view.subnet(self._config.node_switch),
        )
        for route in plan.routes:
            self._nb.add_static_route(route.policy, route.prefix, route.nexthop, route.router)
        for policy in plan.policies:
            self._nb.add_router_policy(
                policy.router,
                policy.priority,
                policy.match,
                policy.action,
                policy.nexthops,
                policy.external_ids,
            )
        for member in plan.members:
            self._nb.add_address_set_addresses(member.name, [member.ip], member.external_ids)
        for nat in plan.nats:
            self._nb.update_nat_rule(
                nat.policy,
                nat.logical_ip,
                nat.external_ip,
                nat.router,
                nat.logical_mac,
                nat.port,
            )
        for ip in plan.replaced_routes:
            # the v1.8 route of this address; its replacement is in place by now
            self._nb.delete_static_route(ip, plan.router, POLICY_SRC_IP)

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
