"""Pod classification and the informer callbacks' enqueue decisions (pure, no I/O).

What kind of pod this is (liveness, StatefulSet / VM owner, the IPAM key and the name its
ports carry) and, per informer event, which queue it goes to (`classify_add`, `classify_update`,
`classify_delete`, `needs_add_after_edit`). Each function mirrors the kube-ovn v1.8.18
`pkg/controller/pod.go` helper named in its docstring; owner reads are zero-argument callables,
called lazily and at most once, where kube-ovn would do the GET.

Deviations (listed in docs/deviations.md): the delayed delete of a terminating pod waits
`terminationGracePeriodSeconds`, 30 when unset (kube-ovn dereferences a nil pointer); a pod
first seen terminating is scheduled for cleanup by the add event (kube-ovn only does it from an
update).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core import annotations as ann
from controller.core.constants import (
    POD_TYPE_STATEFULSET,
    POD_TYPE_VIRTUAL_MACHINE,
    PORT_SECURITY_ANNOTATION_TEMPLATE,
    SECURITY_GROUP_ANNOTATION_TEMPLATE,
    annotation_key,
)
from controller.core.model import Pod, PodNet
from controller.core.naming import pod_key

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


def is_statefulset_pod(pod: Pod) -> str | None:
    """kube-ovn `isStatefulSetPod`: the name of the pod's StatefulSet owner (kind StatefulSet,
    apiVersion `apps/...`), None for any other pod."""
    owner = pod.statefulset_owner()
    return owner.name if owner else None


def is_vm_pod(pod: Pod) -> str | None:
    """kube-ovn `isVmPod`: the name of the pod's VirtualMachineInstance owner
    (`kubevirt.io...`, named as its VM), None for any other pod."""
    owner = pod.vm_owner()
    return owner.name if owner else None


def get_name_by_pod(pod: Pod, keep_vm_ip: bool) -> str:
    """kube-ovn `getNameByPod`: the VM name under keep-vm-ip, else the pod name."""
    vm_name = is_vm_pod(pod) if keep_vm_ip else None
    return vm_name if vm_name is not None else pod.name


def get_pod_key(pod: Pod, keep_vm_ip: bool) -> str:
    """The IPAM / delete-lock key `ns/<getNameByPod>`."""
    return pod_key(pod.namespace, get_name_by_pod(pod, keep_vm_ip))


def get_pod_type(pod: Pod) -> str:
    """kube-ovn `getPodType`: "StatefulSet", "VirtualMachine" or ""."""
    if is_statefulset_pod(pod) is not None:
        return POD_TYPE_STATEFULSET
    if is_vm_pod(pod) is not None:
        return POD_TYPE_VIRTUAL_MACHINE
    return ""


def need_allocate_subnets(pod: Pod, nets: Sequence[PodNet]) -> list[PodNet]:
    """kube-ovn `needAllocateSubnets`: nothing for finished pods, else the unallocated nets."""
    if pod.phase in ("Succeeded", "Failed"):
        return []
    return [n for n in nets if not ann.is_allocated(pod.annotations, n.provider_name)]


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


def release_due(pod: Pod, now: datetime) -> bool:
    """Has the cleanup of a terminating pod come due, so that its network may be gone while the
    object still exists? The controller schedules it `termination_delay` after the update that
    carried the deletionTimestamp (`classify_update`; that update comes after the delete
    request, which was `deletionGracePeriodSeconds` before the deletionTimestamp), or at the
    deletionTimestamp for a pod first seen terminating (`classify_add`): the earlier of the two
    is the first moment it may run. A StatefulSet or VM pod whose owner keeps its address is
    the caller's to except (`controller.core.keep.owner_keeps`)."""
    if pod.deletion_timestamp is None:
        return False
    delay = timedelta(seconds=termination_delay(pod))
    grace = pod.deletion_grace_period_seconds
    requested = pod.deletion_timestamp - (timedelta(seconds=grace) if grace is not None else delay)
    return now >= min(pod.deletion_timestamp, requested + delay)


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
    is_sts = is_statefulset_pod(pod) is not None
    is_vm = is_vm_pod(pod) is not None
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
    a VM pod it releases is cleaned up only once it is terminating or dead (a standalone VMI has
    no VirtualMachine, and its running launcher pod keeps its network);
    `providers()` returns the provider names of the pod's nets (`get_pod_kubeovn_nets`), or None
    when they cannot be computed, which skips the security check as kube-ovn does.
    """
    if old.resource_version == new.resource_version or new.host_network:
        return IGNORE
    is_sts = is_statefulset_pod(new) is not None
    is_vm = is_vm_pod(new) is not None
    if not is_sts and not is_vm:
        if not is_pod_alive(new, now):
            return EnqueueDecision(PodAction.DELETE)
        if new.deletion_timestamp is not None:
            return EnqueueDecision(PodAction.DELETE, delay=termination_delay(new))
    elif (
        is_sts or new.deletion_timestamp is not None or not is_pod_alive(new, now)
    ) and owner_to_delete():
        # NOTE: kube-ovn v1.8 also cleans up a running VM pod whose VirtualMachine is missing,
        # which is every launcher pod of a standalone VirtualMachineInstance: its network went
        # on its first update, and the address to the next pod while the VMI ran. A VM pod
        # without a VM is judged like any pod here: only once it terminates or dies.
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
