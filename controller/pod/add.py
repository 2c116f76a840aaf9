"""handleAddPod: allocate every unallocated network of a pod, then annotate it (kube-ovn pod.go).

The whole request is checked first (`pod_logic.check_pod_request`: the node switch, gateways,
MACs, security group names, IP CRs of other owners): a refusal records one Warning Event per
reason and allocates nothing. Then, for each network `pod_logic.need_allocate_subnets` names:
IPAM (or the address of a port an interrupted add left behind), the IP CR, and for OVN
networks the logical switch port and its security groups; then one merge patch of every
annotation that changed, with the pod's UID as a precondition. A pod already bound to a node
is routed in the same pass (update.py's `_route_pod`) and that patch carries `routed` too, as
kube-ovn v1.12's AddOrUpdatePod; an unbound pod, or one whose routing fails here, is left to
handleUpdatePod. An add that finds its pod re-created undoes what it allocated (and routed)
anew (`_roll_back_add`); one that fails keeps it for its retry and remembers it, and the retry
undoes what the pod no longer asks for, so a key never holds two subnets for one network. A
pod that vanished before the patch is handed to the delete queue (`_enqueue_vanished`).
Failures the user can fix become Warning Events (ValidatePodNetworkFailed,
AcquireAddressFailed, CreateOVNPortFailed).
"""

from __future__ import annotations

from dataclasses import replace

from controller import pod_logic as pl
from controller.apiclient.errors import AlreadyExistsError as KubeAlreadyExistsError
from controller.apiclient.errors import ConflictError as KubeConflictError
from controller.apiclient.errors import KubeApiError
from controller.apiclient.errors import NotFoundError as KubeNotFoundError
from controller.core import annotations as ann
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_CREATE_OVN_PORT_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    ROUTED_ANNOTATION,
)
from controller.core.errors import (
    ControllerError,
    InvalidPodNetworkError,
    ResourceNotReadyError,
)
from controller.core.model import Pod, PodNet, ProviderType, Subnet
from controller.core.naming import pod_name_to_port_name
from controller.core.object_fields import FrozenDict
from controller.ipam.errors import IPAMError
from controller.kube.api import KubeObject
from controller.ovn import external_ids as ext
from controller.ovn.api import OvnError
from controller.pod.base import LOG, PodControllerBase, to_pod


