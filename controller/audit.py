"""Read-only consistency audit of a cluster's pod networking (pure: no I/O).

`audit(snapshot, config)` compares everything the pod flows of kube-ovn.md section 1 leave behind
for each pod network: the pod's `<provider>.kubernetes.io/*` annotations, its IP CR (5.8), its
logical switch port (4.1, OVN providers only), and its src-ip route / NAT rules on the cluster
router (1.7). It returns an `AuditReport` of `Finding`s; `ClusterSnapshot` is what the caller
(`controller.check`) fetched from the API server and the NB database.

What is checked (the `KIND_*` constants name each finding):

* every alive, non-hostNetwork pod: the annotations are well formed and match the subnet
  (`annotation-mismatch`, `address-outside-subnet`); the IP CR exists and says the same
  (`ip-cr-missing`, `ip-cr-mismatch`); OVN networks have their LSP on the right switch with the
  right MAC and addresses, port_security too when set (`lsp-missing`, `lsp-mismatch`,
  `lsp-address-mismatch`); routed pods of the default VPC's overlay subnets have their src-ip
  routes (`route-missing`, `route-mismatch`) and EIP/SNAT NAT rules (`nat-missing`);
* every node holding a join address: its `node-<name>` LSP and IP CR;
* no address or MAC is held by two owners in one subnet, counting pod annotations, IP CRs and
  LSPs together (`duplicate-address`, `duplicate-mac`); an owner is the shared LSP / IP CR name;
* security (when the snapshot has the port groups): an OVN port has port_security exactly when
  its pod asks for it, its `security_groups` are the pod's (none without port security), and
  it is a member of each of those groups and of the deny-all group `kubeovn_deny_all`; no
  port is a member of a group it is not associated with (`sg-mismatch`);
* nothing is left behind: kube-ovn LSPs, IP CRs, src-ip host routes and NAT rules whose owner is
  gone (`orphan-lsp`, `orphan-ip-cr`, `orphan-route`, `orphan-nat`);
* IPAM (`ipam-disagrees`): an audit cannot read the controller's memory, so it re-derives the
  state the controller would rebuild on restart (kube-ovn InitIPAM, 5.5: subnets, then the IP CRs
  of StatefulSet / VM pods, then every alive or StatefulSet pod, then nodes) and reports every
  address that rebuild could not give to its holder. Those are the addresses a restarted
  controller would hand out twice (kube-ovn #1969, #4304).

Legitimate exceptions, as the flows make them: a StatefulSet pod's LSP and IP CR outlive the pod
(IP CR `podType: StatefulSet`, or the sts pod still present though not alive) while the
StatefulSet exists, is not being deleted and still has that ordinal; likewise a VM's under
keep-vm-ip while the VM exists; `node-<name>` ports and CRs belong to existing nodes;
router-type ports and `localnet.<subnet>` ports are not pod ports; routes and NAT whose prefix
is a network (subnet routes) are not per-pod. IPAM-only attachments (provider without the `.ovn`
suffix) get an IP CR but no LSP.

Not yet converged is not wrong: an alive pod without an allocation, or allocated and scheduled
but not routed, goes to `AuditReport.pending`, which `ok` ignores and `settled` does not; the
caller decides (a fault-injection verdict waits for `settled`). The IP CR, port and routes of an
alive pod whose allocation was cleared (inspection found its port lost) are not orphans.

Not checked: attachment networks the pod asks for but has not been allocated (that needs the
NADs), security-group address sets and ACLs, kube-ovn's `appendCheckPodToDel` subnet-change rule
for kept addresses.
"""

from __future__ import annotations

import functools
import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller import annotations as ann
from controller.config import Config
from controller.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION_TEMPLATE,
    DEFAULT_NETWORK_ANNOTATION,
    DEFAULT_VPC,
    EIP_ANNOTATION,
    GATEWAY_ANNOTATION_TEMPLATE,
    GATEWAY_TYPE_DISTRIBUTED,
    IP_ADDRESS_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    LOCALNET_PORT_PREFIX,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    NODE_PORT_PREFIX,
    NORTH_GATEWAY_ANNOTATION,
    OVN_PROVIDER,
    POD_TYPE_STATEFULSET,
    POD_TYPE_VIRTUAL_MACHINE,
    POLICY_SRC_IP,
    ROUTED_ANNOTATION,
    SNAT_ANNOTATION,
    SUBNET_NAME_LABEL,
    annotation_key,
)
from controller.ipam import IPAM
from controller.ipam.errors import IPAMError
from controller.model import Namespace, Node, Pod, StatefulSet, Subnet, VirtualMachine, Vpc
from controller.naming import ip_cr_name, node_port_name, pod_key
from controller.netutil import is_valid_mac, parse_cidr, parse_ip
from controller.ovn import external_ids as ext
from controller.ovn.api import NatRule, PortGroupInfo, PortInfo, StaticRoute
from controller.ovn.logic import sg_eligible
from controller.pod_logic import (
    get_name_by_pod,
    is_ovn_provider,
    is_pod_alive,
    is_statefulset_pod,
    is_statefulset_pod_to_del,
    is_vm_pod,
    is_vm_pod_to_del,
)

