"""What kube-ovn's CNI daemon reads from the controller's annotations: the interfaces of a pod
and of a node's ovn0, and the CIDRs a node routes on ovn0. Pure functions, no I/O.

* `plan_pod(pod)`: every OVN interface of the pod, eth0 first: the default network (provider
  `ovn`, interface `eth0`; the provider of the `v1.multus-cni.io/default-network` attachment when
  that is set) and each OVN attachment named by `k8s.v1.cni.cncf.io/networks` (provider
  `<nad>.<ns>.ovn`, interface as requested or `net<i>`; an attachment whose provider kube-ovn
  did not allocate is left to its own CNI). Per network `allocated` must be "true" (and, for
  `eth0`, `ovn.kubernetes.io/routed`, as kube-ovn's handler waits for both), and `ip_address`,
  `mac_address`, `cidr`, `gateway`, `logical_switch` valid. The port (iface-id) is kube-ovn's
  `PodNameToPortName`: `<pod>.<ns>` or `<pod>.<ns>.<provider>`, with the VM name under
  `<provider>.kubernetes.io/virtualmachine`. `WiringError` says what is missing or invalid.
* `plan_pod_nic(pod, provider, ifname)`: the one interface a CNI ADD asks for (the runtime calls
  the plugin once per interface), with the same checks as kube-ovn v1.8.18's `handleAdd`
  (pkg/daemon/handler.go lines 74-128): `<provider>.kubernetes.io/allocated` must be "true",
  the annotations valid, and for `eth0` `<provider>.kubernetes.io/routed` "true".
* `plan_node(node)`: the node's `ovn0` from the node controller's annotations.
* `ip_cr_on_node(ip_cr, node_name, subnet)`: the IP CR as the daemon writes it back on ADD
  (kube-ovn v1.8.18 pkg/daemon/handler.go `UpdateIPCr`, lines 239-260).
* `node_route_cidrs(subnets)`: the daemon's node-route rule (pkg/daemon/controller.go line 551).
* `ip_batch(plan)`: the `ip -batch` lines that configure a planned interface (idempotent);
  `host_nic_name(container_id, ifname)`: the host end's name on a runtime's path.
"""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.address import is_valid_mac
from controller.core.constants import (
    ALLOCATED_ANNOTATION_TEMPLATE,
    ATTACHMENT_NETWORK_ANNOTATION,
    CIDR_ANNOTATION,
    CIDR_ANNOTATION_TEMPLATE,
    DEFAULT_NETWORK_ANNOTATION,
    DEFAULT_VPC,
    GATEWAY_ANNOTATION,
    GATEWAY_ANNOTATION_TEMPLATE,
    IP_ADDRESS_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    PORT_NAME_ANNOTATION,
    ROUTED_ANNOTATION,
    ROUTED_ANNOTATION_TEMPLATE,
    VM_ANNOTATION_TEMPLATE,
)
from controller.core.errors import InvalidPodNetworkError
from controller.core.naming import node_port_name, pod_name_to_port_name
from controller.core.network_attachment import ovn_provider_name, parse_pod_network_annotation
from controller.core.subnet_conditions import is_ready
from controller.sandbox.cluster.wiring import WiringError

MTU = 1400  # kube-ovn's default for geneve: 1500 minus the tunnel overhead
NODE_NIC = "ovn0"


@dataclass(frozen=True, slots=True)
class NicPlan:
    """One interface of a pod (or a node's ovn0) as the annotations describe it."""

    provider: str
    port: str  # the logical switch port, OVS external_ids:iface-id
    ifname: str  # inside the namespace
    mac: str
    addresses: tuple[str, ...]  # "ip/prefix", the subnet's prefix length
    gateways: tuple[str, ...]  # "" entries for none
    default_route: bool

    @property
    def ips(self) -> str:
        return ",".join(a.split("/")[0] for a in self.addresses)


