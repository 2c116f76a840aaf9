"""The pod controller's decisions, as pure functions over already-fetched objects (no I/O).

Each function mirrors one kube-ovn v1.8.18 `pkg/controller/pod.go` helper (named in its
docstring) so the handlers of `controller/pod.py` only fetch, call these, and write. Where kube-ovn
does an API GET in the middle of a decision (StatefulSet / VirtualMachine owner checks), the caller
passes either the fetched object (`None` meaning NotFound) or a zero-argument callable that is
invoked lazily, at most once, exactly where kube-ovn would do the GET.

Errors: `InvalidPodNetworkError` when the pod's own annotations are wrong (retrying cannot help),
`ResourceNotReadyError` when something the pod depends on (namespace annotation, subnet, NAD, vlan)
is missing or not ready yet, a plain `RetryableError` for a NAD whose config does not parse or a
subnet attached twice (both fixed by a cluster change). They carry kube-ovn's Event reason where
kube-ovn emits one; deviation: the failures to resolve a pod's networks that the pod or the user
caused (a subnet the pod names is unknown, a NAD is missing or its config does not parse, the
same subnet twice, the default network on a non-OVN subnet) carry `ValidatePodNetworkFailed`,
where kube-ovn only logs them and the user sees nothing but a pending pod. The transient ones of
start-up (namespace not annotated yet) stay silent.

How the handlers use them (kube-ovn.md sections):

* informer callbacks (1.2): `classify_add`, `classify_update`, `classify_delete`, plus
  `needs_add_after_edit` (an annotation edit of an unallocated pod re-queues the add);
* handleAddPod (1.5): `validate_pod_network` -> `pod_attachment_requests` (NADs to GET) ->
  `get_pod_kubeovn_nets` -> `need_allocate_subnets` -> per net `get_ns_available_subnets`,
  `plan_address_request`, `validate_static_request`, `acquire_address` (IPAM) ->
  `build_pod_allocation` (vlan),
  `validate_pod_cidr`, `build_pod_annotations`, `build_ip_cr` (for `KubeApi.create_or_update_ip`),
  `build_port_spec` / `security_groups_to_sync` for OVN nets -> one annotation patch;
* handleUpdatePod (1.7): `needs_update` -> `plan_update_pod` -> patch `routed`;
* handleDeletePod (1.8): `is_replaced_by` -> `decide_delete` (with `is_statefulset_pod_to_del`
  / `is_vm_pod_to_del` and `append_check_pod_to_del`) -> `ports_to_delete`,
  `annotations.attachment_providers_to_release`;
* inspection (1.10): `inspect_pod` -> remove `annotations.allocation_state_keys`.

Deliberate deviations from v1.8 (each is a bug there, see kube-ovn.md):
* the delayed delete of a terminating pod waits `terminationGracePeriodSeconds`, 30 when unset
  (kube-ovn dereferences a nil pointer);
* a StatefulSet pod whose name has no numeric ordinal gets no ip_pool entry (kube-ovn used index 0);
* `validate_pod_cidr` is meant to be called with the CIDR of the subnet the address actually came
  from (kube-ovn used the requested subnet's even when a static IP came from another one).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from controller import annotations as ann
from controller.constants import (
    ALLOCATED_ANNOTATION,
    ATTACHMENT_NETWORK_ANNOTATION,
    CIDR_ANNOTATION,
    DEFAULT_NETWORK_ANNOTATION,
    DEFAULT_VPC,
    EGRESS_RATE_ANNOTATION,
    EIP_ANNOTATION,
    EXTERNAL_GATEWAY_ADDR_KEY,
    EXTERNAL_GATEWAY_TYPE_DISTRIBUTED,
    GATEWAY_TYPE_DISTRIBUTED,
    INGRESS_RATE_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    KUBEOVN_API_VERSION,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION,
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    NETWORK_TYPE_GENEVE,
    NETWORK_TYPE_VLAN,
    NORTH_GATEWAY_ANNOTATION,
    OVN_PROVIDER,
    POD_TYPE_STATEFULSET,
    POD_TYPE_VIRTUAL_MACHINE,
    POLICY_SRC_IP,
    PORT_SECURITY_ANNOTATION_TEMPLATE,
    PROTOCOL_DUAL,
    PROTOCOL_IPV4,
    PROTOCOL_IPV6,
    REASON_GET_VLAN_INFO_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    SECURITY_GROUP_ANNOTATION_TEMPLATE,
    SNAT_ANNOTATION,
    SUBNET_NAME_LABEL,
    annotation_key,
)
from controller.errors import InvalidPodNetworkError, ResourceNotReadyError, RetryableError
from controller.ipam.errors import IPAMError, NoAvailableError
from controller.model import (
    Namespace,
    NetworkAttachmentDefinition,
    NetworkSelectionElement,
    Node,
    Pod,
    PodNet,
    ProviderType,
    StatefulSet,
    Subnet,
    VirtualMachine,
    Vlan,
)
from controller.naming import ip_cr_name, pod_key, pod_name_to_port_name
from controller.netutil import (
    check_cidrs,
    check_protocol,
    cidr_contain_ip,
    get_string_ip,
    is_valid_mac,
    parse_cidr,
    parse_ip,
    split_string_ip,
)
from controller.network_attachment import (
    ipam_provider_name,
    is_default_net,
    is_ovn_network,
    load_net_conf,
    ovn_provider_name,
    parse_pod_network_annotation,
)
from controller.ovn.api import PortSpec

#: Kubernetes' default `terminationGracePeriodSeconds`.
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30

# --- pod classification ----------------------------------------------------------------------


def is_pod_alive(pod: Pod, now: datetime) -> bool:
    """kube-ovn `isPodAlive`; `now` must be timezone-aware (models use UTC)."""
    if now.tzinfo is None:
        raise ValueError("is_pod_alive needs a timezone-aware 'now'")
    if pod.deletion_timestamp is not None and pod.deletion_grace_period_seconds is not None:
        deadline = pod.deletion_timestamp + timedelta(seconds=pod.deletion_grace_period_seconds)
        if now > deadline:
            return False
    if pod.phase == "Succeeded" and pod.restart_policy != "Always":
        return False
    if pod.phase == "Failed" and pod.restart_policy == "Never":
        return False
    return not (pod.phase == "Failed" and pod.reason == "Evicted")


def is_statefulset_pod(pod: Pod) -> tuple[bool, str]:
    """kube-ovn `isStatefulSetPod`: an owner of kind StatefulSet with apiVersion `apps/...`."""
    owner = pod.statefulset_owner()
    return (True, owner.name) if owner else (False, "")


def is_vm_pod(pod: Pod) -> tuple[bool, str]:
    """kube-ovn `isVmPod`: an owner VirtualMachineInstance (`kubevirt.io...`); its name == VM's."""
    owner = pod.vm_owner()
    return (True, owner.name) if owner else (False, "")


