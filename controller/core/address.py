"""Address helpers with kube-ovn `pkg/util/net.go` semantics (pure, stdlib `ipaddress` only).

kube-ovn writes every address pair as one string, "v4,v6" (always v4 first); a protocol is one of
`IPv4`, `IPv6`, `Dual`. These helpers keep the Go semantics, quirks included, because the
validators and the CNI daemon contract depend on them; each quirk is named in its docstring.

Parsing follows Go's `net.ParseIP`/`ParseCIDR`: no zone suffix ("fe80::1%eth0" is invalid), no
surrounding spaces, no leading zeros in IPv4 octets.
"""

from __future__ import annotations

import ipaddress
import re

from controller.core.constants import PROTOCOL_DUAL, PROTOCOL_IPV4, PROTOCOL_IPV6

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_MAC_COLON = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2})*$")
_MAC_DOT = re.compile(r"^[0-9A-Fa-f]{4}(\.[0-9A-Fa-f]{4})*$")


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


def check_protocol(address: str) -> str:
    """kube-ovn `CheckProtocol` of an address or CIDR (or a "v4,v6" pair of them).

    "Dual" needs exactly two comma parts, the first IPv4 and the second any address (so "v4,v4"
    counts as Dual and "v6,v4" does not: dual-stack strings are always v4 first). Otherwise the
    mask is stripped and the family decides; "" when nothing parses.
    """
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
