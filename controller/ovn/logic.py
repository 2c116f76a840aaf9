"""Pure translation of NbClient requests into NB column values (no I/O, shared by both clients).

Every rule that decides *what* is stored lives here, so the ovsdbapp client and the in-memory
fake cannot disagree on it: the LSP columns kube-ovn's CreatePort writes, the canonical stored form
of a static route prefix (ovn-nbctl's: host routes without "/32" or "/128"), NAT argument checks,
and the IPs a port claims on its switch. Malformed input raises `InvalidRequestError`.
Addresses, CIDRs and MACs are read with `controller.core.address`'s rules (whitespace around
a value is allowed; a bare address is a host prefix; MACs are six colon-separated octets).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.core.address import (
    IPAddress,
    IPNetwork,
    canonical_ip,
    canonical_mac,
    is_colon_mac,
    parse_ip,
    parse_network,
)
from controller.core.constants import (
    POLICY_DST_IP,
    POLICY_SRC_IP,
    SECURITY_GROUP_DROP_PRIORITY,
    VENDOR,
)
from controller.core.naming import pod_key
from controller.core.security_group import Acl
from controller.ovn import external_ids as ext
from controller.ovn.api import (
    DuplicateAddressError,
    InvalidRequestError,
    NatChange,
    OvnConflictError,
    PortSpec,
    RouterPolicy,
    RoutingChange,
    SetChange,
)

ROUTE_POLICIES = (POLICY_DST_IP, POLICY_SRC_IP)
NAT_TYPES = ("snat", "dnat_and_snat")


@dataclass(frozen=True, slots=True)
class PortColumns:
    """The LSP columns one PortSpec asks for."""

    addresses: tuple[str, ...]
    port_security: tuple[str, ...]
    external_ids: Mapping[str, str]
    ips: tuple[str, ...]  # canonical, what the port claims on its switch
    security_groups: tuple[str, ...]  # empty unless port security is on (kube-ovn)


def checked_ip(value: str, what: str = "IP") -> IPAddress:
    """One address (whitespace around it allowed, `controller.core.address` rules otherwise)."""
    ip = parse_ip(value.strip())
    if ip is None:
        raise InvalidRequestError(f"invalid {what} {value!r}")
    return ip


def checked_cidr(value: str) -> IPNetwork:
    """A CIDR (host bits masked) or a bare address as its host network."""
    network = parse_network(value)
    if network is None:
        raise InvalidRequestError(f"invalid CIDR {value!r}")
    return network


def check_row_name(value: str, what: str) -> str:
    if not value or value != value.strip() or any(c in value for c in " \t\n,"):
        raise InvalidRequestError(f"invalid {what} name {value!r}")
    return value


def check_sg_names(names: Iterable[str]) -> tuple[str, ...]:
    """Security group names, each checked, in order and without repeats."""
    return tuple(dict.fromkeys(check_row_name(s, "security group") for s in names))


def port_columns(spec: PortSpec) -> PortColumns:
    """kube-ovn CreatePort's LSP columns for `spec` (kube-ovn v1.8.18 `pkg/ovs/ovn-nbctl.go`)."""
    check_row_name(spec.name, "port")
    check_row_name(spec.switch, "logical switch")
    if not is_colon_mac(spec.mac):
        raise InvalidRequestError(f"invalid MAC {spec.mac!r} for port {spec.name}")
    if not 1 <= len(spec.ips) <= 2:
        raise InvalidRequestError(f"port {spec.name} needs one IP per family, got {spec.ips!r}")
    ips = [checked_ip(ip) for ip in spec.ips]
    if len(ips) == 2 and ips[0].version == ips[1].version:
        raise InvalidRequestError(f"port {spec.name}: two IPs of the same family {spec.ips!r}")
    mac = canonical_mac(spec.mac)
    canon = tuple(str(ip) for ip in ips)
    addresses = (" ".join((mac, *canon)),)
    port_security: tuple[str, ...] = ()
    if spec.port_security:
        if len(ips) == 1:
            port_security = addresses
        else:
            # NOTE: kube-ovn masks dual-stack port security with the subnet prefix lengths.
            if len(spec.cidrs) != 2:
                raise InvalidRequestError(
                    f"port {spec.name}: dual-stack port security needs both subnet CIDRs"
                )
            nets = {n.version: n for n in map(checked_cidr, spec.cidrs)}
            try:
                masked = [f"{ip}/{nets[ip.version].prefixlen}" for ip in ips]
            except KeyError:
                raise InvalidRequestError(
                    f"port {spec.name}: CIDRs {spec.cidrs!r} do not match IPs {spec.ips!r}"
                ) from None
            port_security = (" ".join((mac, *masked)),)
    ids: dict[str, str] = {ext.VENDOR_KEY: VENDOR, ext.LS_KEY: spec.switch}
    if spec.pod_name and spec.pod_namespace:
        ids[ext.POD_KEY] = pod_key(spec.pod_namespace, spec.pod_name)
    sgs: tuple[str, ...] = ()
    if spec.port_security and spec.security_groups:
        sgs = check_sg_names(spec.security_groups)
        ids[ext.SECURITY_GROUPS_KEY] = ext.join_sgs(sgs)
        for sg in sgs:
            ids[ext.associated_sg_key(sg)] = "true"
    return PortColumns(addresses, port_security, ids, canon, sgs)


