"""The pod controller: informer callbacks, four work queues and their handlers (kube-ovn pod.go).

`PodController` ports kube-ovn v1.8.18 `pkg/controller/pod.go`. The handlers only orchestrate:
they read the informer caches, ask `controller.pod_logic` what to do, and write through the
ports (`KubeApi`, `NbClient`, `IPAM`, `EventRecorder`).

* `on_add` / `on_update` / `on_delete` (informer callbacks) are cheap, never raise, return at
  once when this replica is not the leader, and accept `DeletedFinalStateUnknown` tombstones.
  They only enqueue keys ("ns/name").
* `handle_add_pod`: allocate every unallocated network (IPAM), write its IP CR and, for OVN
  networks, its logical switch port, then patch all annotations at once.
* `handle_update_pod`: the default network's src-ip route (distributed gateway, north gateway,
  or the EIP/SNAT external gateway) and NAT rules, then `routed=true`.
* `handle_delete_pod`: routes and NAT, ports, IP CRs, IPAM release, with the StatefulSet / VM
  keep-IP rules of `pod_logic.decide_delete`.
* `handle_update_pod_security`: re-associates the pod's ports with their security groups (every
  group listed), and re-applies the port_security column when the annotation changed.
* `inspect_pods`: the periodic repair pass (kube-ovn inspectPod).
* `nad_event_handler()`: callbacks for the NAD informer that re-queue pods waiting for a NAD.

Every handler locks the pod key with the shared `KeyMutex`, so the handlers of one pod never run
concurrently. Failures the user can fix become Warning Events with kube-ovn's reasons.

The deliberate deviations from v1.8 are listed in docs/deviations.md (the pod controller).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller import pod_logic as pl
from controller.cache import DeletedFinalStateUnknown, Indexer, ResourceEventHandlerFuncs
from controller.config import Config
from controller.core import annotations as ann
from controller.core.address import split_string_ip
from controller.core.constants import (
    DEFAULT_VPC,
    EVENT_TYPE_WARNING,
    EXTERNAL_GATEWAY_CONFIG,
    EXTERNAL_GATEWAY_CONFIG_NAMESPACE,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_CREATE_OVN_PORT_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    ROUTED_ANNOTATION,
)
from controller.core.errors import (
    ControllerError,
    InvalidPodNetworkError,
    MalformedObjectError,
    PermanentError,
    ResourceNotReadyError,
)
from controller.core.model import (
    Namespace,
    NetworkAttachmentDefinition,
    Node,
    Pod,
    PodNet,
    ProviderType,
    StatefulSet,
    Subnet,
    VirtualMachine,
    Vlan,
    Vpc,
)
from controller.core.naming import pod_name_to_port_name
from controller.core.subnet_spec import format_subnet_spec
from controller.ipam import IPAM
from controller.ipam.errors import IPAMError
from controller.kube.api import EventRecorder, KubeApi, KubeObject
from controller.kube.errors import KubeApiError
from controller.kube.errors import NotFoundError as KubeNotFoundError
from controller.ovn import external_ids as ext
from controller.ovn.api import NbClient, OvnError, PortInfo
from controller.ovn.logic import port_columns
from controller.queues import Clock, RateLimitingQueue, RealClock
from controller.runtime.keymutex import KeyMutex
from controller.runtime.metrics import ControllerMetrics
from controller.runtime.worker import start_workers

LOG = logging.getLogger(__name__)

_SECURITY_SUFFIXES = (".kubernetes.io/port_security", ".kubernetes.io/security_groups")


@dataclass(frozen=True, slots=True)
class PodQueues:
    """The four pod queues; every item is a pod key "ns/name"."""

    add: RateLimitingQueue[str]
    update: RateLimitingQueue[str]
    delete: RateLimitingQueue[str]
    security: RateLimitingQueue[str]

    def all(self) -> tuple[RateLimitingQueue[str], ...]:
        return (self.add, self.update, self.delete, self.security)


@dataclass(frozen=True, slots=True)
class _Deleting:
    """The last seen object of a pod whose delete is pending, and when it may run."""

    obj: KubeObject
    not_before: float | None = None  # on the controller's clock; None: at once


class PodController:
    """kube-ovn's pod controller for the default network and multus attachments.

    Guarantees:

    * handlers of one pod key never overlap (KeyMutex), and a handler is idempotent: running it
      again after a failure converges to the same state (IPAM allocation is stable per key, NB
      verbs and IP CR writes are idempotent, annotation patches only touch our keys);
    * an address is released from IPAM only by the delete handler, after the port is gone;
    * a delete of an older incarnation never touches a re-created pod of the same name.
    """

    def __init__(
        self,
        *,
        config: Config,
        pods: Indexer,
        namespaces: Indexer,
        subnets: Indexer,
        nodes: Indexer,
        ips: Indexer,
        vlans: Indexer,
        vpcs: Indexer,
        configmaps: Indexer,
        statefulsets: Indexer | None,
        nads: Indexer | None,
        vms: Indexer | None,
        kube: KubeApi,
        nb: NbClient,
        ipam: IPAM,
        recorder: EventRecorder,
        key_mutex: KeyMutex,
        queues: PodQueues,
        is_leader: Callable[[], bool],
        metrics: ControllerMetrics | None = None,
        clock: Clock | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._config = config
        self._pods = pods
        self._namespaces = namespaces
        self._subnets = subnets
        self._parsed_subnets = _SubnetParseCache()
        self._nodes = nodes
        self._ips = ips
        self._vlans = vlans
        self._vpcs = vpcs
        self._configmaps = configmaps
        self._statefulsets = statefulsets
        self._nads = nads
        self._vms = vms
        self._kube = kube
        self._nb = nb
        self._ipam = ipam
        self._recorder = recorder
        self._key_mutex = key_mutex
        self.queues = queues
        self._is_leader = is_leader
        self._metrics = metrics
        # Monotonic, shared with the queues (delete deadlines, handler durations).
        self._clock: Clock = clock if clock is not None else RealClock()
        # Wall time for pod liveness (deletionTimestamp arithmetic).
        self._now = now if now is not None else _utcnow
        self._keep_vm_ip = config.enable_keep_vm_ip
        self._deleting_lock = threading.Lock()
        self._deleting: dict[str, _Deleting] = {}

    # --- informer callbacks (kube-ovn enqueueAddPod / enqueueUpdatePod / enqueueDeletePod) ------

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self._is_leader():
            _guard("add", self._on_add, obj)

    def on_update(self, old: Any, new: Any) -> None:
        if self._is_leader():
            _guard("update", self._on_update, old, new)

    def on_delete(self, obj: Any) -> None:
        if self._is_leader():
            _guard("delete", self._on_delete, obj)

    def _on_add(self, obj: Any) -> None:
        pod = _pod_or_none(obj)
        if pod is None:
            return
        decision = pl.classify_add(
            pod,
            self._now(),
            keep_vm_ip=self._keep_vm_ip,
            owner_to_delete=lambda: self._owner_to_delete(pod),
        )
        self._dispatch(pod.key, obj, decision)

    def _on_update(self, old: Any, new: Any) -> None:
        old_pod, new_pod = _pod_or_none(old), _pod_or_none(new)
        if old_pod is None or new_pod is None:
            return
        now = self._now()
        decision = pl.classify_update(
            old_pod,
            new_pod,
            now,
            owner_to_delete=lambda: self._owner_to_delete(new_pod),
            providers=lambda: self._providers_or_none(old_pod, new_pod),
        )
        self._dispatch(new_pod.key, new, decision)
        if decision.action is not pl.PodAction.DELETE and pl.needs_add_after_edit(
            old_pod, new_pod, now
        ):
            self.queues.add.add(new_pod.key)

    def _on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            raw = obj.obj
            if raw is None:
                namespace, _, name = obj.key.rpartition("/")
                LOG.warning("pod %s deleted while unwatched, cleaning up by name", obj.key)
                raw = {"metadata": {"namespace": namespace, "name": name}}
            obj = raw
        pod = _pod_or_none(obj)
        if pod is None:
            return
        self._dispatch(pod.key, obj, pl.classify_delete(pod))

    def nad_event_handler(self) -> ResourceEventHandlerFuncs:
        """Informer callbacks for NetworkAttachmentDefinitions: when a NAD appears or changes,
        re-queue the add of every live pod that asks for it and lacks its network.

        NOTE: kube-ovn has no NAD handler: a pod created before its NAD is retried with a
        backoff that keeps growing (up to the limiter's maximum) while the NAD is missing.
        """

        def changed(obj: Any) -> None:
            if not self._is_leader():
                return
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            if not isinstance(meta, Mapping):
                return
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            now = self._now()
            for raw in self._pods.list():
                pod = _pod_or_none(raw)
                if pod is not None and pl.waits_for_nad(pod, namespace, name, now):
                    self.queues.add.add(pod.key)

        def added(obj: Any) -> None:
            _guard("nad add", changed, obj)

        def updated(old: Any, new: Any) -> None:
            _guard("nad update", changed, new)

        return ResourceEventHandlerFuncs(added, updated, None)

    def _dispatch(self, key: str, obj: KubeObject, decision: pl.EnqueueDecision) -> None:
        if decision.action is pl.PodAction.ADD:
            self.queues.add.add(key)
        elif decision.action is pl.PodAction.UPDATE:
            self.queues.update.add(key)
        elif decision.action is pl.PodAction.DELETE:
            self._enqueue_delete(key, obj, decision.delay)
        if decision.update_security:
            self.queues.security.add(key)

    def _enqueue_delete(self, key: str, obj: KubeObject, delay: float = 0.0) -> None:
        """Remember `obj` as the pod to clean up and queue its key (after `delay` seconds)."""
        not_before = self._clock.now() + delay if delay > 0 else None
        with self._deleting_lock:
            previous = self._deleting.get(key)
            # Keep the earlier deadline, as the delaying queue does.
            if (
                previous is not None
                and not_before is not None
                and (previous.not_before is None or previous.not_before < not_before)
            ):
                not_before = previous.not_before
            self._deleting[key] = _Deleting(obj, not_before)
        if delay > 0:
            self.queues.delete.add_after(key, delay)
        else:
            self.queues.delete.add(key)

    def _enqueue_vanished(self, key: str, raw: KubeObject) -> None:
        """A handler found its pod gone: clean up, unless the informer already asked to.

        NOTE: kube-ovn `deletePodQueue.AddRateLimited(pod)`. The informer's own delete event
        carries the final object (with its deletionTimestamp, which the StatefulSet keep-IP rule
        reads), so it is never overwritten by the handler's older copy; the rate-limited add gives
        that event time to arrive.
        """
        with self._deleting_lock:
            self._deleting.setdefault(key, _Deleting(raw))
        self.queues.delete.add_rate_limited(key)

    def pending_deletes(self) -> dict[str, KubeObject]:
        """The deleting-pod map (a copy), for tests and debugging."""
        with self._deleting_lock:
            return {k: v.obj for k, v in self._deleting.items()}

    # --- handleAddPod ----------------------------------------------------------------------------

    def handle_add_pod(self, key: str) -> None:
        with self._key_mutex.locked(key):
            raw = self._pods.get_by_key(key)
            if raw is None:
                return
            self._add_pod(key, raw, _to_pod(raw))

    def _add_pod(self, key: str, raw: KubeObject, pod: Pod) -> None:
        try:
            pl.validate_pod_network(pod.annotations)
        except InvalidPodNetworkError as exc:
            self._warn(raw, REASON_VALIDATE_POD_NETWORK_FAILED, exc)
            raise
        nets = self._pod_nets(raw, pod)
        annotations: dict[str, str] = dict(pod.annotations)
        for net in pl.need_allocate_subnets(pod, nets):
            annotations = self._allocate_net(raw, pod, net, annotations)
        changes = {k: v for k, v in annotations.items() if pod.annotations.get(k) != v}
        if not changes:
            return
        try:
            self._kube.patch_pod_annotations(
                pod.namespace, pod.name, changes, op="replace" if pod.annotations else "add"
            )
        except KubeNotFoundError:
            # NOTE: kube-ovn handleAddPod: the pod vanished between the NB write and the patch;
            # clean up what was just allocated.
            LOG.info("pod %s deleted during its add, cleaning up", key)
            self._enqueue_vanished(key, raw)
            return
        LOG.info("allocated %s for pod %s", annotations.get(IP_ADDRESS_ANNOTATION, ""), key)

    def _allocate_net(
        self, raw: KubeObject, pod: Pod, net: PodNet, annotations: dict[str, str]
    ) -> dict[str, str]:
        """Allocate one network: IPAM, IP CR, LSP; return the annotations with its keys."""
        request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
        ns_nets: list[PodNet] = []
        if not request.is_random:
            namespace = self._namespace(pod.namespace)
            ns_nets = pl.get_ns_available_subnets(namespace, self._subnet_map())
        plan = pl.plan_address_request(pod, net, ns_nets, keep_vm_ip=self._keep_vm_ip)
        try:
            pl.validate_static_request(plan)
        except InvalidPodNetworkError as exc:
            self._warn(raw, REASON_VALIDATE_POD_NETWORK_FAILED, exc)
            raise
        try:
            reused = self._reuse_leftover_port(pod, net, plan)
            if reused is not None:
                v4, v6, mac, subnet = reused
            else:
                v4, v6, mac, subnet = pl.acquire_address(self._ipam, plan, self._node_list())
        except Exception as exc:
            self._warn(raw, REASON_ACQUIRE_ADDRESS_FAILED, exc)
            raise
        vm_name = ""
        is_vm, owner = pl.is_vm_pod(pod)
        if is_vm and self._keep_vm_ip:
            vm_name = owner
        vlan = self._vlan(subnet.vlan) if subnet.vlan else None
        try:
            allocation = pl.build_pod_allocation(
                net, subnet, v4=v4, v6=v6, mac=mac, vlan=vlan, vm_name=vm_name
            )
            pl.validate_pod_cidr(subnet.cidr_block, allocation.ip_address)
        except ControllerError as exc:
            self._warn_with_reason(raw, exc)
            raise
        self._write_ip_cr(pod, net, subnet, allocation.ip_address, mac)
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
                plan.key, ",".join(ips), mac, subnet.name
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
            self._kube.create_or_update_ip(body, likely_absent=self._ips.get_by_key(name) is None)
        except KubeApiError as exc:
            # NOTE: kube-ovn v1.8 handleAddPod only logs this failure and the pod goes on
            # without its IP CR for good (nothing re-creates it once the pod is annotated). We
            # fail the add before the annotation patch instead, so the retry writes it (the
            # allocation is stable per key, the port create idempotent); later kube-ovn does too.
            LOG.error("failed to create IP %s: %s", name, exc)
            raise

    # --- handleUpdatePod -------------------------------------------------------------------------

    def handle_update_pod(self, key: str) -> None:
        with self._key_mutex.locked(key):
            raw = self._pods.get_by_key(key)
            if raw is None:
                return
            pod = _to_pod(raw)
            if not pl.needs_update(pod, self._now()):
                return
            plan = pl.plan_update_pod(
                pod,
                self._pod_nets(raw, pod),
                node=self._node(pod.node_name),
                external_gw_config=self._external_gw_config(),
                cluster_router=self._config.cluster_router,
                enable_eip_snat=self._config.enable_eip_snat,
                keep_vm_ip=self._keep_vm_ip,
            )
            for route in plan.routes:
                self._nb.add_static_route(route.policy, route.prefix, route.nexthop, route.router)
            for nat in plan.nats:
                self._nb.update_nat_rule(
                    nat.policy,
                    nat.logical_ip,
                    nat.external_ip,
                    nat.router,
                    nat.logical_mac,
                    nat.port,
                )
            try:
                self._kube.patch_pod_annotations(
                    pod.namespace, pod.name, {ROUTED_ANNOTATION: ann.TRUE}
                )
            except KubeNotFoundError:
                LOG.info("pod %s deleted during its update, cleaning up", key)
                self._enqueue_vanished(key, raw)

    # --- handleDeletePod -------------------------------------------------------------------------

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

    def _delete_pod(self, key: str, pod: Pod) -> None:
        current_raw = self._pods.get_by_key(key)
        current = _pod_or_none(current_raw) if current_raw is not None else None
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
            if not address.ip.strip():
                continue
            router = self._router_of(address.subnet)
            self._nb.delete_static_route(address.ip, router)
            self._nb.delete_nat_rule(address.ip, router)
        listed = self._nb.list_pod_ports(pod_name, pod.namespace)
        owner = _OwnerLookup(self, pod)
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
            if not decision.keep_ip_cr:
                self._kube.delete_ip(port)
        if not decision.keep_ip_cr:
            for provider in ann.attachment_providers_to_release(pod.annotations):
                name = pod_name_to_port_name(pod_name, pod.namespace, provider)
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
        LOG.info("released the network of pod %s", key)

    # --- handleUpdatePodSecurity -----------------------------------------------------------------

    def handle_update_pod_security(self, key: str) -> None:
        with self._key_mutex.locked(key):
            raw = self._pods.get_by_key(key)
            if raw is None:
                return
            pod = _to_pod(raw)
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
        raw_subnet = self._subnets.get_by_key(allocation.logical_switch)
        subnet = self._subnet_of(raw_subnet) if raw_subnet is not None else net.subnet
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

    # --- inspectPod ------------------------------------------------------------------------------

    def inspect_pods(self) -> None:
        """kube-ovn inspectPod: re-add pods whose port is lost, re-route unrouted ones."""
        now = self._now()
        subnets = self._subnet_list()
        namespaces: dict[str, Namespace | None] = {}
        # NOTE: one read of the NB ports per pass rather than a lookup per pod (every pod, every
        # 20 s). A name missing from it (a port made since, or one without the vendor id) is
        # looked up on its own, so the answer is the same as asking for each port.
        listed = {port.name for port in self._nb.list_ports()}

        def port_exists(name: str) -> bool:
            return name in listed or self._nb.get_port(name) is not None

        for raw in self._pods.list():
            pod = _pod_or_none(raw)
            if pod is None or not pl.may_need_inspection(pod, now):
                continue
            try:
                nets = self._pod_nets(
                    raw, pod, record=False, subnets=subnets, namespaces=namespaces
                )
            except Exception as exc:
                LOG.debug("inspect: skipping pod %s: %s", pod.key, exc)
                continue
            result = pl.inspect_pod(
                pod,
                nets,
                port_exists,
                now,
                keep_vm_ip=self._keep_vm_ip,
            )
            if result.lost_providers:
                self._repair_lost_ports(pod, result.lost_providers)
            elif result.needs_update:
                self.queues.update.add(pod.key)
                if self._metrics is not None:
                    self._metrics.inspection_repair("reroute")
        if self._metrics is not None:
            self._metrics.inspection_run()

    def _repair_lost_ports(self, pod: Pod, providers: tuple[str, ...]) -> None:
        keys = [k for provider in providers for k in ann.allocation_state_keys(provider)]
        LOG.warning("lsp lost for pod %s (%s), re-allocating", pod.key, ", ".join(providers))
        try:
            self._kube.delete_pod_annotations(pod.namespace, pod.name, keys)
        except KubeNotFoundError:
            return
        except KubeApiError as exc:
            LOG.error("inspect: failed to reset pod %s: %s", pod.key, exc)
            return
        self.queues.add.add(pod.key)
        if self._metrics is not None:
            self._metrics.inspection_repair("readd")

    # --- workers ---------------------------------------------------------------------------------

    def run_workers(self, worker_num: int, stop: threading.Event) -> list[threading.Thread]:
        """Start `worker_num` workers per queue (kube-ovn: 3 each) and a thread that shuts the
        queues down once `stop` is set (which is what ends the workers). Returns all threads."""
        if worker_num < 1:
            raise ValueError(f"worker_num must be >= 1, not {worker_num}")
        q = self.queues
        threads = start_workers(
            [
                (q.add, self.handle_add_pod, worker_num),
                (q.update, self.handle_update_pod, worker_num),
                (q.delete, self.handle_delete_pod, worker_num),
                (q.security, self.handle_update_pod_security, worker_num),
            ],
            stop,
            metrics=self._metrics,
            clock=self._clock,
        )

        def shut_down_on_stop() -> None:
            stop.wait()
            for queue in self.queues.all():
                queue.shut_down()

        stopper = threading.Thread(target=shut_down_on_stop, name="pod-queues-stopper", daemon=True)
        stopper.start()
        return [*threads, stopper]

    # --- reads from the caches -------------------------------------------------------------------

    def _pod_nets(
        self,
        raw: KubeObject,
        pod: Pod,
        *,
        record: bool = True,
        subnets: list[Subnet] | None = None,
        namespaces: dict[str, Namespace | None] | None = None,
    ) -> list[PodNet]:
        """kube-ovn getPodKubeovnNets over the caches; a failure with an Event reason is
        recorded on the pod (unless `record` is False). `subnets` may pass a pre-read list,
        `namespaces` a memo of parsed namespaces (filled here) for a pass over many pods."""
        try:
            self._check_named_subnet(pod)
            if namespaces is None:
                namespace = self._namespace(pod.namespace)
            elif pod.namespace in namespaces:
                namespace = namespaces[pod.namespace]
            else:
                namespace = namespaces[pod.namespace] = self._namespace(pod.namespace)
            return pl.get_pod_kubeovn_nets(
                pod,
                namespace,
                subnets if subnets is not None else self._subnet_list(),
                self._nads_of(pod),
            )
        except ControllerError as exc:
            if record:
                self._warn_with_reason(raw, exc)
            raise

    def _providers_or_none(self, old: Pod, new: Pod) -> list[str] | None:
        """The providers whose security annotations classify_update compares."""
        # NOTE: without any port_security / security_groups key changing there is nothing to
        # compare, so skip computing the nets (which may GET NADs from inside the callback).
        if not any(
            key.endswith(_SECURITY_SUFFIXES)
            for key in ann.changed_keys(
                old.annotations, new.annotations, {*old.annotations, *new.annotations}
            )
        ):
            return []
        try:
            return [n.provider_name for n in self._pod_nets({}, new, record=False)]
        except Exception:
            return None

    def _namespace(self, name: str) -> Namespace | None:
        raw = self._namespaces.get_by_key(name)
        return None if raw is None else Namespace.from_dict(raw)

    def _subnet_list(self) -> list[Subnet]:
        """The well-formed cached subnets, sorted by name ("the first subnet of a provider" must
        not depend on cache order). A malformed one is left out: it must not stop every other
        pod (the subnet controller logs it; a pod naming it is told by `_check_named_subnet`)."""
        out = []
        for raw in self._subnets.list():
            subnet = self._parsed_subnets.get(raw).subnet
            if subnet is not None:
                out.append(subnet)
        return sorted(out, key=lambda s: s.name)

    def _subnet_of(self, raw: KubeObject) -> Subnet:
        """`Subnet.from_dict` through the parse cache (MalformedObjectError as it raises)."""
        parsed = self._parsed_subnets.get(raw)
        if parsed.subnet is None:
            raise MalformedObjectError(parsed.parse_error)
        return parsed.subnet

    def _check_named_subnet(self, pod: Pod) -> None:
        """A subnet the pod's `logical_switch` names exists but is malformed (wrong types, or a
        spec the subnet controller refuses, so IPAM never registers it): say so, rather than
        "not found" / "not registered" (retryable: fixing the subnet heals the pod)."""
        name = pod.annotations.get(LOGICAL_SWITCH_ANNOTATION, "")
        raw = self._subnets.get_by_key(name) if name else None
        if raw is None:
            return
        parsed = self._parsed_subnets.get(raw)
        error = parsed.parse_error or parsed.spec_error
        if error:
            raise ResourceNotReadyError(
                f"subnet {name} of pod {pod.key} is malformed: {error}",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )

    def _subnet_map(self) -> dict[str, Subnet]:
        return {s.name: s for s in self._subnet_list()}

    def _node_list(self) -> list[Node]:
        return [Node.from_dict(n) for n in self._nodes.list()]

    def _node(self, name: str) -> Node | None:
        raw = self._nodes.get_by_key(name) if name else None
        return None if raw is None else Node.from_dict(raw)

    def _vlan(self, name: str) -> Vlan | None:
        raw = self._vlans.get_by_key(name)
        return None if raw is None else Vlan.from_dict(raw)

    def _external_gw_config(self) -> Mapping[str, str] | None:
        raw = self._configmaps.get_by_key(
            f"{EXTERNAL_GATEWAY_CONFIG_NAMESPACE}/{EXTERNAL_GATEWAY_CONFIG}"
        )
        if raw is None:
            return None
        data = raw.get("data") or {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}

    def _router_of(self, subnet_name: str) -> str:
        """The logical router of a subnet's VPC (kube-ovn: vpc.status.router)."""
        raw = self._subnets.get_by_key(subnet_name)
        if raw is None:
            raise ResourceNotReadyError(f"subnet {subnet_name} not found")
        subnet = self._subnet_of(raw)
        vpc_raw = self._vpcs.get_by_key(subnet.vpc)
        router = Vpc.from_dict(vpc_raw).router if vpc_raw is not None else ""
        if router:
            return router
        if subnet.vpc == DEFAULT_VPC:
            return self._config.cluster_router
        raise ResourceNotReadyError(f"vpc {subnet.vpc} of subnet {subnet_name} not ready")

    def _nads_of(self, pod: Pod) -> dict[tuple[str, str], NetworkAttachmentDefinition]:
        found: dict[tuple[str, str], NetworkAttachmentDefinition] = {}
        for element in pl.pod_attachment_requests(pod):
            ref = (element.namespace, element.name)
            if ref in found:
                continue
            if self._nads is not None:
                raw = self._nads.get_by_key(f"{element.namespace}/{element.name}")
            else:
                raw = self._kube.get_network_attachment_definition(*ref)
            if raw is not None:
                found[ref] = NetworkAttachmentDefinition.from_dict(raw)
        return found

    def _get_owner(self, pod: Pod) -> StatefulSet | VirtualMachine | None:
        """The pod's StatefulSet or VirtualMachine (None when NotFound); API errors propagate."""
        is_sts, sts_name = pl.is_statefulset_pod(pod)
        if is_sts:
            key = f"{pod.namespace}/{sts_name}"
            if self._statefulsets is not None:
                raw = self._statefulsets.get_by_key(key)
            else:
                raw = self._kube.get_statefulset(pod.namespace, sts_name)
            return None if raw is None else StatefulSet.from_dict(raw)
        is_vm, vm_name = pl.is_vm_pod(pod)
        if is_vm:
            key = f"{pod.namespace}/{vm_name}"
            if self._vms is not None:
                raw = self._vms.get_by_key(key)
            else:
                raw = self._kube.get_virtual_machine(pod.namespace, vm_name)
            return None if raw is None else VirtualMachine.from_dict(raw)
        return None

    def _owner_to_delete(self, pod: Pod) -> bool:
        """kube-ovn isStatefulSetPodToDel / isVmPodToDel; a failed GET counts as "keep"."""
        return _OwnerLookup(self, pod).to_delete()

    # --- events ----------------------------------------------------------------------------------

    def _warn(self, raw: KubeObject, reason: str, exc: BaseException) -> None:
        LOG.error("pod %s: %s: %s", _describe(raw), reason, exc)
        if raw:
            self._recorder.event(raw, EVENT_TYPE_WARNING, reason, str(exc))

    def _warn_with_reason(self, raw: KubeObject, exc: ControllerError) -> None:
        if exc.reason:
            self._warn(raw, exc.reason, exc)


