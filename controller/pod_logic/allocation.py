"""Address allocation for one pod network: validators, the IPAM request plan, acquisition.

`validate_pod_network` checks the pod's annotations (kube-ovn `ValidatePodNetwork`);
`plan_address_request` turns them into an `AddressRequest` (random, static or ip_pool, and the
candidate subnets) without IPAM; `acquire_address` drives an `AddressAllocator` (the in-memory
IPAM) through it as kube-ovn `acquireAddress` does. Pure apart from the allocator's memory.

Deviations (listed in docs/deviations.md): a StatefulSet pod whose name has no numeric ordinal
gets no ip_pool entry (kube-ovn used index 0); `validate_pod_cidr` is meant to be called with
the CIDR of the subnet the address actually came from (kube-ovn used the requested subnet's).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from controller.core import annotations as ann
from controller.core.address import (
    canonical_ip,
    check_cidrs,
    check_protocol,
    cidr_contain_ip,
    is_valid_mac,
    parse_cidr,
    parse_ip,
    split_string_ip,
)
from controller.core.constants import (
    CIDR_ANNOTATION,
    DEFAULT_VPC,
    EGRESS_RATE_ANNOTATION,
    INGRESS_RATE_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
)
from controller.core.errors import InvalidPodNetworkError
from controller.core.keep import statefulset_ordinal
from controller.core.model import Node, Pod, PodNet, Subnet
from controller.ipam.errors import IPAMError, NoAvailableError
from controller.pod_logic.classify import get_pod_key, is_statefulset_pod

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

    * RANDOM: `get_random_address(key, subnets[0].name, skipped, mac=mac)`, re-drawing while
      `validate_pod_ip` rejects the result or it is the subnet's gateway;
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
        # NOTE: a lone mac_address is honoured, as kube-ovn v1.9.41 acquireAddress does (it
        # passes it to GetRandomAddress, which refuses it when another key holds it); v1.8.18
        # ignores it.
        return AddressRequest(AddressMode.RANDOM, key, (net.subnet,), mac=request.mac_address)
    subnets = candidate_subnets(net, ns_nets)
    if request.ip_address:
        return AddressRequest(
            AddressMode.STATIC, key, subnets, (request.ip_address,), request.mac_address
        )
    if is_statefulset_pod(pod) is None:
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
        self,
        pod_key: str,
        subnet_name: str,
        skipped_addrs: Iterable[str] | None = None,
        *,
        mac: str = "",
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
        gateways = {canonical_ip(g) for g in subnet.gateway.split(",") if g}
        # NOTE: each rejection skips one node address or gateway, so this bounds the loop.
        for _ in range(2 * len(nodes) + len(gateways) + 1):
            v4, v6, mac = allocator.get_random_address(
                request.key, subnet.name, skipped, mac=request.mac
            )
            v4_ok, v6_ok = validate_pod_ip(subnet, v4, v6, nodes)
            # the gateway is excluded by every subnet the subnet controller formats; a subnet
            # edited to drop it from excludeIps must still not give it to a pod
            v4_ok = v4_ok and (not v4 or v4 not in gateways)
            v6_ok = v6_ok and (not v6 or canonical_ip(v6) not in gateways)
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
