"""The allocation plan of one pod network: everything the add decides before it touches IPAM.

`plan_net_allocation` turns a pod, one of its networks, the namespace's subnets and what
earlier attempts of the same key left behind into a frozen `NetAllocationPlan`: the IPAM key
and request (random, static `ip_address` or `ip_pool`, with the MAC asked for and the candidate
subnets in order, StatefulSet ordinal and VM key included), the names the port and IP CR carry,
whether an OVN port and its security groups are written, which of the key's earlier
allocations the plan no longer wants, and the static request's refusal if it has one. The add
handler (controller/pod/add.py) only executes it; which subnet and address IPAM gives, and the
annotations built from them, follow from the plan and IPAM's answer (`build`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.core import annotations as ann
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import Pod, PodNet, ProviderType
from controller.core.naming import pod_name_to_port_name
from controller.pod_logic.allocation import (
    AddressMode,
    AddressRequest,
    plan_address_request,
    validate_static_request,
)
from controller.pod_logic.build import security_groups_to_sync
from controller.pod_logic.classify import get_name_by_pod, get_pod_type, is_vm_pod

#: One allocation of a network in a subnet: (the network, the subnet's name).
Held = tuple[PodNet, str]


@dataclass(frozen=True, slots=True)
class NetAllocationPlan:
    """What the add does for one network, in order.

    1. undo `stale` (allocations an earlier failed add of this key made for this network in a
       subnet the plan no longer names: their port has the name this network's is about to take);
    2. free what the key holds outside `wanted_subnets` (an earlier incarnation's port of
       `port_name` on another switch, addresses in subnets none of the pod's networks names);
    3. refuse with `refusal` (a static address that is a network or broadcast address);
    4. take an address: the leftover port's when `may_reuse_port` and one exists, else IPAM
       through `request`;
    5. write the IP CR `port_name` (for `owner_name`, of `pod_type`), and for an OVN network
       (`writes_port`) the port, then sync `security_groups`.
    """

    net: PodNet
    request: AddressRequest
    owner_name: str  # getNameByPod: the VM's name under keep-vm-ip, else the pod's
    port_name: str  # the network's logical switch port and IP CR
    vm_name: str  # the VM the port's external ids name ("" for any other pod)
    pod_type: str  # "StatefulSet", "VirtualMachine" or ""
    writes_port: bool
    security_groups: tuple[str, ...]
    may_reuse_port: bool
    wanted_subnets: frozenset[str]
    stale: tuple[Held, ...] = ()
    refusal: InvalidPodNetworkError | None = None

    @property
    def key(self) -> str:
        """The IPAM key ("ns/<owner_name>")."""
        return self.request.key


def needs_namespace_subnets(pod: Pod, net: PodNet) -> bool:
    """Does the plan of `net` look at the namespace's subnets (a static or ip_pool request,
    whose candidates are those subnets and then the network's own)?"""
    return not ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name).is_random


def plan_net_allocation(
    pod: Pod,
    net: PodNet,
    ns_nets: Sequence[PodNet],
    *,
    keep_vm_ip: bool,
    leftover: Sequence[Held] = (),
    others: frozenset[str] = frozenset(),
) -> NetAllocationPlan:
    """The plan of `net` for `pod` (pure).

    `ns_nets`: the namespace's subnets as networks (only read for a static or ip_pool request);
    `leftover`: what earlier failed adds of this key allocated and kept for their retry;
    `others`: the subnets the pod's other networks name (the key keeps its addresses there).
    """
    request = plan_address_request(pod, net, ns_nets, keep_vm_ip=keep_vm_ip)
    planned = frozenset(s.name for s in request.subnets)
    owner_name = get_name_by_pod(pod, keep_vm_ip)
    writes_port = net.type is not ProviderType.IPAM
    try:
        validate_static_request(request)
        refusal = None
    except InvalidPodNetworkError as exc:
        refusal = exc
    return NetAllocationPlan(
        net=net,
        request=request,
        owner_name=owner_name,
        port_name=pod_name_to_port_name(owner_name, pod.namespace, net.provider_name),
        vm_name=(is_vm_pod(pod) or "") if keep_vm_ip else "",
        pod_type=get_pod_type(pod),
        writes_port=writes_port,
        security_groups=security_groups_to_sync(pod, net) if writes_port else (),
        may_reuse_port=writes_port and request.mode is AddressMode.RANDOM,
        wanted_subnets=planned | others,
        stale=tuple(
            (n, s) for n, s in leftover if n.provider_name == net.provider_name and s not in planned
        ),
        refusal=refusal,
    )