class _OwnerLookup:
    """Fetches a sts/VM pod's owner once for both decide_delete callbacks (kube-ovn GETs twice)."""

    def __init__(self, controller: PodController, pod: Pod) -> None:
        self._controller = controller
        self._pod = pod
        self._fetched = False
        self._owner: StatefulSet | VirtualMachine | None = None
        self._error: Exception | None = None

    def _fetch(self) -> StatefulSet | VirtualMachine | None:
        if not self._fetched:
            self._fetched = True
            try:
                self._owner = self._controller._get_owner(self._pod)
            except (KubeApiError, MalformedObjectError) as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        return self._owner

    def to_delete(self) -> bool:
        try:
            owner = self._fetch()
        except (KubeApiError, MalformedObjectError) as exc:
            # NOTE: kube-ovn: a GET error other than NotFound means "not to delete".
            LOG.warning("cannot read the owner of pod %s: %s", self._pod.key, exc)
            return False
        if pl.is_vm_pod(self._pod)[0] and not pl.is_statefulset_pod(self._pod)[0]:
            return pl.is_vm_pod_to_del(owner if isinstance(owner, VirtualMachine) else None)
        return pl.is_statefulset_pod_to_del(
            self._pod, owner if isinstance(owner, StatefulSet) else None
        )

    def check_pod_to_del(self) -> bool:
        owner = self._fetch()  # a failed GET propagates: the delete is retried
        ctl = self._controller
        return pl.append_check_pod_to_del(
            self._pod, owner, ctl._namespace(self._pod.namespace), ctl._subnet_map()
        )