_ORDINAL = re.compile(r"^[+-]?[0-9]+$")


def statefulset_ordinal(pod_name: str) -> int | None:
    """The integer after the last `-` of a StatefulSet pod name, None when it is not one."""
    suffix = pod_name.rsplit("-", 1)[-1]
    if not _ORDINAL.match(suffix):
        return None
    return int(suffix)


def get_name_by_pod(pod: Pod, keep_vm_ip: bool) -> str:
    """kube-ovn `getNameByPod`: the VM name under keep-vm-ip, else the pod name."""
    if keep_vm_ip:
        is_vm, vm_name = is_vm_pod(pod)
        if is_vm:
            return vm_name
    return pod.name


def get_pod_key(pod: Pod, keep_vm_ip: bool) -> str:
    """The IPAM / delete-lock key `ns/<getNameByPod>`."""
    return pod_key(pod.namespace, get_name_by_pod(pod, keep_vm_ip))


def get_pod_type(pod: Pod) -> str:
    """kube-ovn `getPodType`: "StatefulSet", "VirtualMachine" or ""."""
    if is_statefulset_pod(pod)[0]:
        return POD_TYPE_STATEFULSET
    if is_vm_pod(pod)[0]:
        return POD_TYPE_VIRTUAL_MACHINE
    return ""


def need_allocate_subnets(pod: Pod, nets: Sequence[PodNet]) -> list[PodNet]:
    """kube-ovn `needAllocateSubnets`: nothing for finished pods, else the unallocated nets."""
    if pod.phase in ("Succeeded", "Failed"):
        return []
    return [n for n in nets if not ann.is_allocated(pod.annotations, n.provider_name)]


# --- owner checks (StatefulSet / KubeVirt VM) ------------------------------------------------


def is_statefulset_pod_to_del(pod: Pod, sts: StatefulSet | None) -> bool:
    """kube-ovn `isStatefulSetPodToDel` over the fetched StatefulSet (`None` = NotFound).

    The caller maps any other GET error to False, as kube-ovn does.
    """
    if sts is None or sts.deletion_timestamp is not None:
        return True
    ordinal = statefulset_ordinal(pod.name)
    if ordinal is None:
        return False
    return ordinal >= sts.replicas


def is_vm_pod_to_del(vm: VirtualMachine | None) -> bool:
    """kube-ovn `isVmPodToDel`: the VM is gone (`None`) or being deleted."""
    return vm is None or vm.deletion_timestamp is not None


def append_check_pod_to_del(
    pod: Pod,
    owner: StatefulSet | VirtualMachine | None,
    namespace: Namespace | None,
    subnets: Mapping[str, Subnet],
) -> bool:
    """kube-ovn `appendCheckPodToDel`: must a sts/VM pod's network be released?

    `owner` is the fetched StatefulSet / VirtualMachine (`None` = NotFound); any other GET error
    must be raised by the caller instead (kube-ovn would dereference nil). Raises
    ResourceNotReadyError where kube-ovn returns (false, err): missing namespace or pod subnet.
    """
    if namespace is None:
        raise ResourceNotReadyError(f"namespace {pod.namespace} not found")
    if owner is None:
        return True
    owner_subnet = owner.template_annotations.get(LOGICAL_SWITCH_ANNOTATION, "")
    pod_ls = pod.annotations.get(LOGICAL_SWITCH_ANNOTATION, "").strip()
    if not owner_subnet:
        ns_subnets = namespace.annotations.get(LOGICAL_SWITCH_ANNOTATION, "")
        if ns_subnets and pod_ls and pod_ls not in ns_subnets.split(","):
            return True
    pod_subnet = subnets.get(pod_ls)
    if pod_subnet is None:
        raise ResourceNotReadyError(f"subnet {pod_ls!r} of pod {pod.key} not found")
    if not cidr_contain_ip(pod_subnet.cidr_block, pod.annotations.get(IP_ADDRESS_ANNOTATION, "")):
        return True
    return bool(owner_subnet) and pod_subnet.name != owner_subnet


# --- enqueue decisions (informer callbacks) --------------------------------------------------


class PodAction(enum.Enum):
    IGNORE = "ignore"
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class EnqueueDecision:
    """What an informer event asks for.

    `action` names the queue (DELETE: the delete queue gets the pod object, after `delay`
    seconds when > 0); `update_security` additionally asks for the update-security queue.
    """

    action: PodAction
    delay: float = 0.0
    update_security: bool = False


IGNORE = EnqueueDecision(PodAction.IGNORE)


def termination_delay(pod: Pod) -> float:
    """How long kube-ovn waits before cleaning up a terminating pod (lost-node protection)."""
    grace = pod.termination_grace_period_seconds
    return float(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS if grace is None else max(grace, 0))


def classify_add(
    pod: Pod, now: datetime, *, keep_vm_ip: bool, owner_to_delete: Callable[[], bool]
) -> EnqueueDecision:
    """kube-ovn `enqueueAddPod` (network-policy fan-out excluded).

    `owner_to_delete()` is `is_statefulset_pod_to_del` / `is_vm_pod_to_del` for the pod's owner;
    it is only called for a dead sts pod or a dead VM pod under keep-vm-ip, and for a terminating
    sts or VM pod.

    NOTE: kube-ovn schedules the cleanup of a terminating pod only from an update event; a pod
    first seen terminating (the initial list after a restart) would keep its network until the
    object is removed, which for a pod on a lost node may be never. Here the add schedules it
    for when the pod's deletionTimestamp passes, with the update path's owner rules.
    """
    if pod.host_network:
        return IGNORE
    is_sts = is_statefulset_pod(pod)[0]
    is_vm = is_vm_pod(pod)[0]
    if not is_pod_alive(pod, now):
        if is_sts or (is_vm and keep_vm_ip):
            return EnqueueDecision(PodAction.DELETE) if owner_to_delete() else IGNORE
        return EnqueueDecision(PodAction.DELETE)
    if pod.deletion_timestamp is not None and ((not is_sts and not is_vm) or owner_to_delete()):
        remaining = (pod.deletion_timestamp - now).total_seconds()
        return EnqueueDecision(PodAction.DELETE, delay=max(remaining, 0.0))
    allocated = ann.is_allocated(pod.annotations)
    routed = ann.is_routed(pod.annotations)
    # NOTE: recovers an update lost during a leader change (kube-ovn enqueueAddPod).
    if allocated and not routed and pod.host_ip and pod.pod_ip:
        return EnqueueDecision(PodAction.UPDATE)
    if allocated:
        return IGNORE
    return EnqueueDecision(PodAction.ADD)


