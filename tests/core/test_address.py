"""controller.core.address: kube-ovn pkg/util/net.go semantics, quirks included."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core import address as netutil


@pytest.mark.parametrize(
    ("address", "protocol"),
    [
        ("10.16.0.5", "IPv4"),
        ("10.16.0.0/16", "IPv4"),
        ("fd00::5", "IPv6"),
        ("fd00::/64", "IPv6"),
        ("10.16.0.5,fd00::5", "Dual"),
        ("10.16.0.0/16,fd00::/64", "Dual"),
        ("10.16.0.5,10.16.0.6", "Dual"),  # kube-ovn quirk: the second part may be any address
        ("fd00::5,10.16.0.5", ""),  # dual stack is always v4 first
        ("", ""),
        ("nope", ""),
        ("fe80::1%eth0", ""),
        ("1.2.3.4,5.6.7.8,9.9.9.9", ""),
    ],
)
def test_check_protocol(address: str, protocol: str) -> None:
    assert netutil.check_protocol(address) == protocol


def test_parse_ip_is_strict_like_go() -> None:
    assert netutil.parse_ip("10.0.0.1") == ipaddress.ip_address("10.0.0.1")
    for bad in ("", " 10.0.0.1", "10.0.0.01", "10.0.0.256", "fe80::1%eth0", "10.0.0.1/8"):
        assert netutil.parse_ip(bad) is None, bad


def test_parse_cidr() -> None:
    parsed = netutil.parse_cidr("10.16.3.4/16")
    assert parsed is not None
    assert str(parsed[0]) == "10.16.3.4"
    assert str(parsed[1]) == "10.16.0.0/16"
    for bad in ("10.16.0.0", "10.16.0.0/", "10.16.0.0/33", "10.16.0.0/+8", "x/8", "fd00::/129"):
        assert netutil.parse_cidr(bad) is None, bad


@pytest.mark.parametrize(
    ("mac", "ok"),
    [
        ("00:00:00:5B:DB:45", True),
        ("00-00-00-5b-db-45", True),
        ("0000.005b.db45", True),
        ("00:00:00:00:fe:80:00:00", True),  # EUI-64
        ("00:00:00:5B:DB", False),
        ("00:00:00:5B:DB:4G", False),
        ("00:00-00:5B:DB:45", False),
        ("", False),
    ],
)
def test_is_valid_mac(mac: str, ok: bool) -> None:
    assert netutil.is_valid_mac(mac) is ok


def test_get_string_ip_and_split() -> None:
    assert netutil.get_string_ip("10.0.0.5", "fd00::5") == "10.0.0.5,fd00::5"
    assert netutil.get_string_ip("10.0.0.5", "") == "10.0.0.5"
    assert netutil.get_string_ip("", "fd00::5") == "fd00::5"
    assert netutil.get_string_ip("bad", "") == ""
    assert netutil.split_string_ip("10.0.0.5,fd00::5") == ("10.0.0.5", "fd00::5")
    assert netutil.split_string_ip("10.0.0.5") == ("10.0.0.5", "")
    assert netutil.split_string_ip("fd00::5") == ("", "fd00::5")
    assert netutil.split_string_ip("garbage") == ("", "")


@pytest.mark.parametrize(
    ("cidrs", "ips", "expected"),
    [
        ("10.16.0.0/16", "10.16.0.5", True),
        ("10.16.0.0/16", "10.17.0.5", False),
        ("10.16.0.0/16", "", False),
        ("10.16.0.0/16", "fd00::5", False),  # no same-family pair
        ("bad", "10.16.0.5", False),
        ("10.16.0.0/16,fd00::/112", "10.16.0.5,fd00::5", True),
        # kube-ovn quirk: the last same-family comparison wins
        ("10.16.0.0/16,fd00::/112", "10.17.0.5,fd00::5", True),
        ("10.16.0.0/16,fd00::/112", "10.16.0.5,fd01::5", False),
        ("10.16.0.0/16", "10.16.0.5/24", False),  # an unparsable IP of the family
    ],
)
def test_cidr_contain_ip(cidrs: str, ips: str, expected: bool) -> None:
    assert netutil.cidr_contain_ip(cidrs, ips) is expected


def test_address_helpers() -> None:
    net = ipaddress.ip_network("10.16.0.0/16")
    assert netutil.address_count(net) == 65534
    assert netutil.address_count(ipaddress.ip_network("10.0.0.0/31")) == 0
    assert str(netutil.first_ip(net)) == "10.16.0.1"
    assert netutil.get_gw_by_cidr("10.16.0.0/16,fd00::/64") == "10.16.0.1,fd00::1"
    with pytest.raises(ValueError, match="invalid cidr"):
        netutil.get_gw_by_cidr("10.16.0.0")
    assert netutil.check_cidrs("10.0.0.0/8,fd00::/8")
    assert not netutil.check_cidrs("10.0.0.0/8,")


@given(st.ip_addresses(v=4), st.ip_addresses(v=6))
def test_dual_string_round_trip(v4: ipaddress.IPv4Address, v6: ipaddress.IPv6Address) -> None:
    joined = netutil.get_string_ip(str(v4), str(v6))
    assert netutil.check_protocol(joined) == "Dual"
    assert netutil.split_string_ip(joined) == (str(v4), str(v6))
