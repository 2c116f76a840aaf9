"""One network of a pod's add: execute its plan (`pod_logic.plan_net_allocation`), or undo it.

`NetAllocator.allocate` reads what the plan needs from the caches (the namespace's subnets for
a static or ip_pool request), asks for the plan, and carries it out: undo what the plan no
longer wants (`AddRollback`), take an address (the port an interrupted add left behind, or
IPAM), write the IP CR and, for an OVN network, the logical switch port and its security
groups; it returns the pod's annotations with the network's keys. Failures the user can fix
become Warning Events (ValidatePodNetworkFailed, AcquireAddressFailed, CreateOVNPortFailed).
`AddRollback` gives back what an add allocated and no longer wants, and what an earlier
incarnation of the pod left in a subnet the plan no longer names.
"""

from __future__ import annotations

import dataclasses

from controller import pod_logic as pl
from controller.apiclient.errors import AlreadyExistsError as KubeAlreadyExistsError
from controller.apiclient.errors import KubeApiError
from controller.core.constants import (
    OVN_PROVIDER,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_CREATE_OVN_PORT_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
)
from controller.core.errors import ControllerError, ResourceNotReadyError
from controller.core.model import Pod, PodNet, ProviderType, Subnet
from controller.core.naming import pod_name_to_port_name
from controller.ipam.errors import IPAMError
from controller.kube.api import KubeObject
from controller.ovn import external_ids as ext
from controller.ovn.api import OvnError
from controller.pod.context import LOG, PodContext