def classify_delete(pod: Pod) -> EnqueueDecision:
    """kube-ovn `enqueueDeletePod`: every non-hostNetwork pod goes to the delete queue."""
    return IGNORE if pod.host_network else EnqueueDecision(PodAction.DELETE)


def security_changed(
    old: Mapping[str, str], new: Mapping[str, str], providers: Iterable[str]
) -> bool:
    """Did `port_security` or `security_groups` change for any of the providers?"""
    for provider in providers:
        keys = (
            annotation_key(PORT_SECURITY_ANNOTATION_TEMPLATE, provider),
            annotation_key(SECURITY_GROUP_ANNOTATION_TEMPLATE, provider),
        )
        if ann.changed_keys(old, new, keys):
            return True
    return False


def classify_update(
    old: Pod,
    new: Pod,
    now: datetime,
    *,
    owner_to_delete: Callable[[], bool],
    providers: Callable[[], Sequence[str] | None],
) -> EnqueueDecision:
    """kube-ovn `enqueueUpdatePod` (network-policy fan-out excluded).

    `owner_to_delete()` is asked for every sts or VM pod (regardless of keep-vm-ip, as kube-ovn);
    `providers()` returns the provider names of the pod's nets (`get_pod_kubeovn_nets`), or None
    when they cannot be computed, which skips the security check as kube-ovn does.
    """
    if old.resource_version == new.resource_version or new.host_network:
        return IGNORE
    is_sts = is_statefulset_pod(new)[0]
    is_vm = is_vm_pod(new)[0]
    if not is_sts and not is_vm:
        if not is_pod_alive(new, now):
            return EnqueueDecision(PodAction.DELETE)
        if new.deletion_timestamp is not None:
            return EnqueueDecision(PodAction.DELETE, delay=termination_delay(new))
    elif owner_to_delete():
        return EnqueueDecision(PodAction.DELETE, delay=termination_delay(new))
    action = PodAction.IGNORE
    if ann.is_allocated(new.annotations) and not ann.is_routed(new.annotations) and new.node_name:
        action = PodAction.UPDATE
    names = providers()
    update_security = names is not None and security_changed(
        old.annotations, new.annotations, names
    )
    return EnqueueDecision(action, update_security=update_security)


def needs_add_after_edit(old: Pod, new: Pod, now: datetime) -> bool:
    """Must an update re-queue the add? For a live pod: yes when a network lost its `allocated`
    mark (inspection found its port gone), or when the annotations of a pod with no allocated
    network changed.

    NOTE: kube-ovn v1.8 retries an invalid pod with backoff forever; we stop retrying
    (`InvalidPodNetworkError` is permanent), so the edit that fixes the annotation must bring the
    pod back to the add queue. Our own allocation patch sets `allocated` and is not re-queued.
    The lost-mark case covers an add that ran on a cache older than inspection's reset.
    """
    if new.host_network or new.deletion_timestamp is not None or not is_pod_alive(new, now):
        return False
    allocated = ann.allocated_providers(new.annotations)
    if set(ann.allocated_providers(old.annotations)) - set(allocated):
        return True
    return not allocated and old.annotations != new.annotations


# --- delete flow -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteDecision:
    """`skip`: keep everything (LSP, IP CR, IPAM); else clean up, keeping the IP CR if asked."""

    skip: bool
    keep_ip_cr: bool = False


def decide_delete(
    pod: Pod,
    *,
    keep_vm_ip: bool,
    owner_to_delete: Callable[[], bool],
    check_pod_to_del: Callable[[], bool],
) -> DeleteDecision:
    """kube-ovn `handleDeletePod` steps 5-6 for the pod object taken off the delete queue.

    `owner_to_delete()` is `is_*_pod_to_del`; `check_pod_to_del()` is
    `append_check_pod_to_del` and may raise a RetryableError (kube-ovn's `err != nil`), treated
    as "do not release"; any other exception (a failed owner GET) propagates so the delete is
    retried. Both are only called for sts pods and VM pods under keep-vm-ip.
    """
    is_sts = is_statefulset_pod(pod)[0]
    is_vm = is_vm_pod(pod)[0] and keep_vm_ip
    if not is_sts and not is_vm:
        return DeleteDecision(skip=False)
    to_del = owner_to_delete()
    try:
        check_del, check_ok = check_pod_to_del(), True
    except RetryableError:  # kube-ovn's (false, err): keep the network
        check_del, check_ok = False, False
    release = to_del or (check_del and check_ok)
    if pod.deletion_timestamp is not None and not release:
        return DeleteDecision(skip=True)
    # NOTE: a finished launcher pod (Failed, e.g. restartPolicy Never) is not alive and is
    # cleaned up like a deleted one, but its VM still wants the address for its next launcher
    # pod: keep the network as for a VM pod being deleted (kube-ovn #2709).
    if is_vm and pod.phase in ("Failed", "Succeeded") and not release:
        return DeleteDecision(skip=True)
    # NOTE: VM pods never keep their IP CR here (kube-ovn only sets keepIpCR for sts pods).
    keep = is_sts and not to_del and not check_del and check_ok
    return DeleteDecision(skip=False, keep_ip_cr=keep)


def is_replaced_by(deleted: Pod, current: Pod | None) -> bool:
    """A pod of the same name but another UID exists: skip all cleanup (kube-ovn #1026/#1028)."""
    return current is not None and current.uid != deleted.uid


def ports_to_delete(listed: Iterable[str], pod_name: str, namespace: str) -> list[str]:
    """The LSPs found by `external_ids:pod` plus `<pod>.<ns>` (pre-vendor ports), deduplicated."""
    out: list[str] = []
    for name in [*listed, pod_name_to_port_name(pod_name, namespace)]:
        if name not in out:
            out.append(name)
    return out


@dataclass(frozen=True, slots=True)
class InspectResult:
    """kube-ovn `inspectPod` for one pod: providers whose LSP is lost (clear their `allocated`/
    `routed`, patch, re-add the pod) and whether the pod still needs its routes (update queue)."""

    lost_providers: tuple[str, ...] = ()
    needs_update: bool = False


