"""The audit's shared state: indexes over one snapshot, the findings so far, and the helpers
every check uses (field access on loose dicts, the subnet-membership reason, LSP addresses)."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.audit import security_groups as sgaudit
from controller.audit.findings import (
    KIND_ADDRESS_OUTSIDE_SUBNET,
    KIND_MALFORMED,
    KIND_POD_NOT_ALLOCATED,
    KIND_POD_REFUSED,
    KIND_POD_STALLED,
    PENDING_KINDS,
    ClusterSnapshot,
    Finding,
)
from controller.config import Config
from controller.core.address import (
    canonical_ip,
    canonical_mac,
    host_prefix,
    is_valid_mac,
    networks,
    parse_ip,
)
from controller.core.constants import (
    EVENT_TYPE_WARNING,
    POD_TYPE_STATEFULSET,
    POD_TYPE_VIRTUAL_MACHINE,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_CREATE_OVN_PORT_FAILED,
    REASON_GET_VLAN_INFO_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
)
from controller.core.model import Pod, Subnet
from controller.ovn.api import NatRule, PortInfo, StaticRoute
from controller.pod_logic import is_pod_alive
from controller.view import ListedOwners, OwnerApi, OwnerLookup

# --- helpers ---------------------------------------------------------------------------------


_parse_canonical = functools.lru_cache(maxsize=1 << 16)(parse_ip)


def outside_reason(ip: str, subnet: Subnet) -> str:
    """Why `ip` cannot belong to the subnet ("" when it can)."""
    addr = _parse_canonical(ip)
    if addr is None:
        return f"{ip} is not an address"
    blocks = [n for n in networks(subnet.cidr_block) if n.version == addr.version]
    if not blocks:
        return f"{ip} has no IPv{addr.version} block in subnet {subnet.name} ({subnet.cidr_block})"
    for net in blocks:
        if addr in net:
            if addr in (net.network_address, net.broadcast_address) and net.num_addresses > 2:
                return f"{ip} is the network or broadcast address of {net}"
            return ""
    return f"{ip} is outside subnet {subnet.name} ({subnet.cidr_block})"


def field_str(raw: Mapping[str, Any], *path: str) -> str:
    """The string at `path` of a loosely typed object, "" when absent or not a string."""
    node: Any = raw
    for part in path:
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    return node if isinstance(node, str) else ""


def owner_hint(pod_type: str) -> str:
    """Why an IP CR of `pod_type` is no longer kept, for the orphan message."""
    if pod_type == POD_TYPE_STATEFULSET:
        return " (its StatefulSet is gone, being deleted or scaled below this ordinal)"
    if pod_type == POD_TYPE_VIRTUAL_MACHINE:
        return " (its VirtualMachine is gone or being deleted)"
    return ""


def lsp_addresses(port: PortInfo) -> tuple[str, list[str]] | None:
    """(mac, canonical ips) of a port's first `addresses` entry; None for router/unknown/etc."""
    if not port.addresses:
        return None
    tokens = port.addresses[0].split()
    if not tokens or not is_valid_mac(tokens[0]):
        return None
    ips = [canonical_ip(t) for t in tokens[1:]]
    return canonical_mac(tokens[0]), [ip for ip in ips if ip is not None]


#: The Warning Events the pod add records when it gives a pod no network (kube-ovn's reasons).
REFUSAL_REASONS = frozenset(
    {
        REASON_VALIDATE_POD_NETWORK_FAILED,
        REASON_ACQUIRE_ADDRESS_FAILED,
        REASON_GET_VLAN_INFO_FAILED,
        REASON_CREATE_OVN_PORT_FAILED,
    }
)