def _ann(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _addresses(
    what: str, ip: str, cidr: str, gateway: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """kube-ovn `GetIpAddrWithMask`: each address with the prefix of its CIDR block, and the
    gateway of each block (validated: same families, same count)."""
    ips = [p.strip() for p in ip.split(",") if p.strip()]
    cidrs = [p.strip() for p in cidr.split(",") if p.strip()]
    gws = [p.strip() for p in gateway.split(",")] if gateway else []
    if not ips or len(ips) != len(cidrs) or len(ips) > 2:
        raise WiringError(f"{what}: ip_address {ip!r} does not match cidr {cidr!r}")
    out: list[str] = []
    for addr_text, cidr_text in zip(ips, cidrs, strict=True):
        try:
            addr = ipaddress.ip_address(addr_text)
            net = ipaddress.ip_network(cidr_text, strict=False)
        except ValueError as exc:
            raise WiringError(f"{what}: {exc}") from None
        if addr.version != net.version or addr not in net:
            raise WiringError(f"{what}: address {addr_text} is not in {cidr_text}")
        out.append(f"{addr}/{net.prefixlen}")
    for gw in gws:
        if gw:
            try:
                ipaddress.ip_address(gw)
            except ValueError:
                raise WiringError(f"{what}: invalid gateway {gw!r}") from None
    return tuple(out), tuple(gws)


def _nic(
    what: str,
    ann: Mapping[str, str],
    provider: str,
    port: str,
    ifname: str,
    *,
    default_route: bool,
) -> NicPlan:
    def key(template: str) -> str:
        return template.format(provider=provider)

    mac = ann.get(key(MAC_ADDRESS_ANNOTATION_TEMPLATE), "")
    if not is_valid_mac(mac):
        raise WiringError(f"{what}: invalid mac_address {mac!r}")
    if not ann.get(key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE)):
        raise WiringError(f"{what}: no logical_switch annotation")
    addresses, gateways = _addresses(
        what,
        ann.get(key(IP_ADDRESS_ANNOTATION_TEMPLATE), ""),
        ann.get(key(CIDR_ANNOTATION_TEMPLATE), ""),
        ann.get(key(GATEWAY_ANNOTATION_TEMPLATE), ""),
    )
    if default_route and len(gateways) != len(addresses):
        raise WiringError(f"{what}: gateway {','.join(gateways)!r} does not match the addresses")
    return NicPlan(provider, port, ifname, mac.lower(), addresses, gateways, default_route)


def plan_pod(pod: Mapping[str, Any]) -> list[NicPlan]:
    """The interfaces `wire` creates for `pod` (see the module docstring); `WiringError` when
    the controller has not allocated (or, for eth0, routed) a network yet or its annotations are
    invalid."""
    meta = pod.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    if not name or not namespace:
        raise WiringError("pod has no name or namespace")
    if (pod.get("spec") or {}).get("hostNetwork") is True:
        return []  # the node's own network: no CNI call
    ann = _ann(pod)
    what = f"pod {namespace}/{name}"
    # (provider, ifname) of every network the CNI would be asked to set up, eth0 first
    networks: list[tuple[str, str]] = []
    try:
        default_net = ann.get(DEFAULT_NETWORK_ANNOTATION, "")
        default_provider = OVN_PROVIDER
        if default_net:
            element = parse_pod_network_annotation(default_net, namespace)[0]
            default_provider = ovn_provider_name(element)
        networks.append((default_provider, "eth0"))
        attachments = ann.get(ATTACHMENT_NETWORK_ANNOTATION, "")
        elements = parse_pod_network_annotation(attachments, namespace) if attachments else []
    except InvalidPodNetworkError as exc:
        raise WiringError(f"{what}: {exc}") from None
    for i, element in enumerate(elements, start=1):
        networks.append((ovn_provider_name(element), element.interface or f"net{i}"))

    plans: list[NicPlan] = []
    for provider, ifname in networks:
        allocated = ann.get(ALLOCATED_ANNOTATION_TEMPLATE.format(provider=provider)) == "true"
        if ifname != "eth0" and not allocated:
            continue  # not an OVN network (IPAM-only): another CNI wires it
        plans.append(_network_nic(pod, provider, ifname, ROUTED_ANNOTATION))
    return plans


def plan_pod_nic(pod: Mapping[str, Any], provider: str, ifname: str) -> NicPlan:
    """The interface `ifname` of `pod` on `provider`'s network, as one CNI ADD asks for it;
    `WiringError` while the controller has not allocated it (or, for eth0, routed it) or its
    annotations are invalid (kube-ovn's daemon waits on each of these, handler.go 83-122)."""
    meta = pod.get("metadata") or {}
    if not meta.get("name") or not meta.get("namespace"):
        raise WiringError("pod has no name or namespace")
    routed = ROUTED_ANNOTATION_TEMPLATE.format(provider=provider)
    return _network_nic(pod, provider, ifname or "eth0", routed)


def _network_nic(pod: Mapping[str, Any], provider: str, ifname: str, routed: str) -> NicPlan:
    meta = pod.get("metadata") or {}
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    ann = _ann(pod)
    what = f"pod {namespace}/{name} ({provider})"
    if ann.get(ALLOCATED_ANNOTATION_TEMPLATE.format(provider=provider)) != "true":
        raise WiringError(f"{what}: not allocated yet")
    if ifname == "eth0" and ann.get(routed) != "true":
        raise WiringError(f"{what}: not routed yet")
    # a VM's ports are named after the VM, so that they survive its pods (handler.go 124-126)
    owner = ann.get(VM_ANNOTATION_TEMPLATE.format(provider=provider)) or name
    port = pod_name_to_port_name(owner, namespace, provider)
    return _nic(what, ann, provider, port, ifname, default_route=ifname == "eth0")


def plan_node(node: Mapping[str, Any]) -> NicPlan:
    """The `ovn0` interface of `node` from the node controller's annotations."""
    name = (node.get("metadata") or {}).get("name", "")
    ann = _ann(node)
    what = f"node {name}"
    if not name:
        raise WiringError("node has no name")
    port = ann.get(PORT_NAME_ANNOTATION) or node_port_name(name)
    mac = ann.get(MAC_ADDRESS_ANNOTATION, "")
    if not is_valid_mac(mac) or not ann.get(IP_ADDRESS_ANNOTATION):
        raise WiringError(f"{what}: no join address allocated yet")
    addresses, gateways = _addresses(
        what,
        ann[IP_ADDRESS_ANNOTATION],
        ann.get(CIDR_ANNOTATION, ""),
        ann.get(GATEWAY_ANNOTATION, ""),
    )
    return NicPlan(OVN_PROVIDER, port, NODE_NIC, mac.lower(), addresses, gateways, False)


def ip_cr_on_node(ip_cr: Mapping[str, Any], node_name: str, subnet: str) -> dict[str, Any]:
    """`ip_cr` as kube-ovn v1.8.18's daemon updates it on a CNI ADD (pkg/daemon/handler.go
    `UpdateIPCr`, lines 239-260): `spec.nodeName` is the daemon's node, `attachIps`,
    `attachSubnets` and `attachMacs` are emptied, and the label `<subnet>: ""` is added (subnet
    = the pod's `<provider>.kubernetes.io/logical_switch`). Everything else, resourceVersion
    included, stays, so the PUT is refused on a concurrent change as the daemon's Update is.
    Labels the CR lacks altogether are created (kube-ovn's daemon would panic on that nil map;
    every IP CR a controller writes has labels, so the difference never shows)."""
    body: dict[str, Any] = copy.deepcopy(dict(ip_cr))
    meta = body.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), subnet: ""}
    spec = body.setdefault("spec", {})
    spec["nodeName"] = node_name
    spec["attachIps"] = []
    spec["attachSubnets"] = []
    spec["attachMacs"] = []
    return body


