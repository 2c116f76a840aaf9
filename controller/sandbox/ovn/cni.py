"""The CNI stand-in: wires pods (and nodes' `ovn0`) into a `DataPlane` as kube-ovn's CNI does.

`CniWiring(dataplane)` is a `PodWiring` (cluster/wiring.py). It re-implements what kube-ovn v1.8's
CNI daemon does for a pod (pkg/daemon/handler.go `handleAdd`/`handleDel`, pkg/daemon/ovs.go
`configureNic`/`configureContainerNic`/`deleteNic`/`configureNodeNic`):

* `plan_pod(pod)` (pure) reads the controller's annotations of every OVN network of the pod:
  the default network (provider `ovn`, interface `eth0`; the provider of the
  `v1.multus-cni.io/default-network` attachment when that is set) and each OVN attachment named
  by `k8s.v1.cni.cncf.io/networks` (provider `<nad>.<ns>.ovn`, interface as requested or
  `net<i>`). Per network: `allocated` must be "true" (and, for `eth0`, `ovn.kubernetes.io/routed`,
  as kube-ovn's handler waits for both), and `ip_address`, `mac_address`, `cidr`, `gateway`,
  `logical_switch` must be valid. The port (iface-id) is kube-ovn's `PodNameToPortName`:
  `<pod>.<ns>` or `<pod>.<ns>.<provider>`, with the VM name under `<provider>.kubernetes.io/
  virtualmachine`. An attachment whose provider is not an OVN one is left to its own CNI.
* `wire(pod)` creates the pod's namespace and one veth per network, plugs the host end into
  br-int (`--may-exist add-port`, `external_ids:iface-id=<port>`, `pod_name`, `pod_namespace`,
  `ip`, `pod_netns`, as kube-ovn) with the host end up and txqueuelen 1000, then inside the pod
  sets the MAC, MTU (1400, kube-ovn's geneve default), the addresses with the subnet's prefix
  lengths (both families for dual stack) and, on `eth0` only, the default route(s) via the
  gateway(s). It returns once every port is bound (`external_ids:ovn-installed=true` on the
  interface, set by ovn-controller) or raises `WiringError` at the deadline. Idempotent: a
  second call reconciles addresses and routes in place.
* `unwire(pod)` deletes the pod's OVS ports and veths and its namespace; a pod never wired is
  a no-op.
* `wire_node(node)` / `unwire_node(name)`: the node's join-subnet port `node-<name>` (annotations
  `ip_address`, `mac_address`, `cidr`, `gateway`, `port_name` written by the node controller) as
  an interface `ovn0` in a node namespace `kop-<run>-n<hash>`, with the node's join address, so
  pod->node traffic follows the controller's routes. With `node_lookup` (name -> Node object),
  `wire(pod)` wires the pod's node first when it is not wired yet.

Where this differs from kube-ovn v1.8, and why:

* The pod's "netns" is a named namespace `kop-<run>-<hash of the pod UID>` created here (there is
  no container runtime); the veth is created directly with its final names (host end
  `<run><hash>_h` inside the OVS namespace, pod end `eth0`/`net<i>`) instead of `<id>_h`/`<id>_c`
  plus a move and rename. The OVS interface also carries `external_ids:pod_uid` so that a pod
  re-created under the same name (another UID) is told apart from the stale one.
* A stale interface claiming the same iface-id is removed with its veth (kube-ovn's
  `CleanDuplicatePort` only clears its iface-id; here no kubelet would ever delete it).
* `pod_nic_type: internal-port` is wired as a veth too: an OVS internal port of the userspace
  datapath is a tap device that cannot leave ovs-vswitchd's namespace.
* Transmit checksum offload is turned off on the pod's end of the veth (`ethtool -K <if> tx off`):
  the userspace datapath forwards a veth's partially checksummed TCP/UDP packets unchanged and
  the receiver drops them (with the kernel datapath kube-ovn needs no such step).
* The host end is set up before `add-port` (kube-ovn: right after it) and checked once the
  port is bound: ovs-vswitchd writes a device's flags back from a cached copy when it adds the
  port, which can undo an `up` that races with it.
* IPv6 addresses are added with `nodad` (duplicate address detection would hold each new address
  tentative for about a second; OVN already guarantees uniqueness per switch).
* No gateway check by default (kube-ovn pings the gateway up to 200 times unless the subnet
  disables it): the tests ping explicitly, and a pod in a deny-all security group could never
  pass it. `check_gateway=True` turns it on (one ping per second until the deadline).
* The node's `ovn0` is a veth (not an internal port, same reason) in a namespace of its own.
* Node routes follow kube-ovn v1.8.18's daemon (pkg/daemon/controller.go, lines 549-603):
  `set_subnets(subnets)` (fed by the sandbox kubelet's Subnet watch) gives every wired node a
  route on ovn0 via its join gateway (the `gateway` annotation, per family) for each CIDR of a
  Subnet of the default VPC, without a VLAN, whose status is Ready (`node_route_cidrs`), and
  deletes the other routes on ovn0; there is no default route, so a subnet that is not Ready
  is unreachable from the node and its pods cannot answer the node. Unlike the daemon, the
  kernel's own connected routes (the join subnet's) are left alone instead of being replaced by a
  route via the join gateway: on ovn0 they are the same path.
* Not done: egress/ingress rate limits (QoS), mirroring, SR-IOV/offload, custom routes from the
  CNI request, the IP CR's nodeName update (the controller and the tests do not read it).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
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
    VM_ANNOTATION_TEMPLATE,
)
from controller.core.errors import InvalidPodNetworkError
from controller.core.naming import node_port_name, pod_name_to_port_name
from controller.core.network_attachment import ovn_provider_name, parse_pod_network_annotation
from controller.core.subnet_conditions import is_ready
from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.ovn.dataplane import BRIDGE, NETNS_DIR, DataPlane
from controller.sandbox.processes import SandboxError

LOG = logging.getLogger(__name__)

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
        nic_what = f"{what} ({provider})"
        if not allocated:
            raise WiringError(f"{nic_what}: not allocated yet")
        if ifname == "eth0" and ann.get(ROUTED_ANNOTATION) != "true":
            raise WiringError(f"{nic_what}: not routed yet")
        owner = ann.get(VM_ANNOTATION_TEMPLATE.format(provider=provider)) or name
        port = pod_name_to_port_name(owner, namespace, provider)
        plans.append(_nic(nic_what, ann, provider, port, ifname, default_route=ifname == "eth0"))
    return plans


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


def _hash(*parts: str, size: int = 8) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:size]


def _ip_batch(plan: NicPlan) -> str:
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


class CniWiring:
    """Wires pods into `dataplane` (see the module docstring)."""

    def __init__(
        self,
        dataplane: DataPlane,
        *,
        bind_timeout: float = 20.0,
        check_gateway: bool = False,
        node_lookup: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.dp = dataplane
        self.bind_timeout = bind_timeout
        self.check_gateway = check_gateway
        self.node_lookup = node_lookup
        self._nodes: dict[str, str] = {}  # node name -> its namespace
        self._node_plans: dict[str, NicPlan] = {}  # node name -> its ovn0
        self._subnets: list[Mapping[str, Any]] = []  # the last set_subnets()
        # The kubelet wires pods from several threads; a node is wired by one of them only.
        self._node_lock = threading.Lock()
        self._plans: dict[str, tuple[NicPlan, ...]] = {}  # pod identity -> what was wired
        self._plans_lock = threading.Lock()

    # --- names -----------------------------------------------------------------------------------
    def pod_netns(self, pod: Mapping[str, Any]) -> str:
        """The namespace of `pod` (exists once `wire` ran)."""
        return self.dp.netns_name(_hash(self._identity(pod)))

    def node_netns(self, name: str) -> str:
        return self.dp.netns_name(self._node_tag(name))

    @staticmethod
    def _node_tag(name: str) -> str:
        return "n" + _hash("node", name, size=6)

    @staticmethod
    def _identity(pod: Mapping[str, Any]) -> str:
        meta = pod.get("metadata") or {}
        return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")

    def _host_nic(self, key: str, ifname: str) -> str:
        return f"{self.dp.run_id}{_hash(key, ifname)}_h"  # 4 + 8 + 2 < IFNAMSIZ (15)

    # --- PodWiring -------------------------------------------------------------------------------
    def wire(self, pod: Mapping[str, Any]) -> None:
        plans = plan_pod(pod)
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName", "")
        if node and self.node_lookup is not None and node not in self._nodes:
            node_obj = self.node_lookup(node)
            if node_obj is not None:
                self.wire_node(node_obj)
        identity = self._identity(pod)
        try:
            netns = self.dp.add_netns(_hash(identity))
            if any(":" in a for p in plans for a in p.addresses):
                self.dp.exec_in(
                    netns,
                    [
                        "sysctl",
                        "-q",
                        "-w",
                        "net.ipv6.conf.all.disable_ipv6=0",
                        "net.ipv6.conf.default.disable_ipv6=0",
                    ],
                )
            hosts = []
            for plan in plans:
                host = self._host_nic(identity, plan.ifname)
                self._plug(
                    plan,
                    host,
                    netns,
                    {
                        "pod_name": meta["name"],
                        "pod_namespace": meta["namespace"],
                        "pod_uid": identity,
                    },
                )
                hosts.append((plan, host))
            deadline = time.monotonic() + self.bind_timeout
            for plan, host in hosts:
                self._wait_bound(plan.port, host, deadline)
                self._ensure_up(host)
            if self.check_gateway:
                for plan in plans:
                    if plan.default_route:
                        self._gateway_check(netns, plan, deadline)
        except SandboxError as exc:
            raise WiringError(f"pod {meta['namespace']}/{meta['name']}: {exc}") from None
        with self._plans_lock:
            self._plans[identity] = tuple(plans)

    def wired_plans(self, pod: Mapping[str, Any]) -> tuple[NicPlan, ...] | None:
        """The interfaces the last successful `wire` of this pod (by UID) set up, or None."""
        with self._plans_lock:
            return self._plans.get(self._identity(pod))

    def unwire(self, pod: Mapping[str, Any]) -> None:
        identity = self._identity(pod)
        with self._plans_lock:
            self._plans.pop(identity, None)
        try:
            for iface in self._interfaces("pod_uid", identity):
                self._unplug(iface)
            self.dp.delete_netns(self.dp.netns_name(_hash(identity)))
        except SandboxError as exc:
            meta = pod.get("metadata") or {}
            raise WiringError(f"pod {meta.get('namespace')}/{meta.get('name')}: {exc}") from None

    # --- nodes -----------------------------------------------------------------------------------
    def wire_node(self, node: Mapping[str, Any]) -> str:
        """Wire `node`'s ovn0 (idempotent); returns its namespace."""
        with self._node_lock:
            return self._wire_node(node)

    def _wire_node(self, node: Mapping[str, Any]) -> str:
        plan = plan_node(node)
        name = node["metadata"]["name"]
        netns = self.node_netns(name)
        try:
            self.dp.add_netns(self._node_tag(name))
            host = self._host_nic("node:" + name, NODE_NIC)
            self._plug(plan, host, netns, {"node_name": name})
            self._wait_bound(plan.port, host, time.monotonic() + self.bind_timeout)
            self._ensure_up(host)
        except SandboxError as exc:
            raise WiringError(f"node {name}: {exc}") from None
        self._nodes[name] = netns
        self._node_plans[name] = plan
        self._sync_node_routes(name)
        return netns

    def set_subnets(self, subnets: Iterable[Mapping[str, Any]]) -> None:
        """The cluster's Subnets changed: every wired node's ovn0 routes follow them."""
        with self._node_lock:
            self._subnets = list(subnets)
            for name in list(self._nodes):
                self._sync_node_routes(name)

    def node_routes(self, name: str) -> dict[str, str]:
        """The routes on the node's ovn0 this stand-in manages: destination -> gateway."""
        netns = self._nodes.get(name)
        return {} if netns is None else self._ovn0_routes(netns)

    def _ovn0_routes(self, netns: str) -> dict[str, str]:
        routes: dict[str, str] = {}
        for family in ("-4", "-6"):
            out = self.dp.exec_in(netns, ["ip", "-j", family, "route", "show", "dev", NODE_NIC])
            for route in json.loads(out or "[]"):
                dst = str(route.get("dst") or "")
                # as the daemon's routeDiff: no link-scope, default or link-local routes; and
                # the kernel's connected routes stay (see the module docstring)
                if route.get("scope") == "link" or route.get("protocol") == "kernel":
                    continue
                if not dst or dst == "default":
                    continue
                net = ipaddress.ip_network(dst, strict=False)
                if net.is_link_local:
                    continue
                routes[str(net)] = str(route.get("gateway") or "")
        return routes

    def _sync_node_routes(self, name: str) -> None:
        plan, netns = self._node_plans.get(name), self._nodes.get(name)
        if plan is None or netns is None:
            return
        on_link = [ipaddress.ip_interface(a).network for a in plan.addresses]
        wanted: dict[str, str] = {}
        for cidr in node_route_cidrs(self._subnets):
            net = ipaddress.ip_network(cidr)
            if any(net.version == c.version and net.overlaps(c) for c in on_link):
                continue
            for gw in plan.gateways:
                if gw and ipaddress.ip_address(gw).version == net.version:
                    wanted[cidr] = gw
        try:
            have = self._ovn0_routes(netns)
            for dst in have:
                if dst not in wanted:
                    self.dp.exec_in(netns, ["ip", "route", "del", dst, "dev", NODE_NIC])
            for dst, gw in wanted.items():
                if have.get(dst) != gw:
                    argv = ["ip", "route", "replace", dst, "via", gw, "dev", NODE_NIC]
                    self.dp.exec_in(netns, argv)
        except (SandboxError, ValueError) as exc:
            LOG.warning("node %s: ovn0 routes: %s", name, exc)

    def unwire_node(self, name: str) -> None:
        with self._node_lock:
            self._unwire_node(name)

    def _unwire_node(self, name: str) -> None:
        try:
            for iface in self._interfaces("node_name", name):
                self._unplug(iface)
            self.dp.delete_netns(self.node_netns(name))
        except SandboxError as exc:
            raise WiringError(f"node {name}: {exc}") from None
        self._nodes.pop(name, None)
        self._node_plans.pop(name, None)

    # --- steps -----------------------------------------------------------------------------------
    def _plug(self, plan: NicPlan, host: str, netns: str, ids: Mapping[str, str]) -> None:
        ovs_ns = self.dp.ovs_netns
        if not self._link_exists(ovs_ns, host):
            self.dp.exec_in(
                ovs_ns,
                [
                    *("ip", "link", "add", host, "mtu", str(MTU), "type", "veth", "peer"),
                    *("name", plan.ifname, "netns", netns),
                ],
            )
        self._clean_duplicates(plan.port, host)
        # Up before OVS opens it (kube-ovn sets it up right after add-port): ovs-vswitchd writes
        # the device flags back from its own cached copy when it turns promiscuous mode on, so an
        # `up` racing with the port's addition can be undone and leave the pod without carrier.
        self.dp.exec_in(ovs_ns, ["ip", "link", "set", host, "up", "txqueuelen", "1000"])
        external_ids = {"iface-id": plan.port, **ids, "ip": plan.ips, "pod_netns": netns}
        # without --no-wait: returns once ovs-vswitchd has added the port
        self.dp.vsctl(
            "--may-exist",
            "add-port",
            BRIDGE,
            host,
            "--",
            "set",
            "interface",
            host,
            *(f'external_ids:{k}="{v}"' for k, v in external_ids.items()),
        )
        self.dp.exec_in(netns, ["ip", "-batch", "-"], stdin=_ip_batch(plan))
        # A veth hands TCP/UDP packets to its peer with the checksum left to the NIC; the
        # userspace datapath forwards them as they are, so the receiver would drop them.
        self.dp.exec_in(netns, ["ethtool", "-K", plan.ifname, "tx", "off"])

    def _ensure_up(self, host: str) -> None:
        """The host end is administratively up once OVS has the port (see `_plug`)."""
        link = self.dp.exec_in(self.dp.ovs_netns, ["ip", "-o", "link", "show", "dev", host])
        flags = link.partition("<")[2].partition(">")[0].split(",")
        if "UP" not in flags:
            LOG.warning("interface %s went down while OVS added it; setting it up again", host)
            self.dp.exec_in(self.dp.ovs_netns, ["ip", "link", "set", host, "up"])

    def _link_exists(self, netns: str, name: str) -> bool:
        try:
            self.dp.exec_in(netns, ["ip", "link", "show", "dev", name])
        except SandboxError:
            return False
        return True

    def interfaces(self) -> dict[str, dict[str, str]]:
        """Every OVS interface: name -> its external_ids."""
        out = json.loads(
            self.dp.vsctl("--format=json", "--columns=name,external_ids", "list", "interface")
        )
        result: dict[str, dict[str, str]] = {}
        for name, ids in out.get("data", []):
            # ovsdb's JSON map: ["map", [[k, v], ...]]
            result[str(name)] = {str(k): str(v) for k, v in ids[1]}
        return result

    def _interfaces(self, key: str, value: str) -> list[str]:
        return sorted(n for n, ids in self.interfaces().items() if ids.get(key) == value)

    def _clean_duplicates(self, port: str, host: str) -> None:
        for iface in self._interfaces("iface-id", port):
            if iface != host:
                LOG.info("removing stale interface %s that claimed port %s", iface, port)
                self._unplug(iface)

    def _unplug(self, iface: str) -> None:
        self.dp.vsctl("--if-exists", "--with-iface", "del-port", BRIDGE, iface)
        if self._link_exists(self.dp.ovs_netns, iface):
            self.dp.exec_in(self.dp.ovs_netns, ["ip", "link", "del", iface])

    def _wait_bound(self, port: str, host: str, deadline: float) -> None:
        while True:
            out = self.dp.vsctl(
                "--if-exists", "get", "interface", host, "external_ids:ovn-installed"
            ).strip()
            if out == '"true"':
                return
            if time.monotonic() > deadline:
                raise WiringError(
                    f"port {port} (interface {host}) not bound after {self.bind_timeout}s "
                    "(no external_ids:ovn-installed; is the port in the NB?)"
                )
            time.sleep(0.02)

    def _gateway_check(self, netns: str, plan: NicPlan, deadline: float) -> None:
        for gw in plan.gateways:
            while gw and self.dp.ping(netns, gw) is None:
                if time.monotonic() > deadline:
                    raise WiringError(f"{plan.port}: gateway {gw} does not answer")

    # --- introspection (tests, demo) -------------------------------------------------------------
    def wired_ports(self) -> dict[str, str]:
        """iface-id -> interface of every pod or node interface plugged into br-int."""
        return {
            ids["iface-id"]: name
            for name, ids in self.interfaces().items()
            if "iface-id" in ids and ("pod_uid" in ids or "node_name" in ids)
        }


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def first_address(plans: Iterable[NicPlan], version: int = 4) -> str:
    """The first address of IP `version` among `plans` (for tests and the demo)."""
    for plan in plans:
        for addr in plan.addresses:
            ip = ipaddress.ip_interface(addr).ip
            if ip.version == version:
                return str(ip)
    return ""