def may_need_inspection(pod: Pod, now: datetime) -> bool:
    """Whether `inspect_pod` looks at the pod at all: a live, non-hostNetwork pod with an
    allocated network (the caller skips computing the nets of the others)."""
    # NOTE: a terminating pod is left alone: its delete (possibly delayed by the grace period)
    # may already have removed the port, which must not be re-created behind it.
    return (
        not pod.host_network
        and pod.deletion_timestamp is None
        and bool(ann.allocated_providers(pod.annotations))
        and is_pod_alive(pod, now)
    )


def inspect_pod(
    pod: Pod,
    nets: Iterable[PodNet],
    port_exists: Callable[[str], bool],
    now: datetime,
    *,
    keep_vm_ip: bool,
) -> InspectResult:
    """The periodic check (every --inspect-interval) of one pod against the NB ports.

    `port_exists(name)` answers from the NB client's cache. hostNetwork and dead pods, and
    IPAM-only or unallocated nets, are never inspected.
    """
    if not may_need_inspection(pod, now):
        return InspectResult()
    name = get_name_by_pod(pod, keep_vm_ip)
    lost: list[str] = []
    update = False
    for net in nets:
        provider = net.provider_name
        if net.type is ProviderType.IPAM or not ann.is_allocated(pod.annotations, provider):
            continue
        if not port_exists(pod_name_to_port_name(name, pod.namespace, provider)):
            lost.append(provider)
        # NOTE: only the `ovn` network is routed and only `ovn.kubernetes.io/routed` is ever
        # written (handleUpdatePod, which refuses a pod without `ovn.kubernetes.io/allocated`),
        # so testing every `<provider>.kubernetes.io/routed` as kube-ovn does would re-enqueue a
        # pod with an OVN attachment (or a multus default-network override) on every pass.
        elif provider == OVN_PROVIDER and pod.node_name and not ann.is_routed(pod.annotations):
            update = True
    return InspectResult(tuple(lost), update and not lost)


# --- subnets and nets ------------------------------------------------------------------------


def _subnet_has_room(subnet: Subnet) -> bool:
    if subnet.protocol in (PROTOCOL_IPV4, PROTOCOL_DUAL):
        return subnet.v4_available_ips != 0
    if subnet.protocol == PROTOCOL_IPV6:
        return subnet.v6_available_ips != 0
    return True