KIND_MALFORMED = "malformed-object"
KIND_POD_NOT_ALLOCATED = "pod-not-allocated"
KIND_POD_NOT_ROUTED = "pod-not-routed"
KIND_ANNOTATION_MISMATCH = "annotation-mismatch"
KIND_ADDRESS_OUTSIDE_SUBNET = "address-outside-subnet"
KIND_DUPLICATE_ADDRESS = "duplicate-address"
KIND_DUPLICATE_MAC = "duplicate-mac"
KIND_IP_CR_MISSING = "ip-cr-missing"
KIND_IP_CR_MISMATCH = "ip-cr-mismatch"
KIND_LSP_MISSING = "lsp-missing"
KIND_LSP_MISMATCH = "lsp-mismatch"
KIND_LSP_ADDRESS_MISMATCH = "lsp-address-mismatch"
KIND_ROUTE_MISSING = "route-missing"
KIND_ROUTE_MISMATCH = "route-mismatch"
KIND_NAT_MISSING = "nat-missing"
KIND_ORPHAN_LSP = "orphan-lsp"
KIND_ORPHAN_IP_CR = "orphan-ip-cr"
KIND_ORPHAN_ROUTE = "orphan-route"
KIND_ORPHAN_NAT = "orphan-nat"
KIND_IPAM_DISAGREES = "ipam-disagrees"
KIND_SG_MISMATCH = "sg-mismatch"

#: Kinds that mean "not converged yet" rather than "wrong".
PENDING_KINDS = frozenset({KIND_POD_NOT_ALLOCATED, KIND_POD_NOT_ROUTED})

