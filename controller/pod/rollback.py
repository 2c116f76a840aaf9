"""Undoing allocations an add no longer wants, port first and address last.

`AddRollback.roll_back` undoes what an add allocated (its routing rows, port, IP CR, then the
IPAM address, so an address is never free while a port still carries it): for an add whose pod
was re-created meanwhile, and for a retry whose pod now asks for another subnet.
`drop_stale` frees what an earlier incarnation of the pod left for a network in a subnet its
plan no longer names. A step that fails keeps the address (logged): the gc or the pod's own
delete finishes it.
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.apiclient.errors import KubeApiError
from controller.core.constants import OVN_PROVIDER
from controller.core.model import Pod, PodNet, ProviderType
from controller.core.naming import pod_name_to_port_name
from controller.ovn import external_ids as ext
from controller.ovn.api import OvnError
from controller.pod.context import LOG, PodContext
from controller.pod.routes import PodRoutes


class AddRollback:
    """Gives back allocations of a pod key (see the module docstring)."""

    def __init__(self, ctx: PodContext, routes: PodRoutes) -> None:
        self._ctx = ctx
        self._routes = routes

    def roll_back(self, pod: Pod, taken: list[tuple[PodNet, str]]) -> None:
        """Undo the allocations `taken` ((network, subnet) pairs) of `pod`'s key."""
        ctx = self._ctx
        key = pl.get_pod_key(pod, ctx.keep_vm_ip)
        pod_name = pl.get_name_by_pod(pod, ctx.keep_vm_ip)
        for net, subnet in taken:
            port = pod_name_to_port_name(pod_name, pod.namespace, net.provider_name)
            try:
                if net.is_default and net.provider_name == OVN_PROVIDER:
                    # the add may have routed the address in its own pass
                    for address in ctx.ipam.get_pod_address(key):
                        if address.subnet == subnet:
                            self._routes.release(pod, subnet, address.ip)
                if net.type is not ProviderType.IPAM:
                    ctx.nb.delete_port(port)
                if not ctx.foreign_ip_cr(port, pod.namespace, pod_name):
                    ctx.kube.delete_ip(port)
            except (OvnError, KubeApiError) as exc:
                LOG.error("pod %s: cannot undo %s in %s, keeping it: %s", key, port, subnet, exc)
                continue
            ctx.ipam.release_address(key, subnet)
            LOG.info("pod %s: undid the allocation of %s in %s", key, port, subnet)

    def drop_stale(self, plan: pl.NetAllocationPlan) -> None:
        """Free what an earlier incarnation of this pod left for the plan's network in a subnet
        the pod no longer asks for: its port of this network's name on another switch, and the
        key's addresses in subnets none of the pod's networks names.

        NOTE: kube-ovn v1.8 leaves both: a StatefulSet moved to another subnet whose re-created
        pod is cached before the old pod's delete runs (that delete is then skipped as a
        re-creation) cannot create its port ("already exists on switch"), and a force-deleted
        StatefulSet pod that comes back on another subnet keeps its old address too.
        """
        ctx = self._ctx
        key, wanted, name = plan.key, plan.wanted_subnets, plan.port_name
        port = ctx.nb.get_port(name) if plan.writes_port else None
        if port is not None and port.switch not in wanted:
            if port.external_ids.get(ext.POD_KEY, key) != key:
                return  # another key's port of that name: not ours to judge
            LOG.info("pod %s: deleting its stale port %s on %s", key, name, port.switch)
            ctx.nb.delete_port(name)
        for address in ctx.ipam.get_pod_address(key):
            if address.subnet not in wanted and ctx.ipam.release_address(key, address.subnet):
                LOG.info("pod %s: released its stale address in %s", key, address.subnet)
