"""The whole of a pod's network request, checked before anything is allocated or written (pure).

`check_pod_request` looks at every network the add is about to allocate and returns one
`Refusal` per problem; the add records one Warning Event per distinct reason and allocates
nothing, so a refused pod leaves no address, IP CR or port behind. What is refused, and why:

* the node (join) subnet as a pod's subnet: its addresses are the nodes' ovn0 addresses and its
  IP CRs are named `node-<node>`, so a pod there takes a node's record (kube-ovn v1.16.2
  `pkg/controller/pod.go` handleUpdatePod refuses it, "NodeSwitch subnet ... is unavailable for
  pod"; v1.8.18 does not);
* a static `ip_address` or an `ip_pool` entry equal to the gateway of a candidate subnet that
  contains it: the port would answer for the router's address. kube-ovn v1.8.18's IPAM
  (`pkg/ipam/subnet.go` GetStaticAddress) hands out excluded addresses, the gateway included;
  this is a deliberate deviation;
* an address that does not parse, in `ip_address` or `ip_pool` of any provider (kube-ovn
  `ValidatePodNetwork` checks only the default provider's; `acquireStaticAddress` refuses the
  others later);
* a `mac_address` that is not a 48-bit unicast MAC: kube-ovn `ValidatePodNetwork` takes anything
  `net.ParseMAC` takes (8- and 20-octet forms included), which the IPAM then refuses, and the
  kernel refuses a multicast or all-zero address on the pod's interface;
* with `port_security: "true"`, a `security_groups` entry that cannot be a SecurityGroup's name
  (a DNS subdomain): kube-ovn v1.8.18 first writes the IP CR, then fails CreatePort on it for
  ever (CreateOVNPortFailed);
* an IP CR of the name this network's would take that records another owner (a node's
  `node-<node>`, or another pod's whose name and namespace join to the same string): kube-ovn
  `createOrUpdateCrdIPs` overwrites it. Reason AcquireAddressFailed, retried: the other owner
  may go away.

Every refusal carries kube-ovn's reason name: ValidatePodNetworkFailed for the request itself,
AcquireAddressFailed for an address record held by another object.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from controller.core import annotations as ann
from controller.core.address import canonical_ip, cidr_contain_ip, is_valid_mac, parse_ip
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    IP_POOL_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    SECURITY_GROUP_ANNOTATION_TEMPLATE,
    annotation_key,
)
from controller.core.errors import ControllerError, InvalidPodNetworkError, RetryableError
from controller.core.model import Pod, PodNet, ProviderType, Subnet
from controller.core.naming import pod_name_to_port_name

NODE_IP_CR_PREFIX = "node-"

# A Kubernetes object name of the DNS-subdomain kind (SecurityGroups are cluster-scoped objects).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAC48 = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a pod's request cannot be allocated: the Event reason, the message, and whether
    only an edit of the pod can fix it (`permanent`) or a change elsewhere may."""

    reason: str
    message: str
    permanent: bool = True


def _mac_problem(mac: str) -> str:
    if not is_valid_mac(mac) or not _MAC48.match(mac):
        return "is not a 48-bit MAC address"
    octets = bytes.fromhex(mac.replace(":", "").replace("-", ""))
    if octets[0] & 1:
        return "is a multicast MAC address, an interface cannot take it"
    if not any(octets):
        return "is the all-zero MAC address, an interface cannot take it"
    return ""


def _gateway_of(ip: str, subnets: Iterable[Subnet]) -> Subnet | None:
    """The candidate subnet whose gateway `ip` is (None when it is no gateway)."""
    wanted = canonical_ip(ip)
    if wanted is None:
        return None
    for subnet in subnets:
        gateways = {canonical_ip(g) for g in subnet.gateway.split(",") if g}
        if wanted in gateways and cidr_contain_ip(subnet.cidr_block, ip):
            return subnet
    return None


def _address_problems(
    parts: Sequence[str], key: str, candidates: Sequence[Subnet], *, strip_prefix: bool
) -> Iterator[str]:
    """What is wrong with the addresses `parts` of annotation `key`: not an address, or the
    gateway of a candidate subnet."""
    for part in parts:
        ip = part.split("/", 1)[0] if strip_prefix else part
        if parse_ip(ip) is None:
            yield f"{part} in {key} is not a valid address"
            continue
        gateway_of = _gateway_of(ip, candidates)
        if gateway_of is not None:
            yield f"{ip} in {key} is the gateway of subnet {gateway_of.name}"