_KEPT_POD_TYPES = (POD_TYPE_STATEFULSET, POD_TYPE_VIRTUAL_MACHINE)
_IP_ADDRESS_SUFFIX = IP_ADDRESS_ANNOTATION_TEMPLATE.format(provider="")


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything the audit reads, fetched once (the caller decides how and when).

    `ips` are raw IP CR dicts (their schema is loose, the audit reads them defensively);
    `routes` and `nat_rules` are those of the cluster router. `problems` lists objects the
    collector could not convert (reported as `malformed-object`). `now` is the time the pods were
    listed, used for the liveness predicate. `statefulsets` / `virtual_machines` are None when
    not read: every StatefulSet / VM address is then taken as legitimately kept.
    """

    now: datetime
    pods: tuple[Pod, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    subnets: tuple[Subnet, ...] = ()
    nodes: tuple[Node, ...] = ()
    ips: tuple[Mapping[str, Any], ...] = ()
    vpcs: tuple[Vpc, ...] = ()
    ports: tuple[PortInfo, ...] = ()
    routes: tuple[StaticRoute, ...] = ()
    nat_rules: tuple[NatRule, ...] = ()
    port_groups: tuple[PortGroupInfo, ...] | None = None  # None: security groups not read
    problems: tuple[str, ...] = ()
    statefulsets: tuple[StatefulSet, ...] | None = None
    virtual_machines: tuple[VirtualMachine, ...] | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement: `kind` (a KIND_* constant), the `object` it is about, and why."""

    kind: str
    object: str
    message: str


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The audit's result. `findings` are errors; `pending` are pods not converged yet."""

    findings: tuple[Finding, ...]
    pending: tuple[Finding, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No disagreement (pods still converging are allowed)."""
        return not self.findings

    @property
    def settled(self) -> bool:
        """No disagreement and nothing pending."""
        return not self.findings and not self.pending

    def kinds(self) -> dict[str, int]:
        """Number of findings (pending included) per kind."""
        out: dict[str, int] = defaultdict(int)
        for f in (*self.findings, *self.pending):
            out[f.kind] += 1
        return dict(out)

    def render(self) -> str:
        """A readable report: a summary line, then findings grouped by kind, with counts."""
        checked = ", ".join(f"{n} {what}" for what, n in self.counts.items())
        if self.settled:
            status = "OK"
        elif self.ok:
            status = f"OK, {len(self.pending)} pending"
        else:
            status = f"{len(self.findings)} finding(s), {len(self.pending)} pending"
        lines = [f"cluster audit: {status}" + (f" (checked {checked})" if checked else "")]
        lines.extend(_render_group(self.findings, ""))
        if self.pending:
            lines.append("pending (not converged yet):")
            lines.extend(_render_group(self.pending, "  "))
        return "\n".join(lines) + "\n"


def _render_group(findings: Iterable[Finding], indent: str) -> list[str]:
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_kind[f.kind].append(f)
    lines = []
    for kind in sorted(by_kind):
        group = sorted(by_kind[kind], key=lambda f: (f.object, f.message))
        lines.append(f"{indent}{kind} ({len(group)}):")
        lines.extend(f"{indent}  {f.object}: {f.message}" for f in group)
    return lines


# --- helpers ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)
def _canon_ip(text: str) -> str | None:
    ip = parse_ip(text.strip())
    return None if ip is None else str(ip)


def _split_ips(text: str) -> list[str] | None:
    """Canonical addresses of a comma list; None when any part does not parse."""
    out = []
    for part in text.split(","):
        ip = _canon_ip(part)
        if ip is None:
            return None
        out.append(ip)
    return out


def _host_prefix(prefix: str) -> str | None:
    """The address of a host prefix ("10.0.0.5", "10.0.0.5/32"); None for a network."""
    if "/" not in prefix:
        return _canon_ip(prefix)
    parsed = parse_cidr(prefix)
    if parsed is None or parsed[1].prefixlen != parsed[1].max_prefixlen:
        return None
    return str(parsed[0])


def _first_of_family(addresses: str, ip: str) -> str:
    return next((x.strip() for x in addresses.split(",") if x.strip() and _same_family(x, ip)), "")


def _same_family(a: str, b: str) -> bool:
    x, y = parse_ip(a), parse_ip(b)
    return x is not None and y is not None and x.version == y.version


@functools.lru_cache(maxsize=1 << 16)
def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@functools.lru_cache(maxsize=1024)
def _networks(cidr: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    nets = []
    for part in cidr.split(","):
        parsed = parse_cidr(part.strip())
        if parsed is not None:
            nets.append(parsed[1])
    return tuple(nets)


def _outside(ip: str, subnet: Subnet) -> str:
    """Why `ip` cannot belong to the subnet ("" when it can)."""
    addr = _ip(ip)
    same_family = [n for n in _networks(subnet.cidr_block) if n.version == addr.version]
    if not same_family:
        return f"{ip} has no IPv{addr.version} block in subnet {subnet.name} ({subnet.cidr_block})"
    for net in same_family:
        if addr in net:
            if addr in (net.network_address, net.broadcast_address) and net.num_addresses > 2:
                return f"{ip} is the network or broadcast address of {net}"
            return ""
    return f"{ip} is outside subnet {subnet.name} ({subnet.cidr_block})"


def _str(raw: Mapping[str, Any], *path: str) -> str:
    node: Any = raw
    for part in path:
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    return node if isinstance(node, str) else ""


def _owner_hint(pod_type: str) -> str:
    if pod_type == POD_TYPE_STATEFULSET:
        return " (its StatefulSet is gone, being deleted or scaled below this ordinal)"
    if pod_type == POD_TYPE_VIRTUAL_MACHINE:
        return " (its VirtualMachine is gone or being deleted)"
    return ""


def _lsp_addresses(port: PortInfo) -> tuple[str, list[str]] | None:
    """(mac, canonical ips) of a port's first `addresses` entry; None for router/unknown/etc."""
    if not port.addresses:
        return None
    tokens = port.addresses[0].split()
    if not tokens or not is_valid_mac(tokens[0]):
        return None
    ips = [_canon_ip(t) for t in tokens[1:]]
    return tokens[0].lower(), [ip for ip in ips if ip is not None]


@dataclass(frozen=True, slots=True)
class _Net:
    """One allocated network of an alive pod, read from its annotations."""

    pod: Pod
    provider: str
    owner: str  # the LSP / IP CR name
    pod_name: str  # the VM name under keep-vm-ip
    ips: tuple[str, ...]
    mac: str
    switch: str


class _Auditor:
    def __init__(self, snap: ClusterSnapshot, config: Config) -> None:
        self.snap = snap
        self.config = config
        self.findings: list[Finding] = []
        self.pending: list[Finding] = []
        self.subnets = {s.name: s for s in snap.subnets}
        self.nodes = {n.name: n for n in snap.nodes}
        self.ports = {p.name: p for p in snap.ports}
        self.port_groups: dict[str, frozenset[str]] | None = None
        if snap.port_groups is not None:
            self.port_groups = {g.sg: frozenset(g.ports) for g in snap.port_groups if g.sg}
        self.ip_crs: dict[str, Mapping[str, Any]] = {}
        for raw in snap.ips:
            name = _str(raw, "metadata", "name")
            if name:
                self.ip_crs[name] = raw
            else:
                self.add(KIND_MALFORMED, "IP <unnamed>", "IP CR without metadata.name")
        self.keep_vm_ip = config.enable_keep_vm_ip
        self.statefulsets: dict[tuple[str, str], StatefulSet] | None = None
        if snap.statefulsets is not None:
            self.statefulsets = {(x.namespace, x.name): x for x in snap.statefulsets}
        self.vms: dict[tuple[str, str], VirtualMachine] | None = None
        if snap.virtual_machines is not None:
            self.vms = {(x.namespace, x.name): x for x in snap.virtual_machines}
        self.alive = [p for p in snap.pods if not p.host_network and is_pod_alive(p, snap.now)]
        self.nets: list[_Net] = []
        # owner names (LSP / IP CR) legitimately present
        self.expected: set[str] = set()
        self.kept: set[str] = set()
        # (subnet, value) -> owner -> sources
        self.ip_claims: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(
            lambda: defaultdict(set)
        )
        self.mac_claims: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(
            lambda: defaultdict(set)
        )
        self.alive_ips: set[str] = set()
        self.routes_by_ip: dict[str, list[StaticRoute]] = defaultdict(list)
        for r in snap.routes:
            host = _host_prefix(r.ip_prefix)
            if host is not None:
                self.routes_by_ip[host].append(r)
        self.nat_by_ip: dict[str, list[NatRule]] = defaultdict(list)
        for n in snap.nat_rules:
            host = _host_prefix(n.logical_ip)
            if host is not None:
                self.nat_by_ip[host].append(n)

    def add(self, kind: str, obj: str, message: str) -> None:
        target = self.pending if kind in PENDING_KINDS else self.findings
        target.append(Finding(kind, obj, message))

    # -- pods --------------------------------------------------------------------------------

    def owner_keeps(self, pod_type: str, namespace: str, name: str, owner: str = "") -> bool:
        """May the network of StatefulSet pod / VM `name` outlive its pod? kube-ovn releases it
        once `isStatefulSetPodToDel` / `isVmPodToDel` hold; True when owners were not read."""
        if pod_type == POD_TYPE_STATEFULSET:
            if self.statefulsets is None:
                return True
            sts = self.statefulsets.get((namespace, owner or name.rpartition("-")[0]))
            return not is_statefulset_pod_to_del(Pod(namespace, name), sts)
        if pod_type == POD_TYPE_VIRTUAL_MACHINE:
            if self.vms is None:
                return True
            return not is_vm_pod_to_del(self.vms.get((namespace, name)))
        return False

    def read_pods(self) -> None:
        for pod in self.snap.pods:
            is_sts, sts_name = is_statefulset_pod(pod)
            is_vm = is_vm_pod(pod)[0] and self.keep_vm_ip
            if pod.host_network or not (is_sts or is_vm):
                continue
            name = get_name_by_pod(pod, self.keep_vm_ip)
            pod_type = POD_TYPE_STATEFULSET if is_sts else POD_TYPE_VIRTUAL_MACHINE
            if self.owner_keeps(pod_type, pod.namespace, name, sts_name if is_sts else ""):
                for provider in ann.allocated_providers(pod.annotations):
                    self.kept.add(ip_cr_name(name, pod.namespace, provider))
                # NOTE: while the kept pod object exists (terminating on a node that never
                # confirms), its update events change nothing and no delete runs, so its
                # src-ip route and NAT stay, as in kube-ovn; they are not orphans.
                self.alive_ips.update(
                    _split_ips(pod.annotations.get(IP_ADDRESS_ANNOTATION, "")) or ()
                )
        for pod in self.alive:
            self.read_pod(pod)
            # NOTE: inspection clears `allocated` when the port is lost and re-adds the pod; until
            # then its IP CR (and any port) still belong to an alive pod, not to nobody.
            name = get_name_by_pod(pod, self.keep_vm_ip)
            for key in pod.annotations:
                if key.endswith(_IP_ADDRESS_SUFFIX) and len(key) > len(_IP_ADDRESS_SUFFIX):
                    provider = key[: -len(_IP_ADDRESS_SUFFIX)]
                    self.kept.add(ip_cr_name(name, pod.namespace, provider))
                    self.alive_ips.update(_split_ips(pod.annotations[key]) or ())

    def read_pod(self, pod: Pod) -> None:
        a = pod.annotations
        providers = ann.allocated_providers(a)
        obj = f"pod {pod.key}"
        if not providers or (
            DEFAULT_NETWORK_ANNOTATION not in a and a.get(ALLOCATED_ANNOTATION) != "true"
        ):
            self.add(KIND_POD_NOT_ALLOCATED, obj, "alive pod has no allocated default network")
        elif pod.node_name and a.get(ROUTED_ANNOTATION) != "true" and OVN_PROVIDER in providers:
            self.add(KIND_POD_NOT_ROUTED, obj, f"scheduled on {pod.node_name} but not routed")
        if a.get(ROUTED_ANNOTATION) == "true" and not pod.node_name:
            self.add(KIND_ANNOTATION_MISMATCH, obj, "routed=true but the pod has no nodeName")
        name = get_name_by_pod(pod, self.keep_vm_ip)
        for provider in providers:
            net = self.read_net(pod, provider, name)
            if net is not None:
                self.nets.append(net)

    def read_net(self, pod: Pod, provider: str, name: str) -> _Net | None:
        a = pod.annotations
        obj = f"pod {pod.key}" + ("" if provider == OVN_PROVIDER else f" ({provider})")
        switch = a.get(annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), "")
        ip_text = a.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
        mac = a.get(annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
        owner = ip_cr_name(name, pod.namespace, provider)
        self.expected.add(owner)
        ips = _split_ips(ip_text) if ip_text else None
        problems = []
        if ips is None:
            problems.append(f"allocated but ip_address {ip_text!r} is not a list of addresses")
        if not is_valid_mac(mac):
            problems.append(f"allocated but mac_address {mac!r} is not a MAC")
        subnet = self.subnets.get(switch)
        if subnet is None:
            problems.append(f"logical_switch {switch!r} is not an existing subnet")
        else:
            cidr = a.get(annotation_key(CIDR_ANNOTATION_TEMPLATE, provider), "")
            gateway = a.get(annotation_key(GATEWAY_ANNOTATION_TEMPLATE, provider), "")
            if cidr != subnet.cidr_block:
                problems.append(f"cidr {cidr!r} but subnet {switch} has {subnet.cidr_block!r}")
            if gateway != subnet.gateway:
                problems.append(f"gateway {gateway!r} but subnet {switch} has {subnet.gateway!r}")
        for problem in problems:
            self.add(KIND_ANNOTATION_MISMATCH, obj, problem)
        if ips is None:
            return None
        if subnet is not None:
            for ip in ips:
                why = _outside(ip, subnet)
                if why:
                    self.add(KIND_ADDRESS_OUTSIDE_SUBNET, obj, why)
        self.alive_ips.update(ips)
        for ip in ips:
            self.ip_claims[(switch, ip)][owner].add("pod")
        if is_valid_mac(mac):
            self.mac_claims[(switch, mac.lower())][owner].add("pod")
        return _Net(
            pod,
            provider,
            owner,
            name,
            tuple(ips),
            mac.lower(),
            switch,
        )

    # -- per-network objects -----------------------------------------------------------------

    def check_ip_cr(self, obj: str, owner: str, want: Mapping[str, str]) -> None:
        raw = self.ip_crs.get(owner)
        if raw is None:
            self.add(KIND_IP_CR_MISSING, obj, f"no IP CR {owner}")
            return
        for fld, value in want.items():
            have = _str(raw, "spec", fld)
            if fld == "ipAddress":
                same = _split_ips(have) == _split_ips(value) if have else not value
            elif fld == "macAddress":
                same = have.lower() == value.lower()
            else:
                same = have == value
            if not same:
                self.add(
                    KIND_IP_CR_MISMATCH, obj, f"IP CR {owner} has {fld} {have!r}, want {value!r}"
                )
        # NOTE: subnet status counters select IP CRs by these labels (kube-ovn createOrUpdateCrdIPs)
        meta = raw.get("metadata")
        labels = (meta.get("labels") if isinstance(meta, Mapping) else None) or {}
        subnet = want.get("subnet", "")
        if (
            isinstance(labels, Mapping)
            and subnet
            and (labels.get(SUBNET_NAME_LABEL) != subnet or subnet not in labels)
        ):
            self.add(
                KIND_IP_CR_MISMATCH,
                obj,
                f"IP CR {owner} labels {dict(labels)} lack {SUBNET_NAME_LABEL}={subnet} / {subnet}",
            )

    def check_lsp(
        self, obj: str, owner: str, switch: str, mac: str, ips: Sequence[str], pod_ref: str
    ) -> None:
        port = self.ports.get(owner)
        if port is None:
            self.add(KIND_LSP_MISSING, obj, f"no logical switch port {owner}")
            return
        if port.switch != switch:
            self.add(
                KIND_LSP_MISMATCH,
                obj,
                f"port {owner} is on switch {port.switch!r}, want {switch!r}",
            )
        have_pod = port.external_ids.get("pod", "")
        if pod_ref and have_pod != pod_ref:
            self.add(
                KIND_LSP_MISMATCH,
                obj,
                f"port {owner} has external_ids:pod={have_pod!r}, want {pod_ref!r}",
            )
        parsed = _lsp_addresses(port)
        want = f"{mac} {' '.join(ips)}"
        if parsed is None or parsed[0] != mac or sorted(parsed[1]) != sorted(ips):
            self.add(
                KIND_LSP_ADDRESS_MISMATCH,
                obj,
                f"port {owner} has addresses {list(port.addresses)}, want [{want!r}]",
            )
        if port.port_security:
            # NOTE: stale port_security drops the pod's traffic even when `addresses` is right;
            # dual stack entries carry masks (kube-ovn CreatePort), so compare bare addresses.
            tokens = port.port_security[0].split()
            have_ips = sorted(_canon_ip(t.split("/", 1)[0]) or t for t in tokens[1:])
            if not tokens or tokens[0].lower() != mac or have_ips != sorted(ips):
                self.add(
                    KIND_LSP_ADDRESS_MISMATCH,
                    obj,
                    f"port {owner} has port_security {list(port.port_security)}, want [{want!r}]",
                )

    def check_nets(self) -> None:
        for net in self.nets:
            pod = net.pod
            obj = f"pod {pod.key}" + ("" if net.provider == OVN_PROVIDER else f" ({net.provider})")
            self.check_ip_cr(
                obj,
                net.owner,
                {
                    "ipAddress": ",".join(net.ips),
                    "macAddress": net.mac,
                    "subnet": net.switch,
                    "namespace": pod.namespace,
                    "podName": net.pod_name,
                },
            )
            if is_ovn_provider(net.provider):
                self.check_lsp(
                    obj,
                    net.owner,
                    net.switch,
                    net.mac,
                    net.ips,
                    pod_key(pod.namespace, net.pod_name),
                )
                if self.port_groups is not None:
                    self.check_security(obj, net)
            if net.provider == OVN_PROVIDER:
                self.check_routing(net)

    def check_security(self, obj: str, net: _Net) -> None:
        """Port security and security-group membership of one OVN network's port."""
        port = self.ports.get(net.owner)
        groups = self.port_groups
        if port is None or groups is None:
            return
        request = ann.PodNetworkRequest.from_annotations(net.pod.annotations, net.provider)
        want = request.security_group_names() if request.port_security else ()
        if request.port_security != bool(port.port_security):
            have = "has" if port.port_security else "lacks"
            self.add(KIND_SG_MISMATCH, obj, f"port {net.owner} {have} port_security")
        have_sgs = ext.split_sgs(port.external_ids.get(ext.SECURITY_GROUPS_KEY, ""))
        if sorted(have_sgs) != sorted(want):
            self.add(
                KIND_SG_MISMATCH,
                obj,
                f"port {net.owner} has security_groups {list(have_sgs)}, want {list(want)}",
            )
        if not want or not port.port_security:
            return
        for sg in (*want, ext.DENY_ALL_SG):
            if net.owner not in groups.get(sg, ()):
                self.add(
                    KIND_SG_MISMATCH, obj, f"port {net.owner} missing from security group {sg}"
                )

    def check_port_groups(self) -> None:
        """No port stays in a security group it no longer belongs to."""
        if self.port_groups is None:
            return
        for sg, members in sorted(self.port_groups.items()):
            for name in sorted(members):
                port = self.ports.get(name)
                if port is None:
                    continue  # not a kube-ovn port
                ids = port.external_ids
                eligible = sg_eligible(port.port_security)
                if sg == ext.DENY_ALL_SG:
                    belongs = eligible and bool(ids.get(ext.SECURITY_GROUPS_KEY))
                else:
                    belongs = eligible and ids.get(ext.associated_sg_key(sg)) == "true"
                if not belongs:
                    self.add(
                        KIND_SG_MISMATCH,
                        f"security group {sg}",
                        f"port {name} is a member but not associated with it",
                    )

    def check_routing(self, net: _Net) -> None:
        pod = net.pod
        a = pod.annotations
        subnet = self.subnets.get(net.switch)
        if (
            a.get(ROUTED_ANNOTATION) != "true"
            or not pod.node_name  # reported as annotation-mismatch
            or subnet is None
            or subnet.vlan
            or subnet.vpc != DEFAULT_VPC
        ):
            return
        obj = f"pod {pod.key}"
        eip, snat = a.get(EIP_ANNOTATION, ""), a.get(SNAT_ANNOTATION, "")
        north = a.get(NORTH_GATEWAY_ANNOTATION, "")
        hops: list[str] | None = None  # None: any nexthop will do
        if self.config.enable_eip_snat and (eip or snat):
            hops = None  # via the external gateway (a ConfigMap the audit does not read)
        elif north:
            hops = [h.strip() for h in north.split(",")]
        elif subnet.gateway_type == GATEWAY_TYPE_DISTRIBUTED:
            node = self.nodes.get(pod.node_name)
            tunnel = node.annotations.get(IP_ADDRESS_ANNOTATION, "") if node else ""
            hops = [h.strip() for h in tunnel.split(",")] if tunnel else None
        else:
            return  # centralized: the subnet controller routes the whole CIDR
        for ip in net.ips:
            mine = [r for r in self.routes_by_ip.get(ip, []) if r.policy == POLICY_SRC_IP]
            if not mine:
                self.add(
                    KIND_ROUTE_MISSING,
                    obj,
                    f"no src-ip route for {ip} on {self.config.cluster_router}",
                )
                continue
            want = [h for h in hops or [] if _same_family(h, ip)]
            if want and not any(r.nexthop in want for r in mine):
                self.add(
                    KIND_ROUTE_MISMATCH,
                    obj,
                    f"src-ip route {ip} via {mine[0].nexthop}, want via {' or '.join(want)}",
                )
        if self.config.enable_eip_snat:
            for ip in net.ips:
                rules = self.nat_by_ip.get(ip, [])
                # each pod address is translated by the external address of its own family
                eip = _first_of_family(a.get(EIP_ANNOTATION, ""), ip)
                snat = _first_of_family(a.get(SNAT_ANNOTATION, ""), ip)
                if eip and not any(
                    n.type == NAT_TYPE_DNAT_AND_SNAT and n.external_ip == eip for n in rules
                ):
                    self.add(KIND_NAT_MISSING, obj, f"no dnat_and_snat {eip} -> {ip}")
                if snat and not any(
                    n.type == NAT_TYPE_SNAT and n.external_ip == snat for n in rules
                ):
                    self.add(KIND_NAT_MISSING, obj, f"no snat {ip} -> {snat}")

    # -- nodes -------------------------------------------------------------------------------

    def check_nodes(self) -> None:
        for node in self.snap.nodes:
            a = node.annotations
            if a.get(ALLOCATED_ANNOTATION) != "true":
                continue
            owner = node_port_name(node.name)
            obj = f"node {node.name}"
            ips = _split_ips(a.get(IP_ADDRESS_ANNOTATION, ""))
            mac = a.get(MAC_ADDRESS_ANNOTATION, "").lower()
            switch = a.get(LOGICAL_SWITCH_ANNOTATION, "") or self.config.node_switch
            if ips is None or not is_valid_mac(mac):
                self.add(
                    KIND_ANNOTATION_MISMATCH,
                    obj,
                    "allocated but ip_address / mac_address are not valid",
                )
                continue
            subnet = self.subnets.get(switch)
            for ip in ips:
                self.ip_claims[(switch, ip)][owner].add("node")
                why = _outside(ip, subnet) if subnet is not None else ""
                if why:
                    self.add(KIND_ADDRESS_OUTSIDE_SUBNET, obj, why)
            self.mac_claims[(switch, mac)][owner].add("node")
            want = {
                "ipAddress": ",".join(ips),
                "macAddress": mac,
                "subnet": switch,
                "namespace": "",
                "podName": node.name,
            }
            self.check_ip_cr(obj, owner, want)
            self.check_lsp(obj, owner, switch, mac, ips, "")

    # -- IP CRs and LSPs as claimants, orphans -----------------------------------------------

    def read_objects(self) -> None:
        for name, raw in sorted(self.ip_crs.items()):
            subnet_name = _str(raw, "spec", "subnet")
            ips = _split_ips(_str(raw, "spec", "ipAddress"))
            mac = _str(raw, "spec", "macAddress").lower()
            obj = f"IP {name}"
            pod_type = _str(raw, "spec", "podType")
            if pod_type in _KEPT_POD_TYPES and self.owner_keeps(
                pod_type, _str(raw, "spec", "namespace"), _str(raw, "spec", "podName")
            ):
                self.kept.add(name)
            if ips is None:
                self.add(
                    KIND_MALFORMED,
                    obj,
                    f"spec.ipAddress {_str(raw, 'spec', 'ipAddress')!r} is not a list of addresses",
                )
                continue
            subnet = self.subnets.get(subnet_name)
            for ip in ips:
                self.ip_claims[(subnet_name, ip)][name].add("ip-cr")
                why = _outside(ip, subnet) if subnet is not None else ""
                if why:
                    self.add(KIND_ADDRESS_OUTSIDE_SUBNET, obj, why)
            if is_valid_mac(mac):
                self.mac_claims[(subnet_name, mac)][name].add("ip-cr")
        for port in self.snap.ports:
            parsed = _lsp_addresses(port)
            if parsed is None:
                continue
            mac, ips = parsed
            subnet = self.subnets.get(port.switch)
            for ip in ips:
                self.ip_claims[(port.switch, ip)][port.name].add("lsp")
                why = _outside(ip, subnet) if subnet is not None else ""
                if why:
                    self.add(KIND_ADDRESS_OUTSIDE_SUBNET, f"port {port.name}", why)
            self.mac_claims[(port.switch, mac)][port.name].add("lsp")

    def _legit(self, name: str) -> bool:
        if name in self.expected or name in self.kept:
            return True
        if name.startswith(NODE_PORT_PREFIX):
            return name[len(NODE_PORT_PREFIX) :] in self.nodes
        return False

    def check_orphans(self) -> None:
        for port in self.snap.ports:
            if port.addresses[:1] == ("router",) or port.name.startswith(LOCALNET_PORT_PREFIX):
                continue  # switch-router links and localnet ports belong to subnets
            if not self._legit(port.name):
                owner = port.external_ids.get("pod", "") or "no pod"
                self.add(
                    KIND_ORPHAN_LSP,
                    f"port {port.name}",
                    f"kube-ovn port ({owner}, {list(port.addresses)}) on {port.switch!r} has "
                    "no alive pod, node or kept StatefulSet/VM address",
                )
        for name, raw in sorted(self.ip_crs.items()):
            if not self._legit(name):
                self.add(
                    KIND_ORPHAN_IP_CR,
                    f"IP {name}",
                    f"{_str(raw, 'spec', 'ipAddress')} in {_str(raw, 'spec', 'subnet')!r} "
                    f"(pod {_str(raw, 'spec', 'namespace')}/{_str(raw, 'spec', 'podName')}) "
                    "has no alive pod, node or kept StatefulSet/VM owner"
                    + _owner_hint(_str(raw, "spec", "podType")),
                )
        for route in self.snap.routes:
            host = _host_prefix(route.ip_prefix)
            if route.policy != POLICY_SRC_IP or host is None or host in self.alive_ips:
                continue
            self.add(
                KIND_ORPHAN_ROUTE,
                f"route {route.ip_prefix}",
                f"src-ip route via {route.nexthop} on {route.router}: no alive pod has {host}",
            )
        for nat in self.snap.nat_rules:
            host = _host_prefix(nat.logical_ip)
            if host is None or host in self.alive_ips:
                continue
            self.add(
                KIND_ORPHAN_NAT,
                f"nat {nat.type} {nat.logical_ip}",
                f"{nat.type} {nat.external_ip} on {nat.router}: no alive pod has {host}",
            )

    def check_duplicates(self) -> None:
        for kind, claims in (
            (KIND_DUPLICATE_ADDRESS, self.ip_claims),
            (KIND_DUPLICATE_MAC, self.mac_claims),
        ):
            for (subnet, value), owners in sorted(claims.items()):
                if len(owners) < 2:
                    continue
                holders = ", ".join(
                    f"{o} [{', '.join(sorted(src))}]" for o, src in sorted(owners.items())
                )
                self.add(kind, f"{value} in {subnet or '<no subnet>'}", f"held by {holders}")

    # -- IPAM --------------------------------------------------------------------------------

    def check_ipam(self) -> None:
        """Rebuild IPAM as kube-ovn InitIPAM does and report what it cannot restore."""
        ipam = IPAM()
        for subnet in self.snap.subnets:
            try:
                ipam.add_or_update_subnet(subnet.name, subnet.cidr_block, subnet.exclude_ips)
            except IPAMError as e:
                self.add(KIND_IPAM_DISAGREES, f"subnet {subnet.name}", f"cannot be loaded: {e}")

        def claim(obj: str, key: str, ip: str, mac: str, subnet: str) -> None:
            try:
                ipam.get_static_address(key, ip, mac, subnet)
            except IPAMError as e:
                holders = {
                    owner
                    for part in ip.split(",")
                    if (owner := ipam.get_ip_owner(part.strip(), subnet)) not in (None, key)
                    and owner not in str(e)
                }
                held = f" (held by {', '.join(sorted(holders))})" if holders else ""
                self.add(
                    KIND_IPAM_DISAGREES,
                    obj,
                    f"a restarted controller cannot give {ip} in {subnet!r} to {key}: {e}{held}",
                )

        for name, raw in sorted(self.ip_crs.items()):
            if _str(raw, "spec", "podType") not in _KEPT_POD_TYPES:
                continue
            ns, pod_name = _str(raw, "spec", "namespace"), _str(raw, "spec", "podName")
            key = pod_key(ns, pod_name) if ns else node_port_name(pod_name)
            ip = _str(raw, "spec", "ipAddress")
            if ip and _split_ips(ip) is not None:
                claim(
                    f"IP {name}",
                    key,
                    ip,
                    _str(raw, "spec", "macAddress"),
                    _str(raw, "spec", "subnet"),
                )
        claimed: set[str] = set()
        for pod in self.snap.pods:
            alive = not pod.host_network and is_pod_alive(pod, self.snap.now)
            if pod.host_network or not (alive or is_statefulset_pod(pod)[0]):
                continue
            name = get_name_by_pod(pod, self.keep_vm_ip)
            for provider in ann.allocated_providers(pod.annotations):
                a = pod.annotations
                ip = a.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
                if not ip or _split_ips(ip) is None:
                    continue  # reported as annotation-mismatch (alive) or irrelevant
                owner = ip_cr_name(name, pod.namespace, provider)
                if owner in claimed:
                    continue  # VM pods of one VM share the VM's address
                claimed.add(owner)
                obj = f"pod {pod.key}" + ("" if provider == OVN_PROVIDER else f" ({provider})")
                claim(
                    obj,
                    pod_key(pod.namespace, name),
                    ip,
                    a.get(annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider), ""),
                    a.get(annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""),
                )
        for node in self.snap.nodes:
            a = node.annotations
            ip = a.get(IP_ADDRESS_ANNOTATION, "")
            if a.get(ALLOCATED_ANNOTATION) != "true" or not ip or _split_ips(ip) is None:
                continue
            claim(
                f"node {node.name}",
                node_port_name(node.name),
                ip,
                a.get(MAC_ADDRESS_ANNOTATION, ""),
                a.get(LOGICAL_SWITCH_ANNOTATION, "") or self.config.node_switch,
            )


def audit(snapshot: ClusterSnapshot, config: Config) -> AuditReport:
    """Check `snapshot` (see the module docstring); never raises on odd data, reports it."""
    a = _Auditor(snapshot, config)
    for problem in snapshot.problems:
        # the collector's messages read "<Kind> '<name>': <what is wrong>"
        obj, sep, message = problem.partition(": ")
        a.add(KIND_MALFORMED, obj if sep else "object", message if sep else problem)
    a.read_pods()
    a.check_nets()
    a.check_port_groups()
    a.check_nodes()
    a.read_objects()
    a.check_orphans()
    a.check_duplicates()
    a.check_ipam()
    counts = {
        "pods": len(a.alive),
        "ports": len(snapshot.ports),
        "IP CRs": len(snapshot.ips),
        "routes": len(snapshot.routes),
        "NAT rules": len(snapshot.nat_rules),
    }
    return AuditReport(tuple(a.findings), tuple(a.pending), counts)