def node_route_cidrs(subnets: Iterable[Mapping[str, Any]]) -> list[str]:
    """The CIDRs kube-ovn v1.8.18's daemon routes on a node's ovn0 (pkg/daemon/controller.go
    line 551): every block of each Subnet of the default VPC, without a VLAN, that is Ready."""
    cidrs: list[str] = []
    for subnet in subnets:
        spec = subnet.get("spec") or {}
        if spec.get("vlan") or spec.get("vpc") != DEFAULT_VPC or not is_ready(subnet.get("status")):
            continue
        for block in str(spec.get("cidrBlock") or "").split(","):
            try:
                cidr = str(ipaddress.ip_network(block.strip(), strict=False))
            except ValueError:
                continue  # the daemon logs an invalid block and goes on
            if cidr not in cidrs:
                cidrs.append(cidr)
    return cidrs


def ip_batch(plan: NicPlan) -> str:
    """`ip -batch` lines configuring `plan.ifname` inside its namespace (idempotent)."""
    dev = plan.ifname
    lines = [f"link set {dev} address {plan.mac} mtu {MTU}"]
    for addr in plan.addresses:
        nodad = " nodad" if ":" in addr else ""
        lines.append(f"addr replace {addr} dev {dev}{nodad}")
    lines.append(f"link set {dev} up")
    if plan.default_route:
        for gw in plan.gateways:
            if gw:
                default = "::/0" if ":" in gw else "0.0.0.0/0"
                lines.append(f"route replace {default} via {gw} dev {dev}")
    return "\n".join(lines) + "\n"


def managed_routes(routes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """destination -> gateway of the routes (`ip -j route show dev ovn0`) the node-route rule
    manages: as the daemon's routeDiff, no link-scope, default or link-local route; and the
    kernel's connected routes stay (cni.py's module docstring)."""
    out: dict[str, str] = {}
    for route in routes:
        dst = str(route.get("dst") or "")
        if route.get("scope") == "link" or route.get("protocol") == "kernel":
            continue
        if not dst or dst == "default":
            continue
        net = ipaddress.ip_network(dst, strict=False)
        if not net.is_link_local:
            out[str(net)] = str(route.get("gateway") or "")
    return out


def ovn0_routes(plan: NicPlan, subnets: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """destination -> gateway of the routes a node's ovn0 (`plan`) should have: one via the join
    gateway of the same family per `node_route_cidrs` block that is not the join subnet itself."""
    on_link = [ipaddress.ip_interface(a).network for a in plan.addresses]
    wanted: dict[str, str] = {}
    for cidr in node_route_cidrs(subnets):
        net = ipaddress.ip_network(cidr)
        if any(net.version == c.version and net.overlaps(c) for c in on_link):
            continue
        for gw in plan.gateways:
            if gw and ipaddress.ip_address(gw).version == net.version:
                wanted[cidr] = gw
    return wanted


def host_nic_name(container_id: str, ifname: str) -> str:
    """The host end of a runtime's container interface, as kube-ovn names it (pkg/daemon/ovs.go
    lines 130-135): `<id[:12]>_h`, or `<id[:12-len(ifname)]>_<ifname>_h` for other interfaces."""
    if ifname == "eth0":
        return f"{container_id[:12]}_h"
    return f"{container_id[: max(1, 12 - len(ifname))]}_{ifname}_h"[:15]


def first_address(plans: Iterable[NicPlan], version: int = 4) -> str:
    """The first address of IP `version` among `plans` (for tests and the demo)."""
    for plan in plans:
        for addr in plan.addresses:
            ip = ipaddress.ip_interface(addr).ip
            if ip.version == version:
                return str(ip)
    return ""