def get_pod_default_subnet(
    pod: Pod, namespace: Namespace | None, subnets: Mapping[str, Subnet]
) -> Subnet:
    """kube-ovn `getPodDefaultSubnet`.

    The pod annotation `ovn.kubernetes.io/logical_switch` names the subnet (even when empty);
    otherwise the namespace's comma list is walked, skipping subnets with no available IPs of
    their protocol; when all are full the last one is returned (IPAM then reports the error).
    """
    if LOGICAL_SWITCH_ANNOTATION in pod.annotations:
        name = pod.annotations[LOGICAL_SWITCH_ANNOTATION]
        subnet = subnets.get(name)
        if subnet is None:
            raise ResourceNotReadyError(
                f"subnet {name!r} of pod {pod.key} not found",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
        return subnet
    if namespace is None:
        raise ResourceNotReadyError(f"namespace {pod.namespace} not found")
    if not namespace.has_annotations:
        raise ResourceNotReadyError(f"namespace {pod.namespace} network annotations is nil")
    chosen: Subnet | None = None
    for name in namespace.annotations.get(LOGICAL_SWITCH_ANNOTATION, "").split(","):
        if not name:
            raise ResourceNotReadyError(
                f"namespace {pod.namespace} default logical switch is not found"
            )
        chosen = subnets.get(name)
        if chosen is None:
            raise ResourceNotReadyError(f"subnet {name!r} of namespace {pod.namespace} not found")
        if _subnet_has_room(chosen):
            break
    assert chosen is not None  # the split above always yields at least one name
    return chosen


def get_ns_available_subnets(
    namespace: Namespace | None, subnets: Mapping[str, Subnet]
) -> list[PodNet]:
    """kube-ovn `getNsAvailableSubnets`: every subnet of the namespace annotation, as a net."""
    if namespace is None:
        raise ResourceNotReadyError("namespace not found")
    result = []
    for name in namespace.annotations.get(LOGICAL_SWITCH_ANNOTATION, "").split(","):
        if not name:
            continue
        subnet = subnets.get(name)
        if subnet is None:
            raise ResourceNotReadyError(f"subnet {name!r} of namespace {namespace.name} not found")
        result.append(PodNet(ProviderType.ORIGINAL, subnet.provider, subnet))
    return result


def pod_attachment_requests(pod: Pod) -> list[NetworkSelectionElement]:
    """The multus selections of a pod, default network first: the NADs the caller must fetch."""
    out: list[NetworkSelectionElement] = []
    for key in (DEFAULT_NETWORK_ANNOTATION, ATTACHMENT_NETWORK_ANNOTATION):
        value = pod.annotations.get(key, "")
        if value:
            try:
                out.extend(parse_pod_network_annotation(value, pod.namespace))
            except InvalidPodNetworkError as exc:
                # The Warning Event must say which annotation to fix.
                raise InvalidPodNetworkError(f"invalid annotation {key}: {exc}") from None
    return out


def waits_for_nad(pod: Pod, namespace: str, name: str, now: datetime) -> bool:
    """Is this live pod asking for NAD `namespace/name` without having its network yet?

    Used to re-queue the add when the NAD appears or changes. A malformed selection is False:
    that pod waits for its own edit, not for a NAD.
    """
    if pod.host_network or pod.deletion_timestamp is not None or not is_pod_alive(pod, now):
        return False
    if pod.phase in ("Succeeded", "Failed"):
        return False
    try:
        requests = pod_attachment_requests(pod)
    except InvalidPodNetworkError:
        return False
    for attach in requests:
        if (attach.namespace, attach.name) != (namespace, name):
            continue
        providers = (ovn_provider_name(attach), ipam_provider_name(attach))
        if not any(ann.is_allocated(pod.annotations, p) for p in providers):
            return True
    return False


def get_pod_attachment_nets(
    pod: Pod,
    nads: Mapping[tuple[str, str], NetworkAttachmentDefinition],
    subnets: Sequence[Subnet],
    namespace: Namespace | None,
) -> list[PodNet]:
    """kube-ovn `getPodAttachmentNet` over the fetched NADs, keyed by (namespace, name).

    `subnets` is the lister content; "first subnet of a provider" means first in this order, so
    callers should pass a stable order (e.g. sorted by name). An IPAM-only attachment with no
    subnet of its provider is skipped silently, as in kube-ovn.
    """
    by_name = {s.name: s for s in subnets}
    result: list[PodNet] = []
    default_ann = pod.annotations.get(DEFAULT_NETWORK_ANNOTATION, "")
    for attach in pod_attachment_requests(pod):
        nad = nads.get((attach.namespace, attach.name))
        if nad is None:
            raise ResourceNotReadyError(
                f"network-attachment-definition {attach.namespace}/{attach.name} not found",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
        try:
            conf = load_net_conf(nad.config)
        except ValueError as exc:
            raise RetryableError(
                f"failed to load config of net-attach-def {attach.namespace}/{attach.name}: {exc}",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            ) from None
        if is_ovn_network(conf):
            provider = ovn_provider_name(attach)
            name = pod.annotations.get(
                annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""
            )
            if not name:
                name = next((s.name for s in subnets if s.provider == provider), "")
            if name:
                subnet = by_name.get(name)
                if subnet is None:
                    raise ResourceNotReadyError(
                        f"subnet {name!r} of pod {pod.key} not found",
                        reason=REASON_VALIDATE_POD_NETWORK_FAILED,
                    )
            else:
                subnet = get_pod_default_subnet(pod, namespace, by_name)
            result.append(
                PodNet(
                    ProviderType.ORIGINAL, provider, subnet, is_default_net(default_ann, attach)
                )
            )
        else:
            provider = ipam_provider_name(attach)
            match = next((s for s in subnets if s.provider == provider), None)
            if match is not None:
                result.append(PodNet(ProviderType.IPAM, provider, match))
    return result


def get_pod_kubeovn_nets(
    pod: Pod,
    namespace: Namespace | None,
    subnets: Sequence[Subnet],
    nads: Mapping[tuple[str, str], NetworkAttachmentDefinition],
) -> list[PodNet]:
    """kube-ovn `getPodKubeovnNets`: attachments, then the default `ovn` net unless multus
    replaces the default network; the same subnet twice is an error."""
    by_name = {s.name: s for s in subnets}
    default_subnet = get_pod_default_subnet(pod, namespace, by_name)
    nets = get_pod_attachment_nets(pod, nads, subnets, namespace)
    if DEFAULT_NETWORK_ANNOTATION not in pod.annotations:
        check_default_net_subnet(pod, default_subnet)
        nets.append(PodNet(ProviderType.ORIGINAL, OVN_PROVIDER, default_subnet, True))
    seen: set[str] = set()
    for net in nets:
        if net.subnet.name in seen:
            # NOTE: retryable, as in kube-ovn: creating a subnet for an attachment's provider
            # (a cluster change, not a pod change) resolves it. kube-ovn only logs it; a Warning
            # Event tells the user why the pod has no network.
            raise RetryableError(
                f"subnet conflict, the same subnet {net.subnet.name} should not be attached"
                " repeatedly",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
        seen.add(net.subnet.name)
    return nets


def is_ovn_provider(provider: str) -> bool:
    """kube-ovn `isOvnSubnet` on a subnet's provider: `ovn` or an OVN attachment's
    `<nad>.<ns>.ovn`; any other provider is an IPAM-only subnet, which has no logical switch."""
    return provider == OVN_PROVIDER or provider.endswith("." + OVN_PROVIDER)


def is_ovn_subnet(subnet: Subnet) -> bool:
    return is_ovn_provider(subnet.provider)


def check_default_net_subnet(pod: Pod, subnet: Subnet) -> None:
    """The default network needs an OVN subnet (deviation: kube-ovn v1.8 would try to create the
    port on a switch an IPAM-only subnet does not have). Named by the pod itself: the pod must
    change (permanent); inherited from its namespace: a cluster change heals it (retryable)."""
    if is_ovn_subnet(subnet):
        return
    message = (
        f"subnet {subnet.name} has provider {subnet.provider}, not an OVN subnet: it cannot hold"
        f" the default network of pod {pod.key}"
    )
    if LOGICAL_SWITCH_ANNOTATION in pod.annotations:
        raise InvalidPodNetworkError(message)
    raise ResourceNotReadyError(message, reason=REASON_VALIDATE_POD_NETWORK_FAILED)


def default_ovn_net(nets: Iterable[PodNet]) -> PodNet | None:
    """The net handleUpdatePod routes: the first default net of provider `ovn`."""
    return next((n for n in nets if n.is_default and n.provider_name == OVN_PROVIDER), None)


# --- validators ------------------------------------------------------------------------------


def _aggregate(errors: list[str]) -> str:
    """k8s `utilerrors.NewAggregate` formatting: one error plain, several as "[e1, e2]"."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


_ATOI = re.compile(r"^[+-]?[0-9]+$")


def _is_atoi(text: str) -> bool:
    return bool(_ATOI.match(text)) and -(2**63) <= int(text) < 2**63


def validate_pod_network(annotations: Mapping[str, str]) -> None:
    """kube-ovn `ValidatePodNetwork` (default provider keys only); InvalidPodNetworkError
    listing every problem."""
    errors: list[str] = []
    ip_address = annotations.get(IP_ADDRESS_ANNOTATION, "")
    if ip_address:
        cidr = annotations.get(CIDR_ANNOTATION, "")
        for ip in ip_address.split(","):
            valid = parse_cidr(ip) is not None if "/" in ip else parse_ip(ip) is not None
            if not valid:
                errors.append(f"{ip} is not a valid {IP_ADDRESS_ANNOTATION}")
                continue
            if cidr:
                if not check_cidrs(cidr):
                    errors.append(f"invalid cidr {cidr}")
                elif not cidr_contain_ip(cidr, ip):
                    errors.append(f"{ip} not in cidr {cidr}")
    mac = annotations.get(MAC_ADDRESS_ANNOTATION, "")
    if mac and not is_valid_mac(mac):
        errors.append(f"{mac} is not a valid {MAC_ADDRESS_ANNOTATION}")
    pool = annotations.get(IP_POOL_ANNOTATION, "")
    if pool:
        for ip in pool.split(","):
            if parse_ip(ip.strip()) is None:
                errors.append(f"{ip} in {IP_POOL_ANNOTATION} is not a valid address")
    for key in (INGRESS_RATE_ANNOTATION, EGRESS_RATE_ANNOTATION):
        value = annotations.get(key, "")
        if value and not _is_atoi(value):
            errors.append(f"{value} is not a valid {key}")
    if errors:
        raise InvalidPodNetworkError(_aggregate(errors))


def validate_pod_cidr(cidr: str, ip: str) -> None:
    """kube-ovn `ValidatePodCidr`: no address may be its CIDR's network or broadcast address."""
    for block in cidr.split(","):
        parsed = parse_cidr(block)
        if parsed is None:
            continue
        network = parsed[1]
        for address in ip.split(","):
            if check_protocol(block) != check_protocol(address):
                continue
            value = parse_ip(address.split("/", 1)[0])
            if value is None:
                continue
            if value == network.broadcast_address:
                raise InvalidPodNetworkError(f"{value} is the broadcast ip in cidr {block}")
            if value == network.network_address:
                raise InvalidPodNetworkError(f"{value} is the network number ip in cidr {block}")


def validate_static_request(request: AddressRequest) -> None:
    """A static `ip_address` must not be the network or broadcast address of a candidate subnet
    that contains it (kube-ovn `ValidatePodCidr`, checked before IPAM is asked: our IPAM already
    refuses those addresses with NoAvailableAddress, which would hide kube-ovn's
    ValidatePodNetworkFailed behind AcquireAddressFailed)."""
    if request.mode is not AddressMode.STATIC:
        return
    for ip in request.ips:
        for subnet in request.subnets:
            if cidr_contain_ip(subnet.cidr_block, ip):
                validate_pod_cidr(subnet.cidr_block, ip)


def check_static_ip(ip: str) -> None:
    """kube-ovn `acquireStaticAddress` pre-check: every comma part must be an IP."""
    for part in ip.split(","):
        if parse_ip(part) is None:
            raise InvalidPodNetworkError(f"failed to parse IP {part}")


# --- address acquisition plan ----------------------------------------------------------------


class AddressMode(enum.Enum):
    RANDOM = "random"
    STATIC = "static"
    POOL = "pool"


@dataclass(frozen=True, slots=True)
class AddressRequest:
    """How to call IPAM for one net (kube-ovn `acquireAddress`), computed without IPAM.

    * RANDOM: `get_random_address(key, subnets[0].name, skipped)`, re-drawing while
      `validate_pod_ip` rejects the result (the MAC annotation is ignored on this path);
    * STATIC: `get_static_address(key, ips[0], mac, s.name)` for each subnet in order;
    * POOL: for each subnet, each ip of `ips`: skip it when `check_assigned` and
      `is_ip_assigned_to_pod(ip, subnet, key)`, else try `get_static_address`; nothing left ->
      NoAvailableAddress (no random fallback).

    The first success wins and its subnet is the pod's subnet for that net.
    """

    mode: AddressMode
    key: str
    subnets: tuple[Subnet, ...]
    ips: tuple[str, ...] = ()
    mac: str = ""
    check_assigned: bool = False


def candidate_subnets(net: PodNet, ns_nets: Sequence[PodNet]) -> tuple[Subnet, ...]:
    """The namespace's subnets, then `net`'s own if not among them (kube-ovn quirk: for an
    attachment the namespace subnets are tried first)."""
    subnets = [n.subnet for n in ns_nets]
    if all(s.name != net.subnet.name for s in subnets):
        subnets.append(net.subnet)
    return tuple(subnets)


def plan_address_request(
    pod: Pod, net: PodNet, ns_nets: Sequence[PodNet], *, keep_vm_ip: bool
) -> AddressRequest:
    """Turn the pod's annotations for `net` into an `AddressRequest`."""
    key = get_pod_key(pod, keep_vm_ip)
    request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
    if request.is_random:
        return AddressRequest(AddressMode.RANDOM, key, (net.subnet,))
    subnets = candidate_subnets(net, ns_nets)
    if request.ip_address:
        return AddressRequest(
            AddressMode.STATIC, key, subnets, (request.ip_address,), request.mac_address
        )
    is_sts = is_statefulset_pod(pod)[0]
    if not is_sts:
        return AddressRequest(
            AddressMode.POOL, key, subnets, request.ip_pool, request.mac_address, True
        )
    ordinal = statefulset_ordinal(pod.name)
    ips: tuple[str, ...] = ()
    if ordinal is not None and 0 <= ordinal < len(request.ip_pool):
        ips = (request.ip_pool[ordinal],)
    return AddressRequest(AddressMode.POOL, key, subnets, ips, request.mac_address)


class AddressAllocator(Protocol):
    """The part of `controller.ipam.IPAM` that `acquire_address` drives (in memory, no I/O)."""

    def get_random_address(
        self, pod_key: str, subnet_name: str, skipped_addrs: Iterable[str] | None = None
    ) -> tuple[str, str, str]: ...

    def get_static_address(
        self, pod_key: str, ip: str, mac: str, subnet_name: str
    ) -> tuple[str, str, str]: ...

    def is_ip_assigned_to_pod(self, ip: str, subnet_name: str, pod_key: str) -> bool: ...


if TYPE_CHECKING:
    from controller.ipam import IPAM

    def _ipam_is_an_allocator(ipam: IPAM) -> AddressAllocator:
        return ipam  # mypy checks the structural match


def acquire_address(
    allocator: AddressAllocator,
    request: AddressRequest,
    nodes: Sequence[Node],
) -> tuple[str, str, str, Subnet]:
    """kube-ovn `acquireAddress`: (v4, v6, mac, subnet the address came from).

    An `IPAMError` means "try the next candidate". An ip_pool that yields nothing raises
    NoAvailableError (kube-ovn never falls back to random there). On the static path the last
    IPAM error is re-raised; on the random path IPAM's own error propagates.
    """

    def no_available() -> NoAvailableError:
        return NoAvailableError(
            f"no address available for {request.key}",
            subnet=",".join(s.name for s in request.subnets),
        )

    if request.mode is AddressMode.RANDOM:
        subnet = request.subnets[0]
        skipped: list[str] = []
        # NOTE: each rejection skips one node address, so this bounds a misbehaving allocator.
        for _ in range(2 * len(nodes) + 1):
            v4, v6, mac = allocator.get_random_address(request.key, subnet.name, skipped)
            v4_ok, v6_ok = validate_pod_ip(subnet, v4, v6, nodes)
            if v4_ok and v6_ok:
                return v4, v6, mac, subnet
            skipped.extend(ip for ip, ok in ((v4, v4_ok), (v6, v6_ok)) if not ok)
        raise no_available()
    if request.mode is AddressMode.STATIC:
        ip, mac_wanted = request.ips[0], request.mac
        check_static_ip(ip)
        last: Exception | None = None
        for subnet in request.subnets:
            try:
                v4, v6, mac = allocator.get_static_address(request.key, ip, mac_wanted, subnet.name)
            except IPAMError as exc:
                last = exc
                continue
            return v4, v6, mac, subnet
        raise last if last is not None else no_available()
    for subnet in request.subnets:
        for ip in request.ips:
            if request.check_assigned and allocator.is_ip_assigned_to_pod(
                ip, subnet.name, request.key
            ):
                continue
            try:
                check_static_ip(ip)
                v4, v6, mac = allocator.get_static_address(
                    request.key, ip, request.mac, subnet.name
                )
            except (InvalidPodNetworkError, IPAMError):
                continue
            return v4, v6, mac, subnet
    raise no_available()


def get_node_internal_ip(node: Node) -> tuple[str, str]:
    """kube-ovn `GetNodeInternalIP`: the InternalIPs joined and split as "v4,v6"."""
    return split_string_ip(",".join(node.internal_ips))


def validate_pod_ip(subnet: Subnet, v4: str, v6: str, nodes: Iterable[Node]) -> tuple[bool, bool]:
    """kube-ovn `validatePodIP`: (v4_ok, v6_ok); an address equal to a node's InternalIP is
    rejected on overlay subnets of the default VPC. Only the first hit is reported."""
    if subnet.vlan or subnet.vpc != DEFAULT_VPC:
        return True, True
    for node in nodes:
        node_v4, node_v6 = get_node_internal_ip(node)
        if v4 and v4 == node_v4:
            return False, True
        if v6 and v6 == node_v6:
            return True, False
    return True, True


# --- annotations and IP CR after allocation -------------------------------------------------


def build_pod_allocation(
    net: PodNet,
    subnet: Subnet,
    *,
    v4: str,
    v6: str,
    mac: str,
    vlan: Vlan | None = None,
    vm_name: str = "",
) -> ann.PodNetworkAnnotations:
    """kube-ovn handleAddPod step 4.3 (+ the vlan keys of step 4.6) for one net.

    `subnet` is the subnet the address came from; `vlan` its Vlan when `subnet.vlan` is set (a
    missing one raises ResourceNotReadyError with reason GetVlanInfoFailed, for OVN nets only:
    IPAM-only nets never read it); `vm_name` is set for a VM pod under keep-vm-ip.
    """
    vlan_id: int | None = None
    provider_network = ""
    if net.type is not ProviderType.IPAM and subnet.vlan:
        if vlan is None:
            raise ResourceNotReadyError(
                f"vlan {subnet.vlan} of subnet {subnet.name} not found",
                reason=REASON_GET_VLAN_INFO_FAILED,
            )
        vlan_id, provider_network = vlan.id, vlan.provider
    return ann.PodNetworkAnnotations(
        ip_address=get_string_ip(v4, v6),
        mac_address=mac,
        cidr=subnet.cidr_block,
        gateway=subnet.gateway,
        logical_switch=subnet.name,
        network_type=NETWORK_TYPE_VLAN if subnet.vlan else NETWORK_TYPE_GENEVE,
        allocated=True,
        logical_router=subnet.vpc if not subnet.vlan and subnet.vpc else "",
        vlan_id=vlan_id,
        provider_network=provider_network,
        virtualmachine=vm_name,
    )


def build_pod_annotations(
    annotations: Mapping[str, str],
    net: PodNet,
    allocation: ann.PodNetworkAnnotations,
    *,
    pod_nic_type: str,
) -> dict[str, str]:
    """The pod's annotation map after `allocation` of `net` (pod_nic_type kept if set)."""
    return ann.apply_allocation(
        annotations, allocation, net.provider_name, pod_nic_type=pod_nic_type
    )


def build_ip_cr(
    *,
    pod_name: str,
    ip: str,
    mac: str,
    subnet: str,
    namespace: str,
    node_name: str,
    provider: str,
    pod_type: str,
    node_switch: str,
) -> dict[str, Any]:
    """The kubeovn.io/v1 IP object `createOrUpdateCrdIPs` writes (name, labels, spec).

    On the node switch the CR is `node-<node>` and `spec.podName` is the node name.
    """
    on_node_switch = bool(node_switch) and subnet == node_switch
    v4, v6 = split_string_ip(ip)
    return {
        "apiVersion": KUBEOVN_API_VERSION,
        "kind": "IP",
        "metadata": {
            "name": ip_cr_name(
                pod_name,
                namespace,
                provider,
                subnet=subnet,
                node_switch=node_switch,
                node_name=node_name,
            ),
            "labels": {SUBNET_NAME_LABEL: subnet, subnet: ""},
        },
        "spec": {
            "podName": node_name if on_node_switch else pod_name,
            "namespace": namespace,
            "subnet": subnet,
            "attachSubnets": [],
            "nodeName": node_name,
            "ipAddress": ip,
            "v4IpAddress": v4,
            "v6IpAddress": v6,
            "attachIps": [],
            "macAddress": mac,
            "attachMacs": [],
            "podType": pod_type,
        },
    }


def build_port_spec(
    pod: Pod, net: PodNet, subnet: Subnet, *, v4: str, v6: str, mac: str, keep_vm_ip: bool
) -> PortSpec:
    """The LSP of one OVN net (kube-ovn handleAddPod step 4.6 `CreatePort` arguments).

    `pod_name` is the VM name under keep-vm-ip. The security groups are passed whenever the pod
    names some; the NB client applies them only with port security, as kube-ovn's CreatePort.
    """
    name = get_name_by_pod(pod, keep_vm_ip)
    request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
    ips = tuple(ip for ip in (v4, v6) if ip)
    cidrs = tuple(
        block
        for ip in ips
        for block in subnet.cidr_block.split(",")
        if check_protocol(block) == check_protocol(ip)
    )
    return PortSpec(
        name=pod_name_to_port_name(name, pod.namespace, net.provider_name),
        switch=subnet.name,
        mac=mac,
        ips=ips,
        cidrs=cidrs,
        pod_name=name,
        pod_namespace=pod.namespace,
        port_security=request.port_security,
        security_groups=request.security_group_names(),
    )


def security_groups_to_sync(pod: Pod, net: PodNet) -> tuple[str, ...]:
    """The SGs handleAddPod pushes to the SyncSgPorts queue: only with port security."""
    request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
    return request.security_group_names() if request.port_security else ()


# --- update (routing) flow helpers -----------------------------------------------------------


def needs_routing(pod_ip: str, subnet: Subnet) -> bool:
    """handleUpdatePod configures routes/NAT only for overlay subnets of the default VPC."""
    return bool(pod_ip) and not subnet.vlan and subnet.vpc == DEFAULT_VPC


def get_node_tunnel_ips(node: Node) -> list[str]:
    """kube-ovn `getNodeTunlIP`: the node's join-switch IPs (its `ovn.kubernetes.io/ip_address`)."""
    value = node.annotations.get(IP_ADDRESS_ANNOTATION, "")
    if not value:
        raise ResourceNotReadyError(f"node {node.name} has no tunnel ip annotation")
    ips = value.split(",")
    for ip in ips:
        if parse_ip(ip) is None:
            raise ResourceNotReadyError(f"node {node.name} has an invalid tunnel ip {ip!r}")
    return ips


def src_ip_route_pairs(pod_ip: str, next_hops: Iterable[str]) -> list[tuple[str, str]]:
    """(pod address, node address) pairs of the same family, node order first (kube-ovn)."""
    return [
        (pod_addr, hop)
        for hop in next_hops
        for pod_addr in pod_ip.split(",")
        if check_protocol(hop) == check_protocol(pod_addr)
    ]


@dataclass(frozen=True, slots=True)
class RouteAction:
    """One `NbClient.add_static_route(policy, prefix, nexthop, router)` call."""

    policy: str
    prefix: str
    nexthop: str
    router: str


@dataclass(frozen=True, slots=True)
class NatAction:
    """One `NbClient.update_nat_rule(policy, logical_ip, external_ip, router, mac, port)` call;
    an empty `external_ip` removes the rule."""

    policy: str
    logical_ip: str
    external_ip: str
    router: str
    logical_mac: str = ""
    port: str = ""


@dataclass(frozen=True, slots=True)
class UpdatePlan:
    """What handleUpdatePod writes to NB, in order, before patching `routed=true`."""

    routes: tuple[RouteAction, ...] = ()
    nats: tuple[NatAction, ...] = ()


def needs_update(pod: Pod, now: datetime) -> bool:
    """kube-ovn handleUpdatePod steps 1-2: False when there is nothing to do (terminating, dead
    or already routed pod); RetryableError when no address is allocated yet (stale cache)."""
    if pod.deletion_timestamp is not None or not is_pod_alive(pod, now):
        return False
    if not pod.annotations.get(ALLOCATED_ANNOTATION):
        raise RetryableError(f"no address has been allocated to {pod.key}")
    return not ann.is_routed(pod.annotations)


def plan_update_pod(
    pod: Pod,
    nets: Iterable[PodNet],
    *,
    node: Node | None,
    external_gw_config: Mapping[str, str] | None,
    cluster_router: str,
    enable_eip_snat: bool,
    keep_vm_ip: bool,
) -> UpdatePlan:
    """kube-ovn handleUpdatePod steps 3-4: routes and NAT of the pod's default OVN network.

    `node` is the pod's node (needed for distributed-gateway subnets), `external_gw_config` the
    data of ConfigMap `kube-system/ovn-external-gw-config` (needed for EIP/SNAT pods).
    Missing either when needed is ResourceNotReadyError. Nothing is planned for underlay
    subnets and custom VPCs.

    dnat_and_snat rules are centralized (no logical_port / external_mac), as kube-ovn v1.8
    writes them; only a ConfigMap saying `type: distributed` (kube-ovn v1.9+
    ExternalGatewayType) makes them distributed, on the pod's port with its MAC.
    """
    net = default_ovn_net(nets)
    if net is None:
        return UpdatePlan()
    pod_ip = pod.annotations.get(IP_ADDRESS_ANNOTATION, "")
    subnet = net.subnet
    if not needs_routing(pod_ip, subnet):
        return UpdatePlan()
    eip = pod.annotations.get(EIP_ANNOTATION, "")
    snat = pod.annotations.get(SNAT_ANNOTATION, "")
    north_gateway = pod.annotations.get(NORTH_GATEWAY_ANNOTATION, "")
    pairs: list[tuple[str, str]] = []
    if enable_eip_snat and (eip or snat):
        pairs = src_ip_route_pairs(
            pod_ip, external_gateway_next_hop(external_gw_config).split(",")
        )
    else:
        if subnet.gateway_type == GATEWAY_TYPE_DISTRIBUTED and not north_gateway:
            if node is None:
                raise ResourceNotReadyError(f"node {pod.node_name!r} of pod {pod.key} not found")
            pairs = src_ip_route_pairs(pod_ip, get_node_tunnel_ips(node))
        if north_gateway:
            pairs += src_ip_route_pairs(pod_ip, north_gateway.split(","))
    routes = tuple(
        RouteAction(POLICY_SRC_IP, prefix, hop, cluster_router) for prefix, hop in pairs
    )
    nats: list[NatAction] = []
    if enable_eip_snat:
        port = mac = ""
        if (external_gw_config or {}).get("type") == EXTERNAL_GATEWAY_TYPE_DISTRIBUTED:
            port = pod_name_to_port_name(get_name_by_pod(pod, keep_vm_ip), pod.namespace)
            mac = pod.annotations.get(MAC_ADDRESS_ANNOTATION, "")
        for ip in pod_ip.split(","):
            # NOTE: kube-ovn pairs every pod address with the one external address, which NB
            # refuses across families; a dual-stack pod gets each family's own (or none).
            dnat_ip, snat_ip = same_family(eip, ip), same_family(snat, ip)
            nats.append(NatAction(NAT_TYPE_DNAT_AND_SNAT, ip, dnat_ip, cluster_router, mac, port))
            nats.append(NatAction(NAT_TYPE_SNAT, ip, snat_ip, cluster_router))
    return UpdatePlan(routes, tuple(nats))


def same_family(addresses: str, ip: str) -> str:
    """The first of the comma-separated `addresses` of `ip`'s family ("" when none is)."""
    family = check_protocol(ip)
    for part in addresses.split(","):
        candidate = part.strip()
        if candidate and check_protocol(candidate) == family:
            return candidate
    return ""


def external_gateway_next_hop(data: Mapping[str, str] | None) -> str:
    """The `external-gw-addr` of ConfigMap `ovn-external-gw-config`, masks stripped (one
    address, or "v4,v6" for a dual-stack external network)."""
    value = (data or {}).get(EXTERNAL_GATEWAY_ADDR_KEY, "")
    if not value:
        raise ResourceNotReadyError("no available gateway nic address")
    return ",".join(part.strip().split("/", 1)[0] for part in value.split(",") if part.strip())