#: One ACL row a port group carries (the security-group rules' type, shared with the deny-all).
AclSpec = Acl


def deny_all_acls(port_group: str) -> tuple[AclSpec, AclSpec]:
    """kube-ovn CreateSgDenyAllPortGroup: drop all IP traffic to and from the group's ports.

    Members of a security group get this low-priority drop, so only what an SG rule (priority
    2004 and above) allows passes.
    """
    drop = SECURITY_GROUP_DROP_PRIORITY
    return (
        AclSpec("to-lport", drop, f"outport == @{port_group} && ip", "drop"),
        AclSpec("from-lport", drop, f"inport == @{port_group} && ip", "drop"),
    )


def duplicate_address(switch: str, ip: str, holder: str) -> DuplicateAddressError:
    """The error both clients raise when `ip` is already held by port `holder` on `switch`."""
    kind = "IPv6" if ":" in ip else "IPv4"
    return DuplicateAddressError(
        f"Error on switch {switch}: duplicate {kind} address '{ip}' found on "
        f"logical switch port '{holder}'"
    )


def deny_all_eligible(external_ids: Mapping[str, str], port_security: Sequence[str]) -> bool:
    """kube-ovn updateDenyAllSgPorts: a port with security groups and usable port_security."""
    return bool(external_ids.get(ext.SECURITY_GROUPS_KEY, "")) and sg_eligible(port_security)


def address_ips(addresses: Iterable[str]) -> set[str]:
    """Canonical IPs in LSP `addresses` entries ("MAC IP..."; "router"/"unknown" carry none)."""
    out: set[str] = set()
    for entry in addresses:
        out.update(ip for token in entry.split()[1:] if (ip := canonical_ip(token)) is not None)
    return out


def port_security_ips(port_security: Iterable[str]) -> list[str]:
    """The IPs of port_security entries, for the SG address sets.

    NOTE: kube-ovn copies the tokens as they are, so a dual-stack port ("mac v4/16 v6/64") puts
    whole subnets into the address set and an SG rule naming it would match every address of
    the subnet; we store the port's own addresses (the masks are dropped).
    """
    out: list[str] = []
    for entry in port_security:
        out.extend(token.split("/", 1)[0] for token in entry.split()[1:])
    return out


@dataclass(frozen=True, slots=True)
class SgChange:
    """What reconcile_port_sg does to one port: the external_ids it sets and the groups it
    leaves (`stale` minus `groups`) and joins."""

    changed: list[str]  # SGs added or removed, sorted (the verb's result)
    external_ids: dict[str, str]
    stale: set[str]  # groups the port may be in now
    groups: list[str]  # groups it must be in (none without usable port security)


def sg_change(
    external_ids: Mapping[str, str], port_security: Sequence[str], new: list[str]
) -> SgChange:
    """kube-ovn's SG update of a port: mark added/removed SGs, store the new list."""
    old = ext.split_sgs(external_ids.get(ext.SECURITY_GROUPS_KEY, ""))
    changed = sorted(set(old) ^ set(new))
    ids = {ext.associated_sg_key(sg): "true" if sg in new else "false" for sg in changed}
    ids[ext.SECURITY_GROUPS_KEY] = ext.join_sgs(new)
    stale = set(old) | ext.associated_sgs(dict(external_ids))
    return SgChange(changed, ids, stale, new if sg_eligible(port_security) else [])


def sg_address_sets(port_securities: Iterable[Sequence[str]]) -> dict[str, list[str]]:
    """An SG's "v4" and "v6" address set contents (sorted, unique) from its members."""
    ips = {ip for ps in port_securities for ip in port_security_ips(ps)}
    return {"v4": sorted(i for i in ips if ":" not in i), "v6": sorted(i for i in ips if ":" in i)}


def sg_eligible(port_security: Sequence[str]) -> bool:
    """kube-ovn syncs a port into SG port groups only if port_security has a MAC and an IP."""
    return any(len(entry.split()) >= 2 for entry in port_security)


