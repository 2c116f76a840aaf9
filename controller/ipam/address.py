"""Conversions at the edge of the allocator: strings in, integers inside, strings out.

Everything inside the ipam package is an ``(version, int)`` pair; this module is the only place
that parses or formats addresses, CIDRs, exclude entries and MACs (with netaddr's strict
``inet_pton`` parsers: "10.1" or "010.0.0.1" are rejected, as Go's net.ParseIP rejects them).
Parsers raise `InvalidAddressError` / `InvalidCIDRError` with the offending text; they never let
a netaddr or ValueError escape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from socket import AF_INET, AF_INET6, inet_pton

from netaddr.strategy import ipv4, ipv6  # type: ignore[import-untyped]

from controller.core.constants import PROTOCOL_DUAL, PROTOCOL_IPV4, PROTOCOL_IPV6
from controller.ipam.errors import InvalidAddressError, InvalidCIDRError

V4 = 4
V6 = 6
_BITS = {V4: 32, V6: 128}


@dataclass(frozen=True, slots=True)
class Network:
    """One parsed CIDR block. ``first``/``last`` bound the host addresses (network+1, broadcast-1);
    ``first > last`` when the block has fewer than two host bits."""

    version: int
    network: int
    prefixlen: int
    broadcast: int = field(init=False)
    first: int = field(init=False)
    last: int = field(init=False)

    def __post_init__(self) -> None:
        # Computed once: allocation checks them on every call.
        broadcast = self.network | ((1 << (_BITS[self.version] - self.prefixlen)) - 1)
        object.__setattr__(self, "broadcast", broadcast)
        object.__setattr__(self, "first", self.network + 1)
        object.__setattr__(self, "last", broadcast - 1)

    def __contains__(self, ip: object) -> bool:
        return isinstance(ip, int) and self.network <= ip <= self.broadcast

    def __str__(self) -> str:
        return f"{format_ip(self.version, self.network)}/{self.prefixlen}"


def ip_value(text: str) -> tuple[int, int]:
    """``"10.16.0.2"`` -> ``(4, 168820738)``. Raises InvalidAddressError."""
    value = text.strip()
    version = V6 if ":" in value else V4
    try:
        # inet_pton is what netaddr's strict (INET_PTON) parser calls underneath; calling it
        # directly keeps the restart path (one parse per existing pod) cheap.
        packed = inet_pton(AF_INET6 if version == V6 else AF_INET, value)
    except (OSError, ValueError, TypeError):
        raise InvalidAddressError(f"failed to parse IP {text!r}", address=text) from None
    return version, int.from_bytes(packed, "big")


def format_ip(version: int, value: int) -> str:
    """Canonical text form (compressed lower-case for IPv6)."""
    text: str = ipv4.int_to_str(value) if version == V4 else ipv6.int_to_str(value)
    return text


def cidr_network(text: str, *, subnet: str = "") -> Network:
    """``"10.16.0.1/16"`` -> Network(4, 10.16.0.0, 16); host bits are masked off as Go's
    net.ParseCIDR does. Raises InvalidCIDRError."""
    value = text.strip()
    address, sep, prefix = value.partition("/")
    if not sep or not prefix.isdigit() or not prefix.isascii():
        raise InvalidCIDRError(f"invalid CIDR {text!r}", subnet=subnet, address=text)
    try:
        version, ip = ip_value(address)
    except InvalidAddressError:
        raise InvalidCIDRError(f"invalid CIDR {text!r}", subnet=subnet, address=text) from None
    prefixlen = int(prefix)
    bits = _BITS[version]
    if prefixlen > bits:
        raise InvalidCIDRError(f"invalid CIDR {text!r}", subnet=subnet, address=text)
    mask = ((1 << bits) - 1) ^ ((1 << (bits - prefixlen)) - 1)
    return Network(version, ip & mask, prefixlen)


def parse_cidr_block(text: str, *, subnet: str = "") -> dict[int, Network]:
    """A subnet's cidrBlock, ``"v4"``, ``"v6"`` or dual ``"v4,v6"`` -> {version: Network}.

    Unlike kube-ovn, "v6,v4" is accepted as dual too; two blocks of one family are rejected.
    """
    parts = text.split(",")
    if not text.strip() or len(parts) > 2:
        raise InvalidCIDRError(f"invalid CIDR block {text!r}", subnet=subnet, address=text)
    networks: dict[int, Network] = {}
    for part in parts:
        network = cidr_network(part, subnet=subnet)
        if network.version in networks:
            raise InvalidCIDRError(
                f"CIDR block {text!r} has two IPv{network.version} CIDRs",
                subnet=subnet,
                address=text,
            )
        networks[network.version] = network
    return networks


def protocol_of(versions: set[int] | frozenset[int]) -> str:
    if versions == {V4, V6}:
        return PROTOCOL_DUAL
    return PROTOCOL_IPV6 if V6 in versions else PROTOCOL_IPV4


def parse_exclude(entry: str, *, subnet: str = "") -> tuple[int, int, int]:
    """An excludeIps entry, ``"a"`` or ``"a..b"`` -> (version, start, end).

    Raises InvalidCIDRError for text that does not parse, mixed families or ``a > b`` (kube-ovn
    silently drops the last two; its subnet validation rejects them before they reach IPAM).
    """
    first_text, sep, last_text = entry.partition("..")
    try:
        version, start = ip_value(first_text)
        end_version, end = ip_value(last_text) if sep else (version, start)
    except InvalidAddressError:
        raise InvalidCIDRError(
            f"invalid exclude_ips entry {entry!r}", subnet=subnet, address=entry
        ) from None
    if end_version != version or start > end:
        raise InvalidCIDRError(f"invalid exclude_ips range {entry!r}", subnet=subnet, address=entry)
    return version, start, end


def parse_ip_list(text: str, *, subnet: str = "") -> dict[int, int]:
    """A static request, ``"v4"``, ``"v6"`` or ``"v4,v6"`` (either order) -> {version: int}."""
    parts = text.split(",")
    if not text.strip() or len(parts) > 2:
        raise InvalidAddressError(f"invalid IP list {text!r}", subnet=subnet, address=text)
    ips: dict[int, int] = {}
    for part in parts:
        version, value = ip_value(part)
        if version in ips:
            raise InvalidAddressError(
                f"IP list {text!r} has two IPv{version} addresses", subnet=subnet, address=text
            )
        ips[version] = value
    return ips


def generate_mac(low_bits: int) -> str:
    """kube-ovn's generated MAC ``00:00:00:XX:XX:XX`` (upper-case) from 24 random bits."""
    return f"00:00:00:{low_bits >> 16 & 0xFF:02X}:{low_bits >> 8 & 0xFF:02X}:{low_bits & 0xFF:02X}"


_MAC = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}")


def normalize_mac(text: str, *, subnet: str = "") -> str:
    """A 48-bit MAC, colon or dash notation -> upper-case colon form. Raises InvalidAddressError."""
    value = text.strip()
    if _MAC.fullmatch(value) is None:
        raise InvalidAddressError(f"invalid MAC {text!r}", subnet=subnet, address=text)
    return value.upper().replace("-", ":")
