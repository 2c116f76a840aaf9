"""The periodic inspection of pods against their NB ports (kube-ovn `inspectPod`; pure).

`inspect_pod` names the providers whose logical switch port is lost (their `allocated` mark is
cleared and the pod re-added) and whether an allocated pod still waits for its routes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from controller.core import annotations as ann
from controller.core.constants import OVN_PROVIDER
from controller.core.model import Pod, PodNet, ProviderType
from controller.core.naming import pod_name_to_port_name
from controller.pod_logic.classify import get_name_by_pod, is_pod_alive


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