# --- helpers -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ParsedSubnet:
    """One subnet object's parse: the model (None if malformed) and each check's error text."""

    subnet: Subnet | None
    parse_error: str
    spec_error: str


class _SubnetParseCache:
    """Parsed subnets keyed by (name, resourceVersion): every handler run and every inspection
    pass reads all subnets, and re-parsing them was a steady share of the controller's CPU.

    A cached object never changes under the same resourceVersion (the informer replaces it), so
    an entry is never stale; one without a resourceVersion is parsed every time. Bounded (the
    whole map is dropped when full: old versions are never read again) and thread-safe.
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _ParsedSubnet] = {}

    def get(self, raw: KubeObject) -> _ParsedSubnet:
        meta = raw.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(version, str) or not version or not isinstance(name, str):
            return _parse_subnet(raw)
        key = (name, version)
        with self._lock:
            found = self._entries.get(key)
        if found is not None:
            return found
        parsed = _parse_subnet(raw)
        with self._lock:
            if len(self._entries) >= self._max:
                self._entries.clear()
            self._entries[key] = parsed
        return parsed


def _parse_subnet(raw: KubeObject) -> _ParsedSubnet:
    try:
        subnet = Subnet.from_dict(raw)
    except MalformedObjectError as exc:
        return _ParsedSubnet(None, str(exc), "")
    try:
        spec = raw.get("spec") or {}
        format_subnet_spec(subnet.name, spec if isinstance(spec, Mapping) else {})
    except MalformedObjectError as exc:
        return _ParsedSubnet(subnet, "", str(exc))
    return _ParsedSubnet(subnet, "", "")


def _guard(event: str, callback: Callable[..., None], *args: Any) -> None:
    """Informer callbacks must never raise into the informer: log a bug instead."""
    try:
        callback(*args)
    except Exception:
        LOG.exception("pod %s event handler failed", event)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _pod_or_none(obj: Any) -> Pod | None:
    """The model of an informer object; None (logged) for anything that is not a valid pod."""
    try:
        return Pod.from_dict(obj)
    except MalformedObjectError as exc:
        LOG.error("ignoring malformed pod: %s", exc)
        return None


def _to_pod(raw: KubeObject) -> Pod:
    """The model of a cached pod; a malformed pod is permanent until the pod itself changes."""
    try:
        return Pod.from_dict(raw)
    except MalformedObjectError as exc:
        raise PermanentError(str(exc)) from None


def _describe(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if isinstance(meta, Mapping):
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return "?"