def _check_addresses(
    pod: Pod, net: PodNet, candidates: Sequence[Subnet], out: list[Refusal]
) -> None:
    provider = net.provider_name
    request = ann.PodNetworkRequest.from_annotations(pod.annotations, provider)

    def refuse(message: str) -> None:
        out.append(Refusal(REASON_VALIDATE_POD_NETWORK_FAILED, message))

    if request.ip_address:
        key = annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider)
        parts = request.ip_address.split(",")
        # the default network's ip_address may carry a prefix length
        strip_prefix = provider == OVN_PROVIDER
    else:
        key = annotation_key(IP_POOL_ANNOTATION_TEMPLATE, provider)
        parts = [part for entry in request.ip_pool for part in entry.split(",")]
        strip_prefix = False
    for message in _address_problems(parts, key, candidates, strip_prefix=strip_prefix):
        refuse(message)
    if request.mac_address:
        problem = _mac_problem(request.mac_address)
        if problem:
            key = annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider)
            refuse(f"{request.mac_address} in {key} {problem}")
    if request.port_security and net.type is not ProviderType.IPAM:
        key = annotation_key(SECURITY_GROUP_ANNOTATION_TEMPLATE, provider)
        for part in request.security_groups.split(","):
            name = part.strip()
            if name and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
                refuse(f"{name!r} in {key} cannot name a security group")


def check_pod_request(
    pod: Pod,
    nets: Sequence[PodNet],
    candidates: Callable[[PodNet], Sequence[Subnet]],
    *,
    node_switch: str,
    pod_name: str,
    ip_cr_owner: Callable[[str], tuple[str, str] | None],
) -> list[Refusal]:
    """Every reason the networks `nets` (those the add is about to allocate) cannot be.

    `candidates(net)` are the subnets a static request of `net` may come from (the namespace's,
    then the net's own); `pod_name` names the pod's IP CRs and ports (the VM under keep-vm-ip);
    `ip_cr_owner(name)` is the (namespace, podName) the cached IP CR `name` records, None when
    there is none.
    """
    out: list[Refusal] = []
    for net in nets:
        if node_switch and net.subnet.name == node_switch:
            named = (
                pod.annotations.get(LOGICAL_SWITCH_ANNOTATION) == node_switch
                if net.is_default and net.provider_name == OVN_PROVIDER
                else True
            )
            out.append(
                Refusal(
                    REASON_VALIDATE_POD_NETWORK_FAILED,
                    f"subnet {node_switch} is the node switch: it holds the nodes' addresses,"
                    " not pods'",
                    permanent=named,
                )
            )
            continue  # its addresses and IP CR name are not a pod's to check
        request = ann.PodNetworkRequest.from_annotations(pod.annotations, net.provider_name)
        subnets = (net.subnet,) if request.is_random else tuple(candidates(net))
        _check_addresses(pod, net, subnets, out)
        name = pod_name_to_port_name(pod_name, pod.namespace, net.provider_name)
        owner = ip_cr_owner(name)
        if owner is not None and owns_other(name, owner, (pod.namespace, pod_name)):
            namespace, holder = owner
            who = f"pod {namespace}/{holder}" if namespace else f"node {holder}"
            out.append(
                Refusal(
                    REASON_ACQUIRE_ADDRESS_FAILED,
                    f"IP CR {name} belongs to {who}, not to pod {pod.namespace}/{pod_name}",
                    permanent=False,
                )
            )
    return out


def owns_other(name: str, owner: tuple[str, str], wanted: tuple[str, str]) -> bool:
    """Does the IP CR `name`, recording (namespace, podName) `owner`, belong to something other
    than the pod `wanted`? A node's CR (`node-<node>`, no namespace) does; a CR naming no pod,
    or no namespace under another name, is nobody's."""
    namespace, holder = owner
    if not holder or owner == wanted:
        return False
    return bool(namespace) or name.startswith(NODE_IP_CR_PREFIX)


def refusal_error(refusals: Sequence[Refusal]) -> ControllerError:
    """The error the add raises once the Events are recorded: permanent (forgotten until the
    pod changes) when only an edit of the pod can fix every refusal, else retried."""
    message = "; ".join(dict.fromkeys(r.message for r in refusals))
    if all(r.permanent for r in refusals):
        return InvalidPodNetworkError(message)
    return RetryableError(message)


def group_by_reason(refusals: Sequence[Refusal]) -> dict[str, str]:
    """One Event message per distinct reason (the messages joined, duplicates once)."""
    grouped: dict[str, list[str]] = {}
    for r in refusals:
        messages = grouped.setdefault(r.reason, [])
        if r.message not in messages:
            messages.append(r.message)
    return {reason: "; ".join(messages) for reason, messages in grouped.items()}
