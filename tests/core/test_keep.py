"""controller.core.keep: the StatefulSet / VM keep rules the delete handler, gc, the IPAM
rebuild and the audit share."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.core import keep
from controller.core.model import OwnerReference, Pod, StatefulSet, VirtualMachine

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _owners(
    statefulsets: dict[str, StatefulSet] | None = None,
    vms: dict[str, VirtualMachine] | None = None,
) -> keep.OwnerReaders:
    """Owners in namespace `ns`; a kind given as None cannot be read (OwnerUnknownError)."""

    def sts(namespace: str, name: str) -> StatefulSet | None:
        if statefulsets is None:
            raise keep.OwnerUnknownError
        assert namespace == "ns"
        return statefulsets.get(name)

    def vm(namespace: str, name: str) -> VirtualMachine | None:
        if vms is None:
            raise keep.OwnerUnknownError
        assert namespace == "ns"
        return vms.get(name)

    return keep.OwnerReaders(sts, vm)


def _never() -> keep.OwnerReaders:
    def fail(namespace: str, name: str) -> None:
        raise AssertionError(f"owner {namespace}/{name} read")

    return keep.OwnerReaders(fail, fail)


def _sts_pod(name: str, deletion_timestamp: datetime | None = None) -> Pod:
    ref = OwnerReference("apps/v1", "StatefulSet", "web")
    return Pod("ns", name, owner_references=(ref,), deletion_timestamp=deletion_timestamp)


def _vm_pod(name: str, deletion_timestamp: datetime | None = None) -> Pod:
    ref = OwnerReference("kubevirt.io/v1", "VirtualMachineInstance", "vm1")
    return Pod("ns", name, owner_references=(ref,), deletion_timestamp=deletion_timestamp)


@pytest.mark.parametrize(
    ("name", "sts"),
    [
        ("web-0", "web"),
        ("my-web-12", "my-web"),
        ("web-+3", "web"),
        ("web", None),
        ("web-x", None),
        ("-1", None),
        ("web-", None),
    ],
)
def test_statefulset_of_name_needs_a_numeric_ordinal(name: str, sts: str | None) -> None:
    assert keep.statefulset_of_name(name) == sts


def test_a_statefulset_keeps_its_ordinals_below_replicas() -> None:
    owners = _owners({"web": StatefulSet("ns", "web", replicas=2)})
    assert keep.name_kept("ns", "web-1", keep_vm_ip=False, owners=owners)
    assert not keep.name_kept("ns", "web-2", keep_vm_ip=False, owners=owners)
    assert not keep.name_kept("ns", "db-0", keep_vm_ip=False, owners=owners)  # no such sts
    assert not keep.name_kept("ns", "web", keep_vm_ip=False, owners=owners)  # no ordinal


def test_a_deleting_statefulset_keeps_nothing() -> None:
    owners = _owners({"web": StatefulSet("ns", "web", replicas=3, deletion_timestamp=NOW)})
    assert not keep.name_kept("ns", "web-0", keep_vm_ip=False, owners=owners)
    assert not keep.owner_keeps(_sts_pod("web-0"), keep_vm_ip=False, owners=owners)


def test_an_unreadable_owner_keeps() -> None:
    owners = _owners(None, None)
    assert keep.name_kept("ns", "web-0", keep_vm_ip=False, owners=owners)
    assert keep.name_kept("ns", "vm1", keep_vm_ip=True, owners=owners)
    assert keep.pod_type_keeps("VirtualMachine", "ns", "vm1", owners=owners)


def test_a_pod_whose_name_has_no_ordinal_is_kept_by_its_owner_reference() -> None:
    owners = _owners({"web": StatefulSet("ns", "web", replicas=0)})
    assert keep.owner_keeps(_sts_pod("odd-name"), keep_vm_ip=False, owners=owners)
    assert not keep.owner_keeps(_sts_pod("web-0"), keep_vm_ip=False, owners=owners)


def test_vms_keep_only_under_keep_vm_ip_for_pods_and_names() -> None:
    owners = _owners({}, {"vm1": VirtualMachine("ns", "vm1")})
    pod = _vm_pod("virt-launcher-vm1-abcde")
    assert keep.owner_keeps(pod, keep_vm_ip=True, owners=owners)
    assert not keep.owner_keeps(pod, keep_vm_ip=False, owners=owners)
    assert keep.name_kept("ns", "vm1", keep_vm_ip=True, owners=owners)
    assert not keep.name_kept("ns", "vm1", keep_vm_ip=False, owners=owners)
    # an IP CR says what it is: its podType decides, whatever the flag
    assert keep.pod_type_keeps("VirtualMachine", "ns", "vm1", owners=owners)
    assert not keep.pod_type_keeps("VirtualMachine", "ns", "vm2", owners=owners)
    assert not keep.pod_type_keeps("", "ns", "vm1", owners=owners)


def test_pod_kept() -> None:
    # alive and not terminating: kept without reading any owner
    assert keep.pod_kept(_sts_pod("web-5"), alive=True, keep_vm_ip=False, owners=_never())
    assert keep.pod_kept(Pod("ns", "plain"), alive=True, keep_vm_ip=False, owners=_never())
    assert not keep.pod_kept(Pod("ns", "plain"), alive=False, keep_vm_ip=True, owners=_never())
    # a terminating sts pod is judged by its StatefulSet alone, alive or not
    owners = _owners({"web": StatefulSet("ns", "web", replicas=1)})
    terminating = _sts_pod("web-1", deletion_timestamp=NOW)
    assert not keep.pod_kept(terminating, alive=True, keep_vm_ip=False, owners=owners)
    assert keep.pod_kept(_sts_pod("web-0"), alive=False, keep_vm_ip=False, owners=owners)
    # a VM pod under keep-vm-ip: alive, or its VM wants it
    gone = _owners({}, {})
    vm_pod = _vm_pod("launcher", deletion_timestamp=NOW)
    assert keep.pod_kept(vm_pod, alive=True, keep_vm_ip=True, owners=gone)
    assert not keep.pod_kept(vm_pod, alive=False, keep_vm_ip=True, owners=gone)
    # without keep-vm-ip it is any pod: kept while alive
    assert keep.pod_kept(vm_pod, alive=True, keep_vm_ip=False, owners=_never())
    assert not keep.pod_kept(vm_pod, alive=False, keep_vm_ip=False, owners=_never())


def test_kept_pod_types_and_the_rebuild_rule() -> None:
    assert keep.is_kept_pod_type("StatefulSet") and keep.is_kept_pod_type("VirtualMachine")
    assert not keep.is_kept_pod_type("") and not keep.is_kept_pod_type("Deployment")
    assert keep.restored_by_rebuild(_sts_pod("web-0"), alive=False)
    assert keep.restored_by_rebuild(Pod("ns", "p"), alive=True)
    assert not keep.restored_by_rebuild(_vm_pod("launcher"), alive=False)
