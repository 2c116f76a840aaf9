"""handleDeletePod's decisions: keep or release a deleted pod's network (pure, no I/O).

`decide_delete` says whether a StatefulSet / VM pod's LSP, IP CR and address are kept; the
owner rules themselves (`is_statefulset_pod_to_del`, `is_vm_pod_to_del`,
`append_check_pod_to_del`) are `controller.core.keep`'s, shared with the garbage collector, the
IPAM rebuild and the audit. `is_replaced_by` and `ports_to_delete` pick what to clean up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.core import keep
from controller.core.errors import RetryableError
from controller.core.model import Pod, StatefulSet
from controller.core.naming import pod_name_to_port_name
from controller.pod_logic.classify import is_statefulset_pod, is_vm_pod

# --- owner checks (StatefulSet / KubeVirt VM): the rules are controller.core.keep's -------


def is_statefulset_pod_to_del(pod: Pod, sts: StatefulSet | None) -> bool:
    """kube-ovn `isStatefulSetPodToDel` over the fetched StatefulSet (`None` = NotFound).

    The caller maps any other GET error to False, as kube-ovn does.
    """
    return keep.statefulset_pod_to_del(pod.name, sts)


is_vm_pod_to_del = keep.vm_pod_to_del
append_check_pod_to_del = keep.subnet_change_releases


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
    is_sts = is_statefulset_pod(pod) is not None
    is_vm = is_vm_pod(pod) is not None and keep_vm_ip
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