def canonical_prefix(cidr: str) -> str:
    """ovn-nbctl's stored form: a host route without its mask, networks as network/len."""
    if "/" not in cidr:
        return str(checked_ip(cidr, "route prefix"))
    net = checked_cidr(cidr)
    if net.prefixlen == net.max_prefixlen:
        return str(net.network_address)
    return str(net)


def _family(value: str) -> int:
    return checked_cidr(value).version


def route_pairs(policy: str, cidr: str, nexthop: str) -> tuple[str, list[tuple[str, str]]]:
    """kube-ovn AddStaticRoute: pair comma-separated prefixes and nexthops by address family."""
    policy = policy or POLICY_DST_IP
    if policy not in ROUTE_POLICIES:
        raise InvalidRequestError(f"invalid route policy {policy!r}")
    prefixes = [c for c in cidr.split(",") if c.strip()]
    hops = [h for h in nexthop.split(",") if h.strip()]
    if not prefixes or not hops:
        raise InvalidRequestError(f"route needs a prefix and a nexthop ({cidr!r} -> {nexthop!r})")
    pairs = []
    for p in prefixes:
        canon = canonical_prefix(p)
        for h in hops:
            hop = checked_ip(h, "nexthop")
            if _family(canon) == hop.version:
                pairs.append((canon, str(hop)))
    if not pairs:
        raise InvalidRequestError(f"no nexthop of the same family for {cidr!r} in {nexthop!r}")
    return policy, pairs


def route_prefixes(cidr: str) -> list[str]:
    return [canonical_prefix(c) for c in cidr.split(",") if c.strip()]


def nat_rule_args(
    policy: str, logical_ip: str, external_ip: str, logical_mac: str, port: str
) -> tuple[str, str]:
    """Check update_nat_rule's arguments; return (logical IP, external IP or "") as stored."""
    lip = nat_logical_ip(policy, logical_ip)
    eip = str(checked_ip(external_ip, "NAT external IP")) if external_ip else ""
    check_nat_extras(policy, logical_mac, port)
    check_nat_family(lip, eip)
    return lip, eip


def check_nat_clash(router: str, policy: str, eip: str, clashing: Sequence[str]) -> None:
    """A new dnat_and_snat may not take an external IP other logical IPs (`clashing`) hold."""
    if policy == "dnat_and_snat" and clashing:
        raise OvnConflictError(
            f"router {router} already has a dnat_and_snat for {eip} (logical IP {clashing[0]})"
        )


def nat_logical_ip(policy: str, logical_ip: str) -> str:
    """snat takes a network or an IP; dnat_and_snat a single IP. Stored in ovn-nbctl's form."""
    if policy not in NAT_TYPES:
        raise InvalidRequestError(f"invalid NAT type {policy!r} (want snat or dnat_and_snat)")
    if policy == "snat":
        return canonical_prefix(logical_ip)
    return str(checked_ip(logical_ip, "NAT logical IP"))


def check_nat_family(logical_ip: str, external_ip: str) -> None:
    """NB (and ovn-nbctl) refuse a NAT rule whose two addresses are of different families."""
    if external_ip and checked_cidr(logical_ip).version != checked_ip(external_ip).version:
        raise InvalidRequestError(
            f"NAT external IP {external_ip} and logical IP {logical_ip} differ in family"
        )


def check_nat_extras(policy: str, logical_mac: str, port: str) -> None:
    if bool(logical_mac) != bool(port):
        raise InvalidRequestError("NAT logical_port and external_mac go together")
    if port and policy != "dnat_and_snat":
        raise InvalidRequestError("NAT logical_port/external_mac need dnat_and_snat")
    if logical_mac and not is_colon_mac(logical_mac):
        raise InvalidRequestError(f"invalid MAC {logical_mac!r}")


def switch_other_config(cidr: str, gateway: str) -> dict[str, str]:
    """other_config kube-ovn sets on a subnet's switch (v4 subnet for OVN's own tooling)."""
    for c in cidr.split(","):
        checked_cidr(c)
    for g in gateway.split(","):
        if g.strip():
            checked_ip(g, "gateway")
    return {"subnet": cidr, "gateway": gateway}


def router_port_networks(cidr: str, gateway: str) -> list[str]:
    """The switch's router port networks: each gateway with its subnet's prefix length."""
    nets = [checked_cidr(c) for c in cidr.split(",") if c.strip()]
    gws = [checked_ip(g, "gateway") for g in gateway.split(",") if g.strip()]
    out = []
    for gw in gws:
        match = [n for n in nets if n.version == gw.version]
        if not match:
            raise InvalidRequestError(f"gateway {gw} is in none of {cidr!r}")
        out.append(f"{gw}/{match[0].prefixlen}")
    if not out:
        raise InvalidRequestError("a switch attached to a router needs a gateway")
    return out


