"""The one home of address parsing: IPs, CIDRs, MACs (pure, stdlib `ipaddress` only).

kube-ovn writes every address pair as one string, "v4,v6" (always v4 first); a protocol is one of
`IPv4`, `IPv6`, `Dual`. The kube-ovn `pkg/util/net.go` helpers keep the Go semantics, quirks
included, because the validators and the CNI daemon contract depend on them; each quirk is named
in its docstring. Every module that reads an address (pod_logic, the NB request translation of
`controller.ovn.logic`, the garbage collector, the audit) goes through this module.

The rule set:

* One address (`parse_ip`) is Go's `net.ParseIP`: no surrounding whitespace, no zone id
  ("fe80::1%eth0" is invalid), no leading zeros in IPv4 octets. An IPv4-mapped IPv6 address
  ("::ffff:10.0.0.1") is IPv6 here (Go's `To4` would call it IPv4; kube-ovn never writes one).
* One CIDR (`parse_cidr`) is Go's `net.ParseCIDR`: "addr/len" with a decimal length, host bits
  allowed (the network is the masked one), no netmask form, same address rules.
  `parse_network` also takes a bare address as its host network (ovn-nbctl's prefixes).
* Comma lists: the kube-ovn helpers (`check_protocol`, `split_string_ip`, `cidr_contain_ip`,
  `check_cidrs`, ...) split on "," and strip nothing, as Go does, so " 10.0.0.1" is invalid in
  an annotation. The readers of what others stored (`canonical_ip`, `split_ips`,
  `host_prefix`, `networks`, `same_family`, `parse_network`) strip whitespace around each part.
* Canonical form (`canonical_ip`, `split_ips`, `host_prefix`): Python's `str()` of the
  address: IPv6 compressed and lower case, IPv4 dotted quad.
* Families: `check_protocol` decides (an address or a CIDR, mask stripped); "" when nothing
  parses, and two unparsable strings are never of the same family.
* MACs: `is_valid_mac` is Go's `net.ParseMAC` (6, 8 or 20 octets; `aa:bb..`, `aa-bb..` or
  `aabb.ccdd..`; any case); `is_colon_mac` is the only form OVN's `addresses` column takes
  (six colon-separated octets, any case). Stored and compared in lower case (`canonical_mac`).
"""

from __future__ import annotations

import functools
import ipaddress
import re

from controller.core.constants import PROTOCOL_DUAL, PROTOCOL_IPV4, PROTOCOL_IPV6

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_MAC_COLON = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2})*$")
_MAC_DOT = re.compile(r"^[0-9A-Fa-f]{4}(\.[0-9A-Fa-f]{4})*$")
_MAC_OVN = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
# An IPv4 address already in canonical form (octets 0-255, no leading zeros): it is its own
# canonical text, which is most of what the NB and the pods carry.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_CANONICAL_V4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")


# The same few addresses are parsed over and over (every policy match, NAT rule and pod
# annotation names them); ipaddress's parser is pure Python and its objects are immutable.
_PARSED_IPS = 1 << 14


@functools.lru_cache(maxsize=_PARSED_IPS)
def parse_ip(text: str) -> IPAddress | None:
    """Go `net.ParseIP`: the address, or None when `text` is not a bare IPv4/IPv6 address."""
    if not text or "%" in text or text.strip() != text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def parse_cidr(text: str) -> tuple[IPAddress, IPNetwork] | None:
    """Go `net.ParseCIDR`: (address, network) of "addr/len", or None when invalid."""
    if "/" not in text or "%" in text or text.strip() != text:
        return None
    addr, _, plen = text.partition("/")
    if not plen.isdigit() or parse_ip(addr) is None:
        return None
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        return None
    return iface.ip, iface.network


def is_valid_mac(text: str) -> bool:
    """Go `net.ParseMAC`: 6, 8 or 20 octets, as `aa:bb..`, `aa-bb..` or `aabb.ccdd..`."""
    if _MAC_COLON.match(text):
        octets = (len(text) + 1) // 3
    elif _MAC_DOT.match(text):
        octets = (len(text) + 1) // 5 * 2
    else:
        return False
    return octets in (6, 8, 20)


@functools.lru_cache(maxsize=_PARSED_IPS)
def check_protocol(address: str) -> str:
    """kube-ovn `CheckProtocol` of an address or CIDR (or a "v4,v6" pair of them).

    "Dual" needs exactly two comma parts, the first IPv4 and the second any address (so "v4,v4"
    counts as Dual and "v6,v4" does not: dual-stack strings are always v4 first). Otherwise the
    mask is stripped and the family decides; "" when nothing parses.
    """
    if _CANONICAL_V4.fullmatch(address):
        return PROTOCOL_IPV4
    parts = address.split(",")
    if len(parts) == 2:
        first = parse_ip(parts[0].split("/")[0])
        second = parse_ip(parts[1].split("/")[0])
        if isinstance(first, ipaddress.IPv4Address) and second is not None:
            return PROTOCOL_DUAL
    ip = parse_ip(address.split("/", maxsplit=1)[0])
    if isinstance(ip, ipaddress.IPv4Address):
        return PROTOCOL_IPV4
    if isinstance(ip, ipaddress.IPv6Address):
        return PROTOCOL_IPV6
    return ""