class AddRollback:
    """Gives back allocations of a pod key, port first and address last.

    `roll_back` undoes what an add allocated (its routing rows, port, IP CR, then the IPAM
    address, so an address is never free while a port still carries it): for an add whose pod
    was re-created meanwhile, and for a retry whose pod now asks for another subnet. A step
    that fails keeps the address (logged): the gc or the pod's own delete finishes it.
    """

    def __init__(self, ctx: PodContext) -> None:
        self._ctx = ctx

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
                            ctx.unroute(pod, subnet, address.ip)
                if net.type is not ProviderType.IPAM:
                    ctx.nb.delete_port(port)
                if not ctx.foreign_ip_cr(port, pod.namespace, pod_name):
                    ctx.kube.delete_ip(port)
            except (OvnError, KubeApiError) as exc:
                LOG.error("pod %s: cannot undo %s in %s, keeping it: %s", key, port, subnet, exc)
                continue
            ctx.ipam.release_address(key, subnet)
            LOG.info("pod %s: undid the allocation of %s in %s", key, port, subnet)

    def drop_stale(self, pod: Pod, plan: pl.NetAllocationPlan) -> None:
        """Free what an earlier incarnation of `pod` left for the plan's network in a subnet
        the pod no longer asks for: its port of this network's name on another switch, and the
        key's addresses in subnets none of the pod's networks names, each after its routing
        rows (`PodContext.unroute`, as the delete does; a failure keeps the address, logged).

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
        stale: dict[str, list[str]] = {}
        for address in ctx.ipam.get_pod_address(key):
            if address.subnet not in wanted:
                stale.setdefault(address.subnet, []).append(address.ip)
        # the incarnation that held them may have run on another node: no node narrows the
        # release, every node's rows of the subnet are looked at
        holder = dataclasses.replace(pod, node_name="")
        for subnet, ips in stale.items():
            try:
                ctx.unroute(holder, subnet, ",".join(ips))
            except OvnError as exc:
                LOG.error(
                    "pod %s: cannot unroute its stale address in %s, keeping it: %s",
                    key,
                    subnet,
                    exc,
                )
                continue
            if ctx.ipam.release_address(key, subnet):
                LOG.info("pod %s: released its stale address in %s", key, subnet)


class NetAllocator:
    """Allocates one network of a pod (see the module docstring)."""

    def __init__(self, ctx: PodContext, rollback: AddRollback) -> None:
        self._ctx = ctx
        self._rollback = rollback

    def allocate(
        self,
        raw: KubeObject,
        pod: Pod,
        net: PodNet,
        annotations: dict[str, str],
        taken: list[tuple[PodNet, str]],
        leftover: list[tuple[PodNet, str]],
        others: frozenset[str] = frozenset(),
    ) -> dict[str, str]:
        """Execute the plan of one network (`pod_logic.plan_net_allocation`): undo what it no
        longer wants, take an address, write the IP CR and port; return the annotations with
        its keys. `(net, subnet)` is appended to `taken` when the key did not hold that subnet
        before; the `leftover` entries the plan undoes are removed from it."""
        plan = pl.plan_net_allocation(
            pod,
            net,
            self._ns_nets(pod) if pl.needs_namespace_subnets(pod, net) else [],
            keep_vm_ip=self._ctx.keep_vm_ip,
            leftover=leftover,
            others=others,
        )
        if plan.stale:
            self._rollback.roll_back(pod, list(plan.stale))
            leftover[:] = [item for item in leftover if item not in plan.stale]
        self._rollback.drop_stale(pod, plan)
        if plan.refusal is not None:
            self._ctx.warn(raw, REASON_VALIDATE_POD_NETWORK_FAILED, plan.refusal)
            raise plan.refusal
        held = {a.subnet for a in self._ctx.ipam.get_pod_address(plan.key)}
        try:
            reused = self._reuse_leftover_port(plan) if plan.may_reuse_port else None
            if reused is not None:
                v4, v6, mac, subnet = reused
            else:
                v4, v6, mac, subnet = pl.acquire_address(
                    self._ctx.ipam, plan.request, self._ctx.view.nodes()
                )
        except Exception as exc:
            self._ctx.warn(raw, REASON_ACQUIRE_ADDRESS_FAILED, exc)
            raise
        if subnet.name not in held:
            taken.append((net, subnet.name))
        vlan = self._ctx.view.vlan(subnet.vlan) if subnet.vlan else None
        try:
            allocation = pl.build_pod_allocation(
                net, subnet, v4=v4, v6=v6, mac=mac, vlan=vlan, vm_name=plan.vm_name
            )
            pl.validate_pod_cidr(subnet.cidr_block, allocation.ip_address)
        except ControllerError as exc:
            self._ctx.warn_with_reason(raw, exc)
            raise
        try:
            self._write_ip_cr(pod, plan, subnet.name, allocation.ip_address, mac)
        except KubeAlreadyExistsError as exc:
            # another object's IP CR of this name, which the cache had not shown yet
            self._ctx.warn(raw, REASON_ACQUIRE_ADDRESS_FAILED, exc)
            raise
        if plan.writes_port:
            spec = pl.build_port_spec(
                pod, net, subnet, v4=v4, v6=v6, mac=mac, keep_vm_ip=self._ctx.keep_vm_ip
            )
            try:
                self._ctx.nb.create_port(spec)
            except OvnError as exc:
                self._ctx.warn(raw, REASON_CREATE_OVN_PORT_FAILED, exc)
                raise
            for sg in plan.security_groups:
                self._ctx.nb.sync_sg_ports(sg)
        return pl.build_pod_annotations(
            annotations, net, allocation, pod_nic_type=self._ctx.config.pod_nic_type
        )

    def _ns_nets(self, pod: Pod) -> list[PodNet]:
        """The namespace's subnets as networks, the candidates of a static or ip_pool request."""
        namespace = self._ctx.view.namespace(pod.namespace)
        try:
            return pl.get_ns_available_subnets(namespace, self._ctx.view.subnet_map())
        except ResourceNotReadyError as exc:
            # kube-ovn acquireAddress ignores this error too: the pod's own subnet is
            # still tried (a broken namespace entry must not block static pods).
            LOG.warning("pod %s: namespace subnets not usable: %s", pod.key, exc)
            return []

    def _reuse_leftover_port(
        self, plan: pl.NetAllocationPlan
    ) -> tuple[str, str, str, Subnet] | None:
        """The address of the port an interrupted add left for this pod, taken again in IPAM.

        A controller killed between a pod's port write and its annotation patch leaves the port
        (and IP CR) behind, and the rebuilt IPAM does not know the address: a fresh random draw
        would give the pod a second address and MAC while the dead controller's patch, still in
        flight at the API server, may land afterwards with the first ones. Reusing what the port
        says keeps every writer agreeing. Only for a random request whose key holds nothing in
        this subnet yet (a retry in this process keeps IPAM's allocation); None when there is no
        such port or its address is taken, and the caller draws as usual.
        """
        subnet = plan.request.subnets[0]
        if any(a.subnet == subnet.name for a in self._ctx.ipam.get_pod_address(plan.key)):
            return None
        name = plan.port_name
        port = self._ctx.nb.get_port(name)
        if (
            port is None
            or port.switch != subnet.name
            or port.external_ids.get(ext.POD_KEY) != plan.key
            or not port.addresses
        ):
            return None
        mac, *ips = port.addresses[0].split()
        if not ips or any(self._ctx.ipam.get_ip_owner(ip, subnet.name) is not None for ip in ips):
            return None
        try:
            v4, v6, got_mac = self._ctx.ipam.get_static_address(
                plan.key, ",".join(ips), plan.request.mac or mac, subnet.name
            )
        except IPAMError as exc:
            LOG.info("not reusing port %s of %s: %s", name, plan.key, exc)
            return None
        LOG.info("reusing %s %s of the leftover port %s", ",".join(ips), mac, name)
        return v4, v6, got_mac, subnet

    def _write_ip_cr(
        self, pod: Pod, plan: pl.NetAllocationPlan, subnet: str, ip: str, mac: str
    ) -> None:
        body = pl.build_ip_cr(
            pod_name=plan.owner_name,
            ip=ip,
            mac=mac,
            subnet=subnet,
            namespace=pod.namespace,
            node_name=pod.node_name,
            provider=plan.net.provider_name,
            pod_type=plan.pod_type,
            node_switch=self._ctx.config.node_switch,
        )
        # NOTE: kube-ovn GETs the IP CR first; when our informer cache has none (a new pod) the
        # create goes straight out, which saves one API round trip per new pod.
        name = body["metadata"]["name"]
        try:
            self._ctx.kube.create_or_update_ip(
                body, likely_absent=not self._ctx.view.ip_cr_cached(name)
            )
        except KubeApiError as exc:
            # NOTE: kube-ovn v1.8 handleAddPod only logs this failure and the pod goes on
            # without its IP CR for good (nothing re-creates it once the pod is annotated). We
            # fail the add before the annotation patch instead, so the retry writes it (the
            # allocation is stable per key, the port create idempotent); later kube-ovn does too.
            LOG.error("failed to create IP %s: %s", name, exc)
            raise
