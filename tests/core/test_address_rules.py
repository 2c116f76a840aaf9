"""controller.core.address: the readers of stored addresses and the one rule set they share
with controller.ovn.logic (whitespace, zone ids, netmask form, IPv4-mapped, MAC forms)."""

from __future__ import annotations

import ipaddress

import pytest

from controller.core import address
from controller.ovn import logic as ovn_logic
from controller.ovn.api import InvalidRequestError


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("10.0.0.1", "10.0.0.1"),
        (" 10.0.0.1\t", "10.0.0.1"),
        ("FD00:0:0::1", "fd00::1"),
        ("fe80::1%eth0", None),
        ("10.0.0.01", None),
        ("10.0.0.1/32", None),
        ("", None),
    ],
)
def test_canonical_ip(text: str, canonical: str | None) -> None:
    assert address.canonical_ip(text) == canonical


def test_split_ips_is_all_or_nothing() -> None:
    assert address.split_ips("10.0.0.1, FD00::1") == ["10.0.0.1", "fd00::1"]
    assert address.split_ips("10.0.0.1,nope") is None
    assert address.split_ips("") is None


@pytest.mark.parametrize(
    ("prefix", "host"),
    [
        ("10.0.0.5", "10.0.0.5"),
        ("10.0.0.5/32", "10.0.0.5"),
        (" fd00::5/128 ", "fd00::5"),
        ("10.0.0.0/24", None),
        ("10.0.0.5/24", None),
        ("10.0.0.5/255.255.255.255", None),  # no netmask form
        ("fe80::1%eth0", None),
        ("garbage", None),
    ],
)
def test_host_prefix(prefix: str, host: str | None) -> None:
    assert address.host_prefix(prefix) == host


def test_parse_network_takes_a_bare_address_and_masks_host_bits() -> None:
    assert address.parse_network("10.0.0.5") == ipaddress.ip_network("10.0.0.5/32")
    assert address.parse_network("10.0.0.5/24") == ipaddress.ip_network("10.0.0.0/24")
    assert address.parse_network("10.0.0.0/33") is None


def test_networks_skips_invalid_parts() -> None:
    nets = address.networks("10.16.0.0/16, fd00::/64,bad")
    assert nets == (ipaddress.ip_network("10.16.0.0/16"), ipaddress.ip_network("fd00::/64"))


def test_same_family() -> None:
    assert address.same_family("fd00::9, 10.0.0.9", "10.0.0.1") == "10.0.0.9"
    assert address.same_family("10.0.0.9,fd00::9", "fd00::1") == "fd00::9"
    assert address.same_family("10.0.0.9", "fd00::1") == ""
    assert address.same_family("", "10.0.0.1") == ""
    # two strings that do not parse are never of one family
    assert address.same_family("nope", "nada") == ""
    assert not address.is_same_family("nope", "nada")
    assert address.is_same_family("10.0.0.0/24", "10.0.0.1")


def test_ipv4_mapped_addresses_are_ipv6() -> None:
    assert address.check_protocol("::ffff:10.0.0.1") == "IPv6"
    assert address.canonical_ip("::ffff:10.0.0.1") == "::ffff:a00:1"


def test_mac_forms() -> None:
    assert address.is_colon_mac("AA:bb:cc:dd:ee:ff")
    assert not address.is_colon_mac("aa-bb-cc-dd-ee-ff")
    assert address.is_valid_mac("aa-bb-cc-dd-ee-ff")
    assert not address.is_colon_mac("aa:bb:cc:dd:ee:ff:00:11")
    assert address.is_valid_mac("aa:bb:cc:dd:ee:ff:00:11")
    assert address.canonical_mac("AA:BB:cc:dd:EE:ff") == "aa:bb:cc:dd:ee:ff"


def test_nb_translation_follows_the_same_rules() -> None:
    assert str(ovn_logic.checked_ip(" 10.0.0.1 ")) == "10.0.0.1"
    for bad in ("fe80::1%eth0", "10.0.0.01", "10.0.0.1/32"):
        with pytest.raises(InvalidRequestError):
            ovn_logic.checked_ip(bad)
    with pytest.raises(InvalidRequestError):
        ovn_logic.checked_cidr("10.0.0.0/255.255.255.0")
    assert ovn_logic.canonical_prefix("10.0.0.5/32") == "10.0.0.5"
    assert ovn_logic.address_ips(["AA:BB:CC:DD:EE:FF FD00::5 10.0.0.5", "router"]) == {
        "fd00::5",
        "10.0.0.5",
    }