def get_string_ip(v4: str, v6: str) -> str:
    """kube-ovn `GetStringIP`: "v4,v6" when both parse, else whichever parses, else ""."""
    valid = [ip for ip in (v4, v6) if parse_ip(ip) is not None]
    return ",".join(valid)


def split_string_ip(address: str) -> tuple[str, str]:
    """kube-ovn `SplitStringIP`: ("v4", "v6") of an address string, "" for a missing family."""
    protocol = check_protocol(address)
    if protocol == PROTOCOL_IPV4:
        return address, ""
    if protocol == PROTOCOL_IPV6:
        return "", address
    if protocol == PROTOCOL_DUAL:
        v4, v6 = address.split(",")
        return v4, v6
    return "", ""


def check_cidrs(cidr: str) -> bool:
    """kube-ovn `CheckCidrs`: every comma part is a valid CIDR."""
    return all(parse_cidr(part) is not None for part in cidr.split(","))


def cidr_contain_ip(cidrs: str, ips: str) -> bool:
    """kube-ovn `CIDRContainIP` over comma lists.

    False if any CIDR is invalid. For each CIDR, each same-family IP is compared; an unparsable IP
    gives False, otherwise the *last* compared pair's containment wins (a kube-ovn quirk: the v4 of
    a dual pair may lie outside its CIDR when the v6 matches). No same-family pair -> False.
    """
    networks: list[IPNetwork] = []
    for part in cidrs.split(","):
        parsed = parse_cidr(part)
        if parsed is None:
            return False
        networks.append(parsed[1])
    flag = False
    for network in networks:
        for ip_text in ips.split(","):
            if check_protocol(ip_text) != check_protocol(str(network)):
                continue
            ip = parse_ip(ip_text)
            if ip is None:
                return False
            flag = ip in network
    return flag


def address_count(network: IPNetwork) -> int:
    """kube-ovn `AddressCount`: usable host addresses, 0 with fewer than two host bits."""
    host_bits = network.max_prefixlen - network.prefixlen
    return 0 if host_bits < 2 else 2**host_bits - 2


def first_ip(network: IPNetwork) -> IPAddress:
    """kube-ovn `FirstIP`: network number + 1 (the default gateway of a subnet)."""
    return network.network_address + 1


def get_gw_by_cidr(cidr: str) -> str:
    """kube-ovn `GetGwByCidr`: the first IP of every comma-separated CIDR, comma-joined.

    Raises ValueError on an invalid CIDR.
    """
    gateways = []
    for part in cidr.split(","):
        parsed = parse_cidr(part)
        if parsed is None:
            raise ValueError(f"invalid cidr {part!r}")
        gateways.append(str(first_ip(parsed[1])))
    return ",".join(gateways)


# --- readers of stored addresses (whitespace around each part tolerated) ----------------------


@functools.lru_cache(maxsize=1 << 16)
def canonical_ip(text: str) -> str | None:
    """The canonical form of one address (surrounding whitespace stripped), None if invalid."""
    text = text.strip()
    if _CANONICAL_V4.fullmatch(text):
        return text
    ip = parse_ip(text)
    return None if ip is None else str(ip)


def split_ips(text: str) -> list[str] | None:
    """Canonical addresses of a comma list; None when any part does not parse."""
    out = []
    for part in text.split(","):
        ip = canonical_ip(part)
        if ip is None:
            return None
        out.append(ip)
    return out


def parse_network(text: str) -> IPNetwork | None:
    """A CIDR (host bits masked) or a bare address as its host network; None when invalid."""
    text = text.strip()
    if "/" not in text:
        ip = parse_ip(text)
        return None if ip is None else ipaddress.ip_network(ip)
    parsed = parse_cidr(text)
    return None if parsed is None else parsed[1]


@functools.lru_cache(maxsize=1 << 16)
def host_prefix(prefix: str) -> str | None:
    """The canonical address of a host prefix ("10.0.0.5", "10.0.0.5/32"); None for a network
    or an invalid prefix."""
    if "/" not in prefix:
        return canonical_ip(prefix)
    network = parse_network(prefix)
    if network is None or network.prefixlen != network.max_prefixlen:
        return None
    return str(network.network_address)


@functools.lru_cache(maxsize=1024)
def networks(cidr: str) -> tuple[IPNetwork, ...]:
    """The valid networks of a comma list of CIDRs (invalid parts are skipped)."""
    out = []
    for part in cidr.split(","):
        parsed = parse_cidr(part.strip())
        if parsed is not None:
            out.append(parsed[1])
    return tuple(out)


def is_same_family(a: str, b: str) -> bool:
    """Are `a` and `b` (addresses or CIDRs) of one family? False when either does not parse."""
    family = check_protocol(a.strip())
    return family in (PROTOCOL_IPV4, PROTOCOL_IPV6) and family == check_protocol(b.strip())


def same_family(addresses: str, ip: str) -> str:
    """The first of the comma-separated `addresses` of `ip`'s family, stripped ("" when none
    is)."""
    for part in addresses.split(","):
        candidate = part.strip()
        if candidate and is_same_family(candidate, ip):
            return candidate
    return ""


def is_colon_mac(text: str) -> bool:
    """Six colon-separated hex octets, any case: the only MAC form OVN's `addresses` takes."""
    return bool(_MAC_OVN.match(text))


def canonical_mac(text: str) -> str:
    """The stored and compared form of a MAC: lower case."""
    return text.lower()