class AddHandlers(PodControllerBase):
    """`handle_add_pod` (the AddPod queue's handler) and its steps."""

    def handle_add_pod(self, key: str) -> None:
        with self._key_mutex.locked(key):
            raw = self._view.pod_raw(key)
            if raw is None:
                return
            self._add_pod(key, raw, to_pod(raw, self._view.pod_model))

    def _add_pod(self, key: str, raw: KubeObject, pod: Pod) -> None:
        try:
            pl.validate_pod_network(pod.annotations)
        except InvalidPodNetworkError as exc:
            self._warn(raw, REASON_VALIDATE_POD_NETWORK_FAILED, exc)
            raise
        nets = self._pod_nets(raw, pod)
        self._check_request(raw, pod, pl.need_allocate_subnets(pod, nets))
        annotations: dict[str, str] = dict(pod.annotations)
        taken: list[tuple[PodNet, str]] = []  # what this run allocated anew
        # what earlier failed adds of this key allocated and kept for their retry
        with self._deleting_lock:
            leftover = self._unfinished.pop(key, [])
        try:
            for net in pl.need_allocate_subnets(pod, nets):
                others = frozenset(n.subnet.name for n in nets if n is not net)
                annotations = self._allocate_net(
                    raw, pod, net, annotations, taken, leftover, others
                )
            self._roll_back_add(pod, _not_wanted(leftover, annotations))
            leftover = []
            changes = {k: v for k, v in annotations.items() if pod.annotations.get(k) != v}
            if not changes:
                return
            if self._route_with_add(raw, pod, nets, annotations):
                changes[ROUTED_ANNOTATION] = ann.TRUE
            self._kube.patch_pod_annotations(
                pod.namespace,
                pod.name,
                changes,
                op="replace" if pod.annotations else "add",
                uid=pod.uid or None,
            )
        except KubeNotFoundError:
            # NOTE: kube-ovn handleAddPod: the pod vanished between the NB write and the patch;
            # clean up what was just allocated.
            LOG.info("pod %s deleted during its add, cleaning up", key)
            self._enqueue_vanished(key, raw)
            return
        except KubeConflictError:
            # NOTE: kube-ovn v1.8 patches without a UID precondition, so the allocation of a
            # pod deleted meanwhile lands on its same-name successor. Here the patch carries the
            # UID: the successor's own add allocates for it, once this run's work is undone.
            LOG.info("pod %s was re-created during its add, undoing its allocation", key)
            self._roll_back_add(pod, [*leftover, *taken])
            return
        except Exception:
            # NOTE: what a failed add allocated is kept for its retry (the same address comes
            # back), and remembered: kube-ovn v1.8 forgets it, so when the retry asks for
            # another subnet (the annotation was fixed) the key holds addresses in both. Here
            # the retry undoes a kept allocation the pod no longer asks for.
            with self._deleting_lock:
                self._unfinished[key] = [*self._unfinished.get(key, []), *leftover, *taken]
            raise
        LOG.info("allocated %s for pod %s", annotations.get(IP_ADDRESS_ANNOTATION, ""), key)

    def _check_request(self, raw: KubeObject, pod: Pod, nets: list[PodNet]) -> None:
        """Refuse the whole request before anything is allocated (`pl.check_pod_request`):
        one Warning Event per distinct reason, then the error the worker acts on."""
        if not nets:
            return
        ns_nets: list[PodNet] | None = None

        def candidates(net: PodNet) -> tuple[Subnet, ...]:
            nonlocal ns_nets
            if ns_nets is None:
                try:
                    ns_nets = pl.get_ns_available_subnets(
                        self._view.namespace(pod.namespace), self._view.subnet_map()
                    )
                except ResourceNotReadyError:
                    ns_nets = []  # the pod's own subnet is still a candidate (_allocate_net)
            return pl.candidate_subnets(net, ns_nets)

        refusals = pl.check_pod_request(
            pod,
            nets,
            candidates,
            node_switch=self._config.node_switch,
            pod_name=pl.get_name_by_pod(pod, self._keep_vm_ip),
            ip_cr_owner=self._view.ip_cr_owner,
        )
        if not refusals:
            return
        error = pl.refusal_error(refusals)
        for reason, message in pl.group_by_reason(refusals).items():
            self._warn(raw, reason, ControllerError(message))
        raise error

    def _route_with_add(
        self, raw: KubeObject, pod: Pod, nets: list[PodNet], annotations: dict[str, str]
    ) -> bool:
        """Route a bound pod in its add's own pass (`pod_logic.routes_with_add`), so that one
        patch carries `allocated` and `routed` and no UpdatePod round follows. False when the
        pod is left to handleUpdatePod: not bound yet, or its routing failed (a gateway node
        not ready, the NB refusing), which that handler retries with its backoff. What this
        wrote for an address the add then gives back is undone by `_roll_back_add`."""
        allocated = replace(pod, annotations=FrozenDict(annotations))
        if not pl.routes_with_add(allocated, self._wall_clock()):
            return False
        try:
            default = pl.default_ovn_net(nets)
            if default is not None and default.subnet.name != allocated.annotations.get(
                LOGICAL_SWITCH_ANNOTATION, default.subnet.name
            ):
                # a static address found in another of the namespace's subnets: route that
                # one, as UpdatePod would from the annotated pod
                nets = self._pod_nets(raw, allocated, record=False)
            self._route_pod(allocated, nets)
        except (ControllerError, OvnError) as exc:
            LOG.info("pod %s: routing left to its update: %s", pod.key, exc)
            return False
        return True

    def _allocate_net(
        self,
        raw: KubeObject,
        pod: Pod,
        net: PodNet,
        annotations: dict[str, str],
        taken: list[tuple[PodNet, str]],
        leftover: list[tuple[PodNet, str]],
        others: frozenset[str] = frozenset(),
    ) -> dict[str, str]:
        """Allocate one network: IPAM, IP CR, LSP; return the annotations with its keys.
        `(net, subnet)` is appended to `taken` when the key did not hold that subnet before; a
        `leftover` allocation of this network in a subnet the plan no longer names is undone
        first (its port has the name this network's port is about to take), and so is what an
        earlier incarnation of the pod left in a subnet neither this network's plan nor one of
        the pod's `others` networks names (`_drop_stale`)."""
        request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
        ns_nets: list[PodNet] = []
        if not request.is_random:
            namespace = self._view.namespace(pod.namespace)
            try:
                ns_nets = pl.get_ns_available_subnets(namespace, self._view.subnet_map())
            except ResourceNotReadyError as exc:
                # kube-ovn acquireAddress ignores this error too: the pod's own subnet is
                # still tried (a broken namespace entry must not block static pods).
                LOG.warning("pod %s: namespace subnets not usable: %s", pod.key, exc)
        plan = pl.plan_address_request(pod, net, ns_nets, keep_vm_ip=self._keep_vm_ip)
        planned = {s.name for s in plan.subnets}
        stale = [
            (n, s) for n, s in leftover if n.provider_name == net.provider_name and s not in planned
        ]
        if stale:
            self._roll_back_add(pod, stale)
            leftover[:] = [item for item in leftover if item not in stale]
        self._drop_stale(pod, net, plan.key, planned | others)
        try:
            pl.validate_static_request(plan)
        except InvalidPodNetworkError as exc:
            self._warn(raw, REASON_VALIDATE_POD_NETWORK_FAILED, exc)
            raise
        held = {a.subnet for a in self._ipam.get_pod_address(plan.key)}
        try:
            reused = self._reuse_leftover_port(pod, net, plan)
            if reused is not None:
                v4, v6, mac, subnet = reused
            else:
                v4, v6, mac, subnet = pl.acquire_address(self._ipam, plan, self._view.nodes())
        except Exception as exc:
            self._warn(raw, REASON_ACQUIRE_ADDRESS_FAILED, exc)
            raise
        if subnet.name not in held:
            taken.append((net, subnet.name))
        vm_name = ""
        is_vm, owner = pl.is_vm_pod(pod)
        if is_vm and self._keep_vm_ip:
            vm_name = owner
        vlan = self._view.vlan(subnet.vlan) if subnet.vlan else None
        try:
            allocation = pl.build_pod_allocation(
                net, subnet, v4=v4, v6=v6, mac=mac, vlan=vlan, vm_name=vm_name
            )
            pl.validate_pod_cidr(subnet.cidr_block, allocation.ip_address)
        except ControllerError as exc:
            self._warn_with_reason(raw, exc)
            raise
        try:
            self._write_ip_cr(pod, net, subnet, allocation.ip_address, mac)
        except KubeAlreadyExistsError as exc:
            # another object's IP CR of this name, which the cache had not shown yet
            self._warn(raw, REASON_ACQUIRE_ADDRESS_FAILED, exc)
            raise
        if net.type is not ProviderType.IPAM:
            spec = pl.build_port_spec(
                pod, net, subnet, v4=v4, v6=v6, mac=mac, keep_vm_ip=self._keep_vm_ip
            )
            try:
                self._nb.create_port(spec)
            except OvnError as exc:
                self._warn(raw, REASON_CREATE_OVN_PORT_FAILED, exc)
                raise
            for sg in pl.security_groups_to_sync(pod, net):
                self._nb.sync_sg_ports(sg)
        return pl.build_pod_annotations(
            annotations, net, allocation, pod_nic_type=self._config.pod_nic_type
        )

    def _reuse_leftover_port(
        self, pod: Pod, net: PodNet, plan: pl.AddressRequest
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
        if plan.mode is not pl.AddressMode.RANDOM or net.type is ProviderType.IPAM:
            return None
        subnet = plan.subnets[0]
        if any(a.subnet == subnet.name for a in self._ipam.get_pod_address(plan.key)):
            return None
        name = pod_name_to_port_name(
            pl.get_name_by_pod(pod, self._keep_vm_ip), pod.namespace, net.provider_name
        )
        port = self._nb.get_port(name)
        if (
            port is None
            or port.switch != subnet.name
            or port.external_ids.get(ext.POD_KEY) != plan.key
            or not port.addresses
        ):
            return None
        mac, *ips = port.addresses[0].split()
        if not ips or any(self._ipam.get_ip_owner(ip, subnet.name) is not None for ip in ips):
            return None
        try:
            v4, v6, got_mac = self._ipam.get_static_address(
                plan.key, ",".join(ips), plan.mac or mac, subnet.name
            )
        except IPAMError as exc:
            LOG.info("not reusing port %s of %s: %s", name, plan.key, exc)
            return None
        LOG.info("reusing %s %s of the leftover port %s", ",".join(ips), mac, name)
        return v4, v6, got_mac, subnet

    def _write_ip_cr(self, pod: Pod, net: PodNet, subnet: Subnet, ip: str, mac: str) -> None:
        body = pl.build_ip_cr(
            pod_name=pl.get_name_by_pod(pod, self._keep_vm_ip),
            ip=ip,
            mac=mac,
            subnet=subnet.name,
            namespace=pod.namespace,
            node_name=pod.node_name,
            provider=net.provider_name,
            pod_type=pl.get_pod_type(pod),
            node_switch=self._config.node_switch,
        )
        # NOTE: kube-ovn GETs the IP CR first; when our informer cache has none (a new pod) the
        # create goes straight out, which saves one API round trip per new pod.
        name = body["metadata"]["name"]
        try:
            self._kube.create_or_update_ip(body, likely_absent=not self._view.ip_cr_cached(name))
        except KubeApiError as exc:
            # NOTE: kube-ovn v1.8 handleAddPod only logs this failure and the pod goes on
            # without its IP CR for good (nothing re-creates it once the pod is annotated). We
            # fail the add before the annotation patch instead, so the retry writes it (the
            # allocation is stable per key, the port create idempotent); later kube-ovn does too.
            LOG.error("failed to create IP %s: %s", name, exc)
            raise

    def _drop_stale(
        self, pod: Pod, net: PodNet, key: str, wanted: set[str] | frozenset[str]
    ) -> None:
        """Free what an earlier incarnation of this pod left for this network in a subnet the
        pod no longer asks for: its port of this network's name on another switch, and the
        key's addresses in subnets none of the pod's networks names.

        NOTE: kube-ovn v1.8 leaves both: a StatefulSet moved to another subnet whose re-created
        pod is cached before the old pod's delete runs (that delete is then skipped as a
        re-creation) cannot create its port ("already exists on switch"), and a force-deleted
        StatefulSet pod that comes back on another subnet keeps its old address too.
        """
        name = pod_name_to_port_name(
            pl.get_name_by_pod(pod, self._keep_vm_ip), pod.namespace, net.provider_name
        )
        port = self._nb.get_port(name) if net.type is not ProviderType.IPAM else None
        if port is not None and port.switch not in wanted:
            if port.external_ids.get(ext.POD_KEY, key) != key:
                return  # another key's port of that name: not ours to judge
            LOG.info("pod %s: deleting its stale port %s on %s", key, name, port.switch)
            self._nb.delete_port(name)
        for address in self._ipam.get_pod_address(key):
            if address.subnet not in wanted and self._ipam.release_address(key, address.subnet):
                LOG.info("pod %s: released its stale address in %s", key, address.subnet)

    def _roll_back_add(self, pod: Pod, taken: list[tuple[PodNet, str]]) -> None:
        """Undo what an add allocated anew (`taken`): port, IP CR, then the address, so the
        address is never free while a port still carries it. A step that fails keeps the
        address (logged): the gc or the pod's own delete finishes it."""
        key = pl.get_pod_key(pod, self._keep_vm_ip)
        pod_name = pl.get_name_by_pod(pod, self._keep_vm_ip)
        for net, subnet in taken:
            port = pod_name_to_port_name(pod_name, pod.namespace, net.provider_name)
            try:
                if net.is_default and net.provider_name == OVN_PROVIDER:
                    # the add may have routed the address in its own pass
                    for address in self._ipam.get_pod_address(key):
                        if address.subnet == subnet:
                            self._unroute_address(pod, subnet, address.ip)
                if net.type is not ProviderType.IPAM:
                    self._nb.delete_port(port)
                if not self._foreign_ip_cr(port, pod.namespace, pod_name):
                    self._kube.delete_ip(port)
            except (OvnError, KubeApiError) as exc:
                LOG.error("pod %s: cannot undo %s in %s, keeping it: %s", key, port, subnet, exc)
                continue
            self._ipam.release_address(key, subnet)
            LOG.info("pod %s: undid the allocation of %s in %s", key, port, subnet)


def _not_wanted(
    leftover: list[tuple[PodNet, str]], annotations: dict[str, str]
) -> list[tuple[PodNet, str]]:
    """The kept allocations whose network the finished annotations put in another subnet."""
    return [
        (net, subnet)
        for net, subnet in leftover
        if ann.get(annotations, LOGICAL_SWITCH_ANNOTATION_TEMPLATE, net.provider_name) != subnet
    ]
