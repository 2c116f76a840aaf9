"""kube-ovn's own IPAM cases (test/unittest/ipam/ipam.go), ported: IPAM level, then subnet level.

Run for IPv4, IPv6 and dual stack. Expected addresses are those of kube-ovn; where the range
rotation order of v1.8 would differ from our lowest-first order the case says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.ipam import (
    IPAM,
    AddressConflictError,
    InvalidCIDRError,
    NoAvailableError,
    OutOfRangeError,
)
from controller.ipam.address import V4, V6, ip_value
from tests.ipam.helpers import (
    DUAL_CIDR,
    DUAL_EXCLUDES,
    SUBNET,
    V4_CIDR,
    V4_EXCLUDES,
    V6_CIDR,
    V6_EXCLUDES,
    make_subnet,
    text_ranges,
)


@dataclass(frozen=True)
class Family:
    name: str
    cidr: str
    excludes: list[str]
    invalid: list[str]
    changed_cidr: str
    changed_excludes: list[str]
    tiny: str  # a block with exactly two hosts

    def ip(self, v4: str, v6: str) -> str:
        return {"v4": v4, "v6": v6, "dual": f"{v4},{v6}"}[self.name]

    def pick(self, result: tuple[str, str, str], v4: str, v6: str) -> tuple[str, str]:
        """(actual, expected) for this family, comparing both halves on dual stack."""
        if self.name == "v4":
            return result[0], v4
        if self.name == "v6":
            return result[1], v6
        return f"{result[0]},{result[1]}", f"{v4},{v6}"


FAMILIES = [
    Family(
        "v4",
        V4_CIDR,
        V4_EXCLUDES,
        ["1.1.1.1/64", "1.1.256.1/24", "1.1.1.1/33", "", "10.16.0.0"],
        "10.17.0.0/16",
        ["10.17.0.1"],
        "10.16.0.0/30",
    ),
    Family(
        "v6",
        V6_CIDR,
        V6_EXCLUDES,
        ["fd00::/130", "fd00::g/120", "fd00::/-1"],
        "fe00::/112",
        ["fe00::1"],
        "fd00::/126",
    ),
    Family(
        "dual",
        DUAL_CIDR,
        DUAL_EXCLUDES,
        [
            f"1.1.1.1/64,{V6_CIDR}",
            f"1.1.256.1/24,{V6_CIDR}",
            f"{V4_CIDR},fd00::/130",
            f"{V4_CIDR},fd00::g/120",
            f"{V4_CIDR},10.17.0.0/16",
            f"{V4_CIDR},{V6_CIDR},fe00::/64",
        ],
        "10.17.0.2/16,fe00::/112",
        ["10.17.0.1", "fe00::1"],
        "10.16.0.2/30,fd00::/126",
    ),
]


@pytest.fixture(params=FAMILIES, ids=lambda f: f.name)
def fam(request: pytest.FixtureRequest) -> Family:
    family: Family = request.param
    return family


def test_invalid_subnet(fam: Family) -> None:
    im = IPAM()
    for cidr in fam.invalid:
        with pytest.raises(InvalidCIDRError):
            im.add_or_update_subnet(SUBNET, cidr, None)
    assert not im.has_subnet(SUBNET)


def test_invalid_update_keeps_old_state(fam: Family) -> None:
    im = IPAM()
    im.add_or_update_subnet(SUBNET, fam.cidr, fam.excludes)
    before = im.get_random_address("pod1.ns", SUBNET)
    with pytest.raises(InvalidCIDRError):
        im.add_or_update_subnet(SUBNET, fam.invalid[0], None)
    with pytest.raises(InvalidCIDRError):
        im.add_or_update_subnet(SUBNET, fam.cidr, ["10.16.0.300"])
    assert im.get_random_address("pod1.ns", SUBNET) == before
    assert im.get_random_address("pod2.ns", SUBNET)[:2] != before[:2]


def test_normal_subnet(fam: Family) -> None:
    im = IPAM()
    im.add_or_update_subnet(SUBNET, fam.cidr, fam.excludes)

    im.get_static_address("pod1.ns", fam.ip("10.16.0.2", "fd00::2"), "", SUBNET)
    got, want = fam.pick(im.get_random_address("pod1.ns", SUBNET), "10.16.0.2", "fd00::2")
    assert got == want
    got, want = fam.pick(im.get_random_address("pod2.ns", SUBNET), "10.16.0.3", "fd00::3")
    assert got == want

    with pytest.raises(AddressConflictError):
        im.get_static_address("pod3.ns", fam.ip("10.16.0.2", "fd00::2"), "", SUBNET)
    im.release_address_by_pod("pod1.ns")
    im.get_static_address("pod3.ns", fam.ip("10.16.0.2", "fd00::2"), "", SUBNET)

    with pytest.raises(NoAvailableError):
        im.get_random_address("pod4.ns", "invalid_subnet")

    # Dropping the excludes frees the gateway .1, the lowest address.
    im.add_or_update_subnet(SUBNET, fam.cidr, None)
    got, want = fam.pick(im.get_random_address("pod5.ns", SUBNET), "10.16.0.1", "fd00::1")
    assert got == want
    addresses = im.get_pod_address("pod5.ns")
    assert [a.ip for a in addresses] == want.split(",")


def test_change_cidr(fam: Family) -> None:
    im = IPAM()
    im.add_or_update_subnet(SUBNET, fam.cidr, fam.excludes)
    im.add_or_update_subnet(SUBNET, fam.changed_cidr, fam.changed_excludes)
    got, want = fam.pick(im.get_random_address("pod5.ns", SUBNET), "10.17.0.2", "fe00::2")
    assert got == want


def test_reuse_released_address_when_no_unused_address(fam: Family) -> None:
    im = IPAM()
    im.add_or_update_subnet(SUBNET, fam.tiny, None)
    got, want = fam.pick(im.get_random_address("pod1.ns", SUBNET), "10.16.0.1", "fd00::1")
    assert got == want
    im.release_address_by_pod("pod1.ns")
    got, want = fam.pick(im.get_random_address("pod1.ns", SUBNET), "10.16.0.2", "fd00::2")
    assert got == want
    im.release_address_by_pod("pod1.ns")
    got, want = fam.pick(im.get_random_address("pod1.ns", SUBNET), "10.16.0.1", "fd00::1")
    assert got == want


def test_do_not_reuse_released_address_after_exclude_update(fam: Family) -> None:
    im = IPAM()
    im.add_or_update_subnet(SUBNET, fam.tiny, None)
    im.get_random_address("pod1.ns", SUBNET)
    im.release_address_by_pod("pod1.ns")
    excludes = {"v4": ["10.16.0.1..10.16.0.2"], "v6": ["fd00::1..fd00::2"]}
    chosen = excludes["v4"] + excludes["v6"] if fam.name == "dual" else excludes[fam.name]
    im.add_or_update_subnet(SUBNET, fam.tiny, chosen)
    with pytest.raises(NoAvailableError):
        im.get_random_address("pod1.ns", SUBNET)


# -- subnet level ----------------------------------------------------------------------------

V4_FREE = [("10.16.0.2", "10.16.0.3"), ("10.16.0.5", "10.16.0.9"), ("10.16.0.24", "10.16.255.254")]
V6_FREE = [("fd00::2", "fd00::3"), ("fd00::5", "fd00::9"), ("fd00::18", "fd00::fffe")]
V4_RESERVED = [("10.16.0.1", "10.16.0.1"), ("10.16.0.4", "10.16.0.4"), ("10.16.0.10", "10.16.0.23")]
V6_RESERVED = [("fd00::1", "fd00::1"), ("fd00::4", "fd00::4"), ("fd00::a", "fd00::17")]


def versions(fam: Family) -> list[int]:
    return {"v4": [V4], "v6": [V6], "dual": [V4, V6]}[fam.name]


def test_init_subnet(fam: Family) -> None:
    subnet = make_subnet(fam.cidr, fam.excludes)
    for version in versions(fam):
        free, reserved = (V4_FREE, V4_RESERVED) if version == V4 else (V6_FREE, V6_RESERVED)
        assert text_ranges(subnet, version, "free") == free
        # kube-ovn keeps the two overlapping excludes as two ranges; merged here.
        assert text_ranges(subnet, version, "reserved") == reserved
        assert text_ranges(subnet, version, "released") == []


def _ips(version: int, text: str) -> dict[int, int]:
    return {version: ip_value(text)[1]}


def test_static_allocation(fam: Family) -> None:
    subnet = make_subnet(fam.cidr, fam.excludes)
    picks = {V4: ("10.16.0.2", "10.16.0.3", "10.16.0.20"), V6: ("fd00::2", "fd00::3", "fd00::14")}
    for i, pod in enumerate(("pod1.ns", "pod2.ns", "pod3.ns")):
        # Both families in one request: on dual stack a single-family request would draw a
        # random partner of the other family.
        request = {v: ip_value(picks[v][i])[1] for v in versions(fam)}
        subnet.get_static_address(pod, request, "")
    for version in versions(fam):
        free = V4_FREE if version == V4 else V6_FREE
        assert text_ranges(subnet, version, "free") == free[1:]
        pool = subnet.pools[version]
        assert {p: pool.pod_to_ip[p] for p in ("pod1.ns", "pod2.ns", "pod3.ns")} == {
            p: ip_value(ip)[1]
            for p, ip in zip(("pod1.ns", "pod2.ns", "pod3.ns"), picks[version], strict=True)
        }
        with pytest.raises(AddressConflictError):
            subnet.get_static_address("pod4.ns", _ips(version, picks[version][1]), "")
        outside = "19.16.0.3" if version == V4 else "fe00::3"
        with pytest.raises(OutOfRangeError):
            subnet.get_static_address("pod5.ns", _ips(version, outside), "")
    for pod in ("pod1.ns", "pod2.ns", "pod3.ns"):
        subnet.release(pod)
    for version in versions(fam):
        free = V4_FREE if version == V4 else V6_FREE
        pool = subnet.pools[version]
        assert text_ranges(subnet, version, "free") == free[1:]
        # .2 and .3 are released; the excluded .20 / ::14 is not put back into circulation.
        first = free[0]
        assert text_ranges(subnet, version, "released") == [first]
        assert pool.pod_to_ip == {} and pool.ip_to_pod == {}
    assert subnet.pod_to_mac == {} and subnet.mac_to_pod == {}


def test_random_allocation(fam: Family) -> None:
    subnet = make_subnet(fam.tiny.replace("10.16.0.2/30", "10.16.0.0/30"))
    first, _ = subnet.get_random_address("pod1.ns", {})
    again, _ = subnet.get_random_address("pod1.ns", {})
    assert first == again
    second, _ = subnet.get_random_address("pod2.ns", {})
    with pytest.raises(NoAvailableError):
        subnet.get_random_address("pod3.ns", {})
    for version in versions(fam):
        pool = subnet.pools[version]
        assert pool.free.size == 0
        base = ip_value("10.16.0.0" if version == V4 else "fd00::")[1]
        assert (first[version], second[version]) == (base + 1, base + 2)
        assert pool.ip_to_pod == {base + 1: "pod1.ns", base + 2: "pod2.ns"}
    subnet.release("pod1.ns")
    subnet.release("pod2.ns")
    for version in versions(fam):
        pool = subnet.pools[version]
        base = ip_value("10.16.0.0" if version == V4 else "fd00::")[1]
        assert pool.free.ranges() == []
        assert pool.released.ranges() == [(base + 1, base + 2)]
        assert pool.ip_to_pod == {} and pool.pod_to_ip == {}
