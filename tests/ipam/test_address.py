"""Parsing at the edge: strict addresses, CIDRs, exclude entries and MACs."""

from __future__ import annotations

import pytest

from controller.ipam.address import (
    V4,
    V6,
    cidr_network,
    format_ip,
    ip_value,
    normalize_mac,
    parse_cidr_block,
    parse_exclude,
    parse_ip_list,
)
from controller.ipam.errors import InvalidAddressError, InvalidCIDRError


@pytest.mark.parametrize(
    "text", ["10.1", "010.0.0.1", "10.0.0.256", "fd00::g", "", "a..b", "::1%e"]
)
def test_parse_ip_rejects_malformed_text(text: str) -> None:
    with pytest.raises(InvalidAddressError, match="failed to parse IP"):
        ip_value(text)


def test_parse_and_format_round_trip_canonically() -> None:
    assert ip_value(" 10.16.0.2 ") == (V4, 0x0A100002)
    version, value = ip_value("FD00::0002")
    assert (version, format_ip(version, value)) == (V6, "fd00::2")


def test_cidr_host_bits_are_masked_and_bounds_computed() -> None:
    net = cidr_network("10.16.0.2/30")
    assert str(net) == "10.16.0.0/30"
    assert (format_ip(V4, net.first), format_ip(V4, net.last)) == ("10.16.0.1", "10.16.0.2")
    host = cidr_network("10.16.0.5/32")
    assert host.first > host.last  # no host addresses


@pytest.mark.parametrize("text", ["10.16.0.0", "10.16.0.0/", "10.16.0.0/x", "10.16.0.0/-1"])
def test_cidr_needs_a_prefix_length(text: str) -> None:
    with pytest.raises(InvalidCIDRError, match="CIDRInvalid"):
        cidr_network(text, subnet="s1")


def test_cidr_block_accepts_either_order_and_rejects_two_of_a_family() -> None:
    assert set(parse_cidr_block("fd00::/112,10.16.0.0/16")) == {V4, V6}
    with pytest.raises(InvalidCIDRError, match="two IPv4"):
        parse_cidr_block("10.16.0.0/16,10.17.0.0/16")


def test_exclude_entries() -> None:
    assert parse_exclude("10.16.0.1") == (V4, 0x0A100001, 0x0A100001)
    assert parse_exclude("fd00::a..fd00::14")[1:] == ((0xFD00 << 112) + 10, (0xFD00 << 112) + 20)
    for bad in ["10.16.0.5..10.16.0.1", "10.16.0.1..fd00::1", "nope", "10.16.0.1..", "..."]:
        with pytest.raises(InvalidCIDRError, match="exclude_ips"):
            parse_exclude(bad, subnet="s1")


def test_ip_list() -> None:
    assert set(parse_ip_list("fd00::2,10.16.0.2")) == {V4, V6}
    for bad in ["", "10.16.0.2,10.16.0.3", "1.1.1.1,fd00::1,fd00::2", "10.16.0.2,"]:
        with pytest.raises(InvalidAddressError):
            parse_ip_list(bad)


def test_mac_normalisation() -> None:
    assert normalize_mac("00:00:00:ab:cd:ef") == "00:00:00:AB:CD:EF"
    assert normalize_mac("00-00-00-ab-cd-ef") == "00:00:00:AB:CD:EF"
    for bad in ["00:00:00:ab:cd", "00:00:00:ab:cd:eg", "0000.00ab.cdef", "00:00:00:ab:cd:ef:01"]:
        with pytest.raises(InvalidAddressError, match="invalid MAC"):
            normalize_mac(bad)