def router_port_mac(name: str) -> str:
    """A stable 00:00:00:xx:xx:xx MAC (kube-ovn picks a random one; stable keeps us idempotent)."""
    b = hashlib.sha256(name.encode()).digest()
    return "00:00:00:%02x:%02x:%02x" % (b[0], b[1], b[2])  # noqa: UP031


POLICY_ACTIONS = ("allow", "drop", "reroute")
_ADDRESS_SET_NAME = re.compile(r"[A-Za-z_.][A-Za-z0-9_.]*\Z")


def policy_args(
    priority: int, match: str, action: str, nexthops: Sequence[str]
) -> tuple[str, tuple[str, ...]]:
    """Check a router policy; return (match, canonical nexthops) as stored.

    NB's schema bounds the priority to 0..32767; a reroute needs a nexthop, the other actions
    take none; nexthops are addresses (of one family: OVN picks one by the match's family).
    """
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 32767:
        raise InvalidRequestError(f"invalid router policy priority {priority!r}")
    match = match.strip() if isinstance(match, str) else ""
    if not match:
        raise InvalidRequestError("a router policy needs a match")
    if action not in POLICY_ACTIONS:
        raise InvalidRequestError(f"invalid router policy action {action!r}")
    hops = tuple(sorted({str(checked_ip(h, "policy nexthop")) for h in nexthops}))
    if action == "reroute" and not hops:
        raise InvalidRequestError(f"reroute policy {match!r} needs a nexthop")
    if action != "reroute" and hops:
        raise InvalidRequestError(f"{action} policy {match!r} takes no nexthop")
    if len({checked_ip(h).version for h in hops}) > 1:
        raise InvalidRequestError(f"policy {match!r}: nexthops of two families {hops!r}")
    return match, hops


def check_address_set_name(name: str) -> str:
    """OVN match syntax: `$name` is an identifier (letters, digits, `_`, `.`; no digit first)."""
    if not isinstance(name, str) or not _ADDRESS_SET_NAME.match(name):
        raise InvalidRequestError(f"invalid address set name {name!r}")
    return name


def address_set_entries(addresses: Iterable[str]) -> list[str]:
    """Address set entries as stored: canonical addresses, or networks as network/len."""
    return list(dict.fromkeys(canonical_prefix(a) for a in addresses if a.strip()))


def ids_match(have: Mapping[str, str], want: Mapping[str, str]) -> bool:
    return all(have.get(k) == v for k, v in want.items())


@dataclass(frozen=True, slots=True)
class CheckedRoutingChange:
    """A `RoutingChange` checked, each part with its arguments in their stored form."""

    #: (policy, match, nexthops)
    policies: tuple[tuple[RouterPolicy, str, tuple[str, ...]], ...]
    #: (priority, match) of the policies to remove
    drops: tuple[tuple[int, str], ...]
    #: (change, set name, entries to add, entries to remove)
    sets: tuple[tuple[SetChange, str, list[str], set[str]], ...]
    #: (change, logical IP, external IP or "")
    nats: tuple[tuple[NatChange, str, str], ...]
    #: src-ip static route prefixes to remove
    routes: tuple[str, ...]
    #: (prefix, next hop) of the dst-ip static routes to remove
    dst_routes: tuple[tuple[str, str], ...] = ()

    def empty(self) -> bool:
        return not (
            self.policies or self.drops or self.sets or self.nats or self.routes or self.dst_routes
        )


def check_routing_change(change: RoutingChange) -> CheckedRoutingChange:
    """`apply_routing`'s request checked whole before anything is written."""
    return CheckedRoutingChange(
        policies=tuple(
            (p, *policy_args(p.priority, p.match, p.action, p.nexthops)) for p in change.policies
        ),
        drops=tuple((priority, match.strip()) for priority, match in change.delete_policies),
        sets=tuple(
            (
                c,
                check_address_set_name(c.name),
                address_set_entries(c.add),
                set(address_set_entries(c.remove)),
            )
            for c in change.sets
        ),
        nats=tuple(
            (n, *nat_rule_args(n.type, n.logical_ip, n.external_ip, n.logical_mac, n.port))
            for n in change.nats
        ),
        routes=tuple(p for prefix in change.delete_src_routes for p in route_prefixes(prefix)),
        dst_routes=tuple(
            (canonical_prefix(prefix.strip()), str(checked_ip(hop, "route nexthop")))
            for prefix, hop in change.delete_dst_routes
        ),
    )
