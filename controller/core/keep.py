"""The StatefulSet / KubeVirt VM keep rules: is a pod's address kept when the pod goes (pure).

A StatefulSet pod's address (its IPAM entry, IP CR and logical switch port) outlives the pod
while its StatefulSet still wants that ordinal: the StatefulSet exists, is not being deleted and
has more replicas than the ordinal (kube-ovn v1.8.18 `isStatefulSetPodToDel`). Under
--keep-vm-ip a VirtualMachine's address outlives its pods while the VM exists and is not being
deleted (`isVmPodToDel`). The pod delete handler (`pod_logic.decide_delete`), the garbage
collector, the IPAM rebuild at start-up and the audit all ask these functions, so they cannot
disagree on what is kept.

Owners are read through `OwnerReaders` (two callables returning the object or None for
NotFound); a lookup that cannot tell (API error, malformed object, owners not read at all) raises
`OwnerUnknownError`, and the rules then keep the address: never guess "gone".

Rules on names: a StatefulSet pod is named `<sts>-<ordinal>` with a decimal ordinal (an optional
sign, as Go's `strconv.Atoi`); a name without one is never released by the replicas test (kube-ovn
read index 0 there), and a key whose StatefulSet must be guessed from the name (no pod, only an
IP CR or a port) needs one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.core.address import cidr_contain_ip
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    POD_TYPE_STATEFULSET,
    POD_TYPE_VIRTUAL_MACHINE,
)
from controller.core.errors import ControllerError, ResourceNotReadyError
from controller.core.model import Namespace, Pod, StatefulSet, Subnet, VirtualMachine

#: IP CR `spec.podType` values whose address may outlive the pod (restored by the IPAM rebuild
#: even when no pod exists).
KEPT_POD_TYPES = (POD_TYPE_STATEFULSET, POD_TYPE_VIRTUAL_MACHINE)

_ORDINAL = re.compile(r"^[+-]?[0-9]+$")


class OwnerUnknownError(ControllerError):
    """The owner could not be read: the keep rules keep the address."""

    def __init__(self, message: str = "the owner could not be read") -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class OwnerReaders:
    """How the rules read owners (the read policy is the caller's, see
    `controller.view.OwnerLookup`): `statefulset(namespace, name)` and `virtual_machine(namespace,
    name)` return the object, None when it does not exist, or raise `OwnerUnknownError`."""

    statefulset: Callable[[str, str], StatefulSet | None]
    virtual_machine: Callable[[str, str], VirtualMachine | None]


def statefulset_ordinal(pod_name: str) -> int | None:
    """The integer after the last `-` of a StatefulSet pod name, None when it is not one."""
    suffix = pod_name.rsplit("-", 1)[-1]
    if not _ORDINAL.match(suffix):
        return None
    return int(suffix)


def statefulset_of_name(pod_name: str) -> str | None:
    """The StatefulSet a pod name `<sts>-<ordinal>` implies, None for any other name."""
    sts, sep, _ = pod_name.rpartition("-")
    if not sep or not sts or statefulset_ordinal(pod_name) is None:
        return None
    return sts


def is_kept_pod_type(pod_type: str) -> bool:
    """Is an IP CR of this `spec.podType` one whose address may outlive its pod?"""
    return pod_type in KEPT_POD_TYPES


def statefulset_pod_to_del(pod_name: str, sts: StatefulSet | None) -> bool:
    """kube-ovn `isStatefulSetPodToDel` over the fetched StatefulSet (`None` = NotFound)."""
    if sts is None or sts.deletion_timestamp is not None:
        return True
    ordinal = statefulset_ordinal(pod_name)
    if ordinal is None:
        return False
    return ordinal >= sts.replicas


def vm_pod_to_del(vm: VirtualMachine | None) -> bool:
    """kube-ovn `isVmPodToDel`: the VM is gone (`None`) or being deleted."""
    return vm is None or vm.deletion_timestamp is not None


def statefulset_keeps(
    owners: OwnerReaders, namespace: str, pod_name: str, sts_name: str | None = None
) -> bool:
    """Does StatefulSet `sts_name` (default: the one the pod name implies) keep the address?"""
    name = sts_name or statefulset_of_name(pod_name)
    if not name:
        return False
    try:
        sts = owners.statefulset(namespace, name)
    except OwnerUnknownError:
        return True
    return not statefulset_pod_to_del(pod_name, sts)


def vm_keeps(owners: OwnerReaders, namespace: str, vm_name: str) -> bool:
    """Does VirtualMachine `vm_name` keep its address (exists, not being deleted)?"""
    try:
        vm = owners.virtual_machine(namespace, vm_name)
    except OwnerUnknownError:
        return True
    return not vm_pod_to_del(vm)


def owner_keeps(pod: Pod, *, keep_vm_ip: bool, owners: OwnerReaders) -> bool:
    """Does the pod's owner keep the pod's address beyond the pod: its StatefulSet, or under
    keep-vm-ip its VM? False for a pod with neither."""
    sts = pod.statefulset_owner()
    if sts is not None:
        return statefulset_keeps(owners, pod.namespace, pod.name, sts.name)
    vm = pod.vm_owner()
    if vm is not None and keep_vm_ip:
        return vm_keeps(owners, pod.namespace, vm.name)
    return False


def pod_kept(pod: Pod, *, alive: bool, keep_vm_ip: bool, owners: OwnerReaders) -> bool:
    """Is the address of this pod (in the cache) kept? An alive, non-terminating pod always; a
    StatefulSet pod is judged by its StatefulSet alone (kube-ovn `markAndCleanLSP`); a VM pod
    under keep-vm-ip while alive or while its VM wants it; any other pod while alive."""
    if alive and pod.deletion_timestamp is None:
        return True
    if pod.statefulset_owner() is not None:
        return owner_keeps(pod, keep_vm_ip=keep_vm_ip, owners=owners)
    if pod.vm_owner() is not None and keep_vm_ip:
        return alive or owner_keeps(pod, keep_vm_ip=keep_vm_ip, owners=owners)
    return alive


def name_kept(namespace: str, name: str, *, keep_vm_ip: bool, owners: OwnerReaders) -> bool:
    """Is the address of `namespace/name` kept when no pod of that name accounts for it? Under
    keep-vm-ip a VM of that name keeps it; else the StatefulSet its name implies."""
    if not namespace or not name:
        return False
    if keep_vm_ip and vm_keeps(owners, namespace, name):
        return True
    return statefulset_keeps(owners, namespace, name)


def pod_type_keeps(pod_type: str, namespace: str, name: str, *, owners: OwnerReaders) -> bool:
    """Does the owner of an IP CR of `spec.podType` keep its address (`name` is the CR's
    `spec.podName`: the pod, or the VM under keep-vm-ip)?"""
    if pod_type == POD_TYPE_STATEFULSET:
        return statefulset_keeps(owners, namespace, name)
    if pod_type == POD_TYPE_VIRTUAL_MACHINE:
        return vm_keeps(owners, namespace, name)
    return False


def restored_by_rebuild(pod: Pod, *, alive: bool) -> bool:
    """Does the IPAM rebuild at start-up restore this (non-hostNetwork) pod's annotated
    addresses? An alive pod's, and a StatefulSet pod's even when it is not alive (kube-ovn
    InitIPAM)."""
    return alive or pod.statefulset_owner() is not None


def subnet_change_releases(
    pod: Pod,
    owner: StatefulSet | VirtualMachine | None,
    namespace: Namespace | None,
    subnets: Mapping[str, Subnet],
) -> bool:
    """kube-ovn `appendCheckPodToDel`: must a sts/VM pod's network be released because the pod
    no longer fits its subnet (the owner or namespace names another one, or the address left
    the subnet's CIDR)?

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