def refusals_by_pod(events: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """pod key -> (the pod UID the Events name, or "", their reasons and latest messages),
    from the Warning Events with a refusal reason; the Events of the newest UID win."""
    latest: dict[str, dict[str, tuple[str, str, str]]] = {}  # key -> reason -> (uid, at, msg)
    for event in events:
        if field_str(event, "type") != EVENT_TYPE_WARNING:
            continue
        reason = field_str(event, "reason")
        if reason not in REFUSAL_REASONS or field_str(event, "involvedObject", "kind") != "Pod":
            continue
        namespace = field_str(event, "involvedObject", "namespace")
        key = f"{namespace}/{field_str(event, 'involvedObject', 'name')}"
        uid = field_str(event, "involvedObject", "uid")
        at = (
            field_str(event, "lastTimestamp")
            or field_str(event, "eventTime")
            or field_str(event, "metadata", "creationTimestamp")
        )
        have = latest.setdefault(key, {}).get(reason)
        if have is None or at >= have[1]:
            latest[key][reason] = (uid, at, field_str(event, "message"))
    out: dict[str, tuple[str, str]] = {}
    for key, reasons in latest.items():
        uids = {uid for uid, _, _ in reasons.values()}
        newest = max(reasons.values(), key=lambda v: v[1])[0] if len(uids) > 1 else uids.pop()
        text = "; ".join(
            f"{reason}: {msg}" for reason, (uid, _, msg) in sorted(reasons.items()) if uid == newest
        )
        out[key] = (newest, text)
    return out


@dataclass(frozen=True, slots=True)
class Net:
    """One allocated network of an alive pod, read from its annotations."""

    pod: Pod
    provider: str
    owner: str  # the LSP / IP CR name
    pod_name: str  # the VM name under keep-vm-ip
    ips: tuple[str, ...]
    mac: str
    switch: str


class AuditState:
    """The audit's indexes over one snapshot and the findings so far; the check mixins
    (`controller.audit.pods`, `.orphans`, `.ipam_rebuild`) add to them."""

    def __init__(
        self, snap: ClusterSnapshot, config: Config, owner_api: OwnerApi | None = None
    ) -> None:
        self.snap = snap
        self.config = config
        self.findings: list[Finding] = []
        self.pending: list[Finding] = []
        self.subnets = {s.name: s for s in snap.subnets}
        self.nodes = {n.name: n for n in snap.nodes}
        self.ports = {p.name: p for p in snap.ports}
        self.sg_names: set[str] | None = None
        if snap.security_groups is not None:
            self.sg_names = sgaudit.sg_names(snap.security_groups)
        self.port_groups: dict[str, frozenset[str]] | None = None
        if snap.port_groups is not None:
            self.port_groups = {g.sg: frozenset(g.ports) for g in snap.port_groups if g.sg}
        self.ip_crs: dict[str, Mapping[str, Any]] = {}
        for raw in snap.ips:
            name = field_str(raw, "metadata", "name")
            if name:
                self.ip_crs[name] = raw
            else:
                self.add(KIND_MALFORMED, "IP <unnamed>", "IP CR without metadata.name")
        self.keep_vm_ip = config.enable_keep_vm_ip
        # the listed owners are a snapshot that may lag: a release they say is confirmed by a
        # GET through `owner_api` (the controller's policy), so the audit and the controller
        # agree on what is kept
        self.owners = OwnerLookup(ListedOwners(snap.statefulsets, snap.virtual_machines, owner_api))
        self.alive = [p for p in snap.pods if not p.host_network and is_pod_alive(p, snap.now)]
        # pod key -> (uid or "", "<reason>: <message>; ...") of its refusal Warning Events
        self.refusals = refusals_by_pod(snap.events or ())
        self.nets: list[Net] = []
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
            host = host_prefix(r.ip_prefix)
            if host is not None:
                self.routes_by_ip[host].append(r)
        self.nat_by_ip: dict[str, list[NatRule]] = defaultdict(list)
        for n in snap.nat_rules:
            host = host_prefix(n.logical_ip)
            if host is not None:
                self.nat_by_ip[host].append(n)

    def add(self, kind: str, obj: str, message: str) -> None:
        target = self.pending if kind in PENDING_KINDS else self.findings
        target.append(Finding(kind, obj, message))

    def refused(self, pod: Pod) -> bool:
        """Does a refusal Warning Event name this pod (its UID, when the Event says one)?"""
        refused = self.refusals.get(pod.key)
        return refused is not None and (not refused[0] or refused[0] == pod.uid)

    def add_pending(self, kind: str, pod: Pod, message: str) -> None:
        """A pod not converged yet: pending, unless the controller refused it (a Warning Event
        with a refusal reason says why: `pod-refused`) or it has waited past the bound since
        its creation (`pod-stalled`)."""
        obj = f"pod {pod.key}"
        # an allocated pod's Events are about an earlier attempt, not why it waits now
        if kind == KIND_POD_NOT_ALLOCATED and self.refused(pod):
            self.add(KIND_POD_REFUSED, obj, self.refusals[pod.key][1])
            return
        bound, created = self.snap.pending_bound, self.snap.created.get(pod.key)
        if bound is not None and created is not None:
            age = (self.snap.now - created).total_seconds()
            if age > bound:
                self.add(
                    KIND_POD_STALLED,
                    obj,
                    f"{message}, {age:.0f} s after its creation (pending is bounded at"
                    f" {bound:.0f} s) and no Warning Event says why",
                )
                return
        self.add(kind, obj, message)

    def claim(
        self, obj: str, switch: str, owner: str, source: str, ips: Sequence[str], mac: str
    ) -> None:
        """`owner` holds `ips` (and `mac`, when it is a MAC) in `switch`, as `source` says;
        an address the switch's subnet cannot hold is reported against `obj`."""
        subnet = self.subnets.get(switch)
        for ip in ips:
            self.ip_claims[(switch, ip)][owner].add(source)
            why = outside_reason(ip, subnet) if subnet is not None else ""
            if why:
                self.add(KIND_ADDRESS_OUTSIDE_SUBNET, obj, why)
        if is_valid_mac(mac):
            self.mac_claims[(switch, canonical_mac(mac))][owner].add(source)
