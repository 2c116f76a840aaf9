"""pod_logic: liveness, owners, enqueue and delete decisions (kube-ovn v1.8.18
pod.go isPodAlive, the enqueue handlers, handleDeletePod)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller import pod_logic as pl
from controller.core.model import Pod, StatefulSet, VirtualMachine
from controller.pod_logic import EnqueueDecision, PodAction
from controller.testing.builders import NOW
from controller.testing.models import namespace, pod, sts_pod, subnet, vm_pod

ALLOC = {"ovn.kubernetes.io/allocated": "true"}
ROUTED = {**ALLOC, "ovn.kubernetes.io/routed": "true"}


def never() -> bool:
    raise AssertionError("owner check must not be called here")


# --- liveness --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "alive"),
    [
        ({}, True),
        ({"phase": "Pending"}, True),
        ({"phase": "Succeeded", "restart_policy": "Never"}, False),
        ({"phase": "Succeeded", "restart_policy": "OnFailure"}, False),
        ({"phase": "Succeeded", "restart_policy": "Always"}, True),
        ({"phase": "Failed", "restart_policy": "Never"}, False),
        ({"phase": "Failed", "restart_policy": "OnFailure"}, True),
        ({"phase": "Failed", "restart_policy": "Always", "reason": "Evicted"}, False),
        # deletion grace: dead only once deletionTimestamp + grace has passed
        (
            {
                "deletion_timestamp": NOW - timedelta(seconds=31),
                "deletion_grace_period_seconds": 30,
            },
            False,
        ),
        (
            {
                "deletion_timestamp": NOW - timedelta(seconds=29),
                "deletion_grace_period_seconds": 30,
            },
            True,
        ),
        ({"deletion_timestamp": NOW - timedelta(days=1)}, True),  # no grace field: kube-ovn alive
    ],
)
def test_is_pod_alive(fields: dict[str, Any], alive: bool) -> None:
    assert pl.is_pod_alive(pod(**fields), NOW) is alive


# --- owners ----------------------------------------------------------------------------------


def test_owner_detection_and_names() -> None:
    assert pl.is_statefulset_pod(sts_pod()) == "web"
    assert pl.is_statefulset_pod(pod(owner=("apps.example/v1", "StatefulSet", "x"))) is None
    assert pl.is_statefulset_pod(pod(owner=("apps/v1", "ReplicaSet", "x"))) is None
    assert pl.is_vm_pod(vm_pod()) == "vm1"
    assert pl.is_vm_pod(pod(owner=("v1", "VirtualMachineInstance", "x"))) is None
    assert pl.get_pod_type(sts_pod()) == "StatefulSet"
    assert pl.get_pod_type(vm_pod()) == "VirtualMachine"
    assert pl.get_pod_type(pod()) == ""
    assert pl.get_name_by_pod(vm_pod(), keep_vm_ip=True) == "vm1"
    assert pl.get_name_by_pod(vm_pod(), keep_vm_ip=False) == "virt-launcher-vm1-abcde"
    assert pl.get_name_by_pod(sts_pod(), keep_vm_ip=True) == "web-1"
    assert pl.get_pod_key(vm_pod(), keep_vm_ip=True) == "default/vm1"


@pytest.mark.parametrize(
    ("name", "ordinal"),
    [("web-0", 0), ("my-web-12", 12), ("web", None), ("web-", None), ("web-a1", None)],
)
def test_statefulset_ordinal(name: str, ordinal: int | None) -> None:
    assert pl.statefulset_ordinal(name) == ordinal


@given(st.from_regex(r"\A[a-z]([-a-z0-9]{0,10}[a-z])?\Z"), st.integers(0, 10**6))
def test_statefulset_ordinal_property(base: str, n: int) -> None:
    assert pl.statefulset_ordinal(f"{base}-{n}") == n


def sts(replicas: int = 3, deleting: bool = False, subnet_ann: str = "") -> StatefulSet:
    return StatefulSet(
        namespace="default",
        name="web",
        replicas=replicas,
        deletion_timestamp=NOW if deleting else None,
        template_annotations=pod(
            annotations={"ovn.kubernetes.io/logical_switch": subnet_ann} if subnet_ann else {}
        ).annotations,
    )


@pytest.mark.parametrize(
    ("pod_name", "owner", "to_del"),
    [
        ("web-1", None, True),  # sts gone
        ("web-1", sts(deleting=True), True),
        ("web-1", sts(replicas=3), False),
        ("web-3", sts(replicas=3), True),  # scaled down
        ("web-0", sts(replicas=0), True),
        ("web-x", sts(replicas=0), False),  # no ordinal: keep (kube-ovn parse error -> false)
    ],
)
def test_is_statefulset_pod_to_del(pod_name: str, owner: StatefulSet | None, to_del: bool) -> None:
    assert pl.is_statefulset_pod_to_del(sts_pod(pod_name), owner) is to_del


def test_is_vm_pod_to_del() -> None:
    assert pl.is_vm_pod_to_del(None)
    assert pl.is_vm_pod_to_del(VirtualMachine("default", "vm1", deletion_timestamp=NOW))
    assert not pl.is_vm_pod_to_del(VirtualMachine("default", "vm1"))


# --- appendCheckPodToDel ---------------------------------------------------------------------

SUBNETS = {"ovn-default": subnet(), "s2": subnet("s2", "10.17.0.0/16")}


def placed(ip: str = "10.16.0.5", ls: str = "ovn-default") -> Pod:
    return sts_pod(
        annotations={"ovn.kubernetes.io/ip_address": ip, "ovn.kubernetes.io/logical_switch": ls}
    )


@pytest.mark.parametrize(
    ("the_pod", "owner", "ns_ls", "expected"),
    [
        (placed(), None, "ovn-default", True),  # owner NotFound
        (placed(), sts(), "ovn-default", False),  # nothing changed
        (placed(), sts(), "s2", True),  # namespace moved to another subnet
        (placed(), sts(), "s2,ovn-default", False),
        (placed(), sts(subnet_ann="ovn-default"), "s2", False),  # owner pins the subnet
        (placed("10.99.0.5"), sts(), "ovn-default", True),  # subnet CIDR changed
        (placed(""), sts(), "ovn-default", True),  # empty ip annotation (kubeovn/kube-ovn#4479)
        (placed(), sts(subnet_ann="s2"), "ovn-default", True),  # owner's subnet changed
        (placed(), VirtualMachine("default", "vm1"), "ovn-default", False),
        (placed(), None, None, True),
    ],
)
def test_append_check_pod_to_del(
    the_pod: Pod, owner: StatefulSet | VirtualMachine | None, ns_ls: str | None, expected: bool
) -> None:
    ns = namespace(logical_switch=ns_ls)
    assert pl.append_check_pod_to_del(the_pod, owner, ns, SUBNETS) is expected


def test_append_check_pod_to_del_errors() -> None:
    with pytest.raises(pl.ResourceNotReadyError, match="namespace default not found"):
        pl.append_check_pod_to_del(placed(), sts(), None, SUBNETS)
    with pytest.raises(pl.ResourceNotReadyError, match="subnet 'gone'"):
        pl.append_check_pod_to_del(
            placed(ls="gone"), sts(), namespace(logical_switch=None), SUBNETS
        )


# --- enqueue decisions -----------------------------------------------------------------------

DEAD: dict[str, Any] = {"phase": "Failed", "restart_policy": "Never"}


@pytest.mark.parametrize(
    ("the_pod", "keep_vm_ip", "owner_gone", "expected"),
    [
        (pod(host_network=True), False, None, PodAction.IGNORE),
        (pod(), False, None, PodAction.ADD),
        (pod(annotations=ALLOC), False, None, PodAction.IGNORE),
        (
            pod(annotations=ALLOC, host_ip="192.168.0.1", pod_ip="10.16.0.5"),
            False,
            None,
            PodAction.UPDATE,
        ),
        (
            pod(annotations=ROUTED, host_ip="192.168.0.1", pod_ip="10.16.0.5"),
            False,
            None,
            PodAction.IGNORE,
        ),
        (pod(annotations=ALLOC, host_ip="192.168.0.1"), False, None, PodAction.IGNORE),
        (pod(**DEAD), False, None, PodAction.DELETE),
        (sts_pod(**DEAD), False, True, PodAction.DELETE),
        (sts_pod(**DEAD), False, False, PodAction.IGNORE),
        (vm_pod(**DEAD), True, True, PodAction.DELETE),
        (vm_pod(**DEAD), True, False, PodAction.IGNORE),
        (vm_pod(**DEAD), False, None, PodAction.DELETE),  # without keep-vm-ip: plain pod
    ],
)
def test_classify_add(
    the_pod: Pod, keep_vm_ip: bool, owner_gone: bool | None, expected: PodAction
) -> None:
    def owner() -> bool:
        assert owner_gone is not None, "unexpected owner check"
        return owner_gone

    decision = pl.classify_add(the_pod, NOW, keep_vm_ip=keep_vm_ip, owner_to_delete=owner)
    assert decision == EnqueueDecision(expected)


def test_classify_delete() -> None:
    assert pl.classify_delete(pod()) == EnqueueDecision(PodAction.DELETE)
    assert pl.classify_delete(pod(host_network=True)).action is PodAction.IGNORE


def update(
    old: Pod,
    new: Pod,
    *,
    owner_gone: bool | None = None,
    providers: list[str] | None = None,
) -> EnqueueDecision:
    def owner() -> bool:
        assert owner_gone is not None, "unexpected owner check"
        return owner_gone

    return pl.classify_update(old, new, NOW, owner_to_delete=owner, providers=lambda: providers)


def test_classify_update_same_resource_version_is_ignored() -> None:
    assert update(pod(), pod()) == pl.IGNORE
    assert update(pod(), pod(resource_version="2", host_network=True)) == pl.IGNORE


def test_classify_update_dead_pod_is_deleted_now() -> None:
    assert update(pod(), pod(resource_version="2", **DEAD)) == EnqueueDecision(PodAction.DELETE)


@pytest.mark.parametrize(("grace", "delay"), [(None, 30.0), (0, 0.0), (5, 5.0), (-3, 0.0)])
def test_classify_update_terminating_pod_is_deleted_after_grace(
    grace: int | None, delay: float
) -> None:
    new = pod(resource_version="2", deletion_timestamp=NOW, termination_grace_period_seconds=grace)
    assert update(pod(), new) == EnqueueDecision(PodAction.DELETE, delay=delay)


def test_classify_update_sts_and_vm_use_owner_check() -> None:
    new = sts_pod(resource_version="2", deletion_timestamp=NOW, termination_grace_period_seconds=10)
    assert update(sts_pod(), new, owner_gone=True) == EnqueueDecision(PodAction.DELETE, delay=10)
    # sts alive and in range: a terminating sts pod is not cleaned up
    assert update(sts_pod(), new, owner_gone=False, providers=[]) == pl.IGNORE
    new_vm = vm_pod(resource_version="2", **DEAD)
    assert update(vm_pod(), new_vm, owner_gone=True).action is PodAction.DELETE
    assert update(vm_pod(), new_vm, owner_gone=False, providers=[]).action is PodAction.IGNORE


def test_classify_update_routes_allocated_scheduled_pods() -> None:
    new = pod(resource_version="2", annotations=ALLOC, node_name="n1")
    assert update(pod(), new, providers=["ovn"]) == EnqueueDecision(PodAction.UPDATE)
    unscheduled = pod(resource_version="2", annotations=ALLOC)
    assert update(pod(), unscheduled, providers=["ovn"]).action is PodAction.IGNORE
    routed = pod(resource_version="2", annotations=ROUTED, node_name="n1")
    assert update(pod(), routed, providers=["ovn"]).action is PodAction.IGNORE


@pytest.mark.parametrize(
    ("old_ann", "new_ann", "providers", "changed"),
    [
        ({}, {"ovn.kubernetes.io/port_security": "true"}, ["ovn"], True),
        ({}, {"ovn.kubernetes.io/security_groups": "sg1"}, ["ovn"], True),
        (
            {"ovn.kubernetes.io/security_groups": "sg1"},
            {"ovn.kubernetes.io/security_groups": "sg1"},
            ["ovn"],
            False,
        ),
        ({}, {"n.ns.ovn.kubernetes.io/security_groups": "sg1"}, ["ovn"], False),
        ({}, {"n.ns.ovn.kubernetes.io/security_groups": "sg1"}, ["ovn", "n.ns.ovn"], True),
        ({}, {"ovn.kubernetes.io/port_security": "true"}, None, False),  # nets failed: skip
    ],
)
def test_classify_update_security_changes(
    old_ann: dict[str, str], new_ann: dict[str, str], providers: list[str] | None, changed: bool
) -> None:
    decision = update(
        pod(annotations=old_ann),
        pod(resource_version="2", annotations=new_ann),
        providers=providers,
    )
    assert decision.update_security is changed


# --- delete decision -------------------------------------------------------------------------


def check(result: bool | Exception) -> bool:
    if isinstance(result, Exception):
        raise result
    return result


@pytest.mark.parametrize(
    ("the_pod", "keep_vm_ip", "to_del", "check_result", "expected"),
    [
        (pod(), False, None, None, pl.DeleteDecision(skip=False, keep_ip_cr=False)),
        (pod(deletion_timestamp=NOW), False, None, None, pl.DeleteDecision(False, False)),
        # sts pod deleted while its sts still wants it: keep everything
        (sts_pod(deletion_timestamp=NOW), False, False, False, pl.DeleteDecision(True)),
        (sts_pod(deletion_timestamp=NOW), False, True, False, pl.DeleteDecision(False, False)),
        (sts_pod(deletion_timestamp=NOW), False, False, True, pl.DeleteDecision(False, False)),
        (
            sts_pod(deletion_timestamp=NOW),
            False,
            False,
            pl.ResourceNotReadyError("ns"),
            pl.DeleteDecision(True),
        ),
        # no deletionTimestamp (dead pod, or a NotFound requeue): clean up, keep the IP CR
        (sts_pod(), False, False, False, pl.DeleteDecision(False, keep_ip_cr=True)),
        (sts_pod(), False, False, pl.ResourceNotReadyError("x"), pl.DeleteDecision(False, False)),
        (vm_pod(deletion_timestamp=NOW), True, False, False, pl.DeleteDecision(True)),
        (vm_pod(deletion_timestamp=NOW), True, True, False, pl.DeleteDecision(False, False)),
        (vm_pod(), True, False, False, pl.DeleteDecision(False, False)),
        # a finished launcher pod of a VM that still exists: keep the VM's network
        (vm_pod(phase="Failed"), True, False, False, pl.DeleteDecision(True)),
        (vm_pod(phase="Succeeded"), True, False, False, pl.DeleteDecision(True)),
        (vm_pod(phase="Failed"), True, True, False, pl.DeleteDecision(False, False)),
        (vm_pod(phase="Failed"), False, None, None, pl.DeleteDecision(False, False)),
        (vm_pod(deletion_timestamp=NOW), False, None, None, pl.DeleteDecision(False, False)),
    ],
)
def test_decide_delete(
    the_pod: Pod,
    keep_vm_ip: bool,
    to_del: bool | None,
    check_result: bool | Exception | None,
    expected: pl.DeleteDecision,
) -> None:
    def owner() -> bool:
        assert to_del is not None, "unexpected owner check"
        return to_del

    def checker() -> bool:
        assert check_result is not None, "unexpected appendCheckPodToDel"
        return check(check_result)

    decision = pl.decide_delete(
        the_pod, keep_vm_ip=keep_vm_ip, owner_to_delete=owner, check_pod_to_del=checker
    )
    assert decision == expected


def test_ports_to_delete_appends_the_compat_port_once() -> None:
    assert pl.ports_to_delete(["p.ns.n1.ns.ovn"], "p", "ns") == ["p.ns.n1.ns.ovn", "p.ns"]
    assert pl.ports_to_delete(["p.ns", "p.ns.x"], "p", "ns") == ["p.ns", "p.ns.x"]


def test_owner_never_checked_for_plain_pods() -> None:
    pl.classify_add(pod(**DEAD), NOW, keep_vm_ip=True, owner_to_delete=never)
    pl.decide_delete(pod(), keep_vm_ip=True, owner_to_delete=never, check_pod_to_del=never)


def test_classify_add_schedules_the_cleanup_of_a_terminating_pod() -> None:
    # seen first in an initial list (e.g. after a restart): no update event may ever follow for
    # a pod on a lost node, so the add schedules its cleanup for when its deletionTimestamp passes
    def terminating(factory: Callable[..., Pod], seconds: float) -> Pod:
        return factory(
            deletion_timestamp=NOW + timedelta(seconds=seconds), deletion_grace_period_seconds=30
        )

    def add(the_pod: Pod, owner_gone: bool | None = None) -> EnqueueDecision:
        def owner() -> bool:
            assert owner_gone is not None, "unexpected owner check"
            return owner_gone

        return pl.classify_add(the_pod, NOW, keep_vm_ip=False, owner_to_delete=owner)

    assert add(terminating(pod, 12)) == EnqueueDecision(PodAction.DELETE, delay=12.0)
    assert add(terminating(pod, -5)) == EnqueueDecision(PodAction.DELETE)  # overdue: at once
    assert add(terminating(sts_pod, 12), owner_gone=True) == EnqueueDecision(
        PodAction.DELETE, delay=12.0
    )
    assert add(terminating(vm_pod, 3), owner_gone=True) == EnqueueDecision(
        PodAction.DELETE, delay=3.0
    )
    # the StatefulSet still wants this ordinal: the network stays, the pod is handled as usual
    assert add(terminating(sts_pod, 12), owner_gone=False).action is PodAction.ADD


def test_needs_add_after_edit() -> None:
    old = pod("p", annotations={"ovn.kubernetes.io/ip_address": "bad"})
    fixed = pod("p", annotations={"ovn.kubernetes.io/ip_address": "10.16.0.9"})
    assert pl.needs_add_after_edit(old, fixed, NOW)
    assert not pl.needs_add_after_edit(fixed, fixed, NOW)  # nothing changed
    allocated = pod("p", annotations={"ovn.kubernetes.io/allocated": "true", "x": "y"})
    assert not pl.needs_add_after_edit(fixed, allocated, NOW)  # our own patch
    attached = pod("p", annotations={"n.ns.ovn.kubernetes.io/allocated": "true"})
    assert not pl.needs_add_after_edit(fixed, attached, NOW)
    dead = pod("p", annotations={"a": "b"}, phase="Failed", restart_policy="Never")
    assert not pl.needs_add_after_edit(old, dead, NOW)
    terminating = pod("p", annotations={"a": "b"}, deletion_timestamp=NOW)
    assert not pl.needs_add_after_edit(old, terminating, NOW)
    host = pod("p", annotations={"a": "b"}, host_network=True)
    assert not pl.needs_add_after_edit(old, host, NOW)
    # Inspection cleared an attachment's mark while the default network stays allocated.
    both = pod(
        "p",
        annotations={
            "ovn.kubernetes.io/allocated": "true",
            "n.ns.ovn.kubernetes.io/allocated": "true",
        },
    )
    default_only = pod("p", annotations={"ovn.kubernetes.io/allocated": "true"})
    assert pl.needs_add_after_edit(both, default_only, NOW)
    assert not pl.needs_add_after_edit(default_only, both, NOW)
