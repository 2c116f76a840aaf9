"""Shared data and builders for the ipam tests (the kube-ovn ipam_test.go fixtures)."""

from __future__ import annotations

import random

from controller.ipam.address import format_ip, parse_cidr_block, parse_exclude
from controller.ipam.subnet import SubnetPool

SUBNET = "test"
V4_CIDR = "10.16.0.0/16"
V6_CIDR = "fd00::/112"
DUAL_CIDR = f"{V4_CIDR},{V6_CIDR}"
V4_EXCLUDES = [
    "10.16.0.1",
    "10.16.0.10..10.16.0.20",
    "10.16.0.15..10.16.0.23",
    "10.16.0.4",
    "192.168.0.1..192.168.0.10",
]
V6_EXCLUDES = [
    "fd00::1",
    "fd00::a..fd00::14",
    "fd00::f..fd00::17",
    "fd00::4",
    "2001::1..2001::a",
]
DUAL_EXCLUDES = V4_EXCLUDES + V6_EXCLUDES


def make_subnet(cidr: str, excludes: list[str] | None = None, seed: int = 0) -> SubnetPool:
    return SubnetPool(
        SUBNET,
        parse_cidr_block(cidr),
        [parse_exclude(e) for e in excludes or []],
        random.Random(seed),
    )


def text_ranges(subnet: SubnetPool, version: int, which: str) -> list[tuple[str, str]]:
    """A pool's free/released/reserved list as (start, end) strings, like kube-ovn's tests."""
    pool = subnet.pools[version]
    ranges = getattr(pool, which)
    return [(format_ip(version, s), format_ip(version, e)) for s, e in ranges.ranges()]
