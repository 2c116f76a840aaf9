"""IPAM facade behaviour beyond the reference cases: kube-ovn's gotchas and our deviations."""

from __future__ import annotations

import random
import re

import pytest

from controller.ipam import (
    IPAM,
    AddressConflictError,
    InvalidAddressError,
    InvalidCIDRError,
    IPAMError,
    NoAvailableError,
    OutOfRangeError,
    StaleAddress,
    SubnetAddress,
    SubnetNotFoundError,
    SubnetUsage,
)
from tests.ipam.helpers import DUAL_CIDR, DUAL_EXCLUDES, V4_CIDR, V4_EXCLUDES

MAC_FORMAT = re.compile(r"^00:00:00(:[0-9A-F]{2}){3}$")


def new_ipam(seed: int = 1) -> IPAM:
    return IPAM(rng=random.Random(seed))


# -- random allocation ---------------------------------------------------------------------


def test_random_allocation_is_lowest_first_not_range_rotation() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", V4_CIDR, V4_EXCLUDES)
    # kube-ovn v1.8 would give .2 then .5 (the [.3-.3] remainder moves to the list's tail).
    got = [im.get_random_address(f"p{i}", "s")[0] for i in range(4)]
    assert got == ["10.16.0.2", "10.16.0.3", "10.16.0.5", "10.16.0.6"]


def test_skipped_addresses_are_never_returned_and_a_skipped_holding_is_replaced() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", "10.16.0.0/29", None)  # hosts .1 - .6
    assert im.get_random_address("p1", "s", ["10.16.0.1", "10.16.0.2"])[0] == "10.16.0.3"
    # p1's address is now skipped (say it turned out to be a node IP): it is given back.
    v4, _, mac = im.get_random_address("p1", "s", ["10.16.0.3"])
    assert v4 == "10.16.0.1"
    assert im.get_random_address("p1", "s", ["10.16.0.3"]) == (v4, "", mac)
    assert not im.contain_address("10.16.0.3")


def test_only_skipped_addresses_left_is_a_conflict_and_changes_nothing() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", "10.16.0.0/30", None)  # .1 and .2
    im.get_random_address("p1", "s")
    with pytest.raises(AddressConflictError, match="skipped"):
        im.get_random_address("p2", "s", ["10.16.0.2"])
    assert im.get_pod_address("p2") == []
    # A holder whose only alternative is skipped keeps its address.
    with pytest.raises(AddressConflictError):
        im.get_random_address("p1", "s", ["10.16.0.1", "10.16.0.2"])
    assert im.get_random_address("p1", "s")[0] == "10.16.0.1"
    with pytest.raises(InvalidAddressError):
        im.get_random_address("p3", "s", ["not-an-ip"])


def test_released_addresses_are_tried_when_every_unused_one_is_skipped() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", "10.16.0.0/29", None)
    for i in range(4):
        im.get_random_address(f"p{i}", "s")  # .1 - .4
    im.release_address_by_pod("p0")  # .1 released; .5 and .6 never used
    assert im.get_random_address("q", "s", ["10.16.0.5", "10.16.0.6"])[0] == "10.16.0.1"


def test_dual_random_is_all_or_nothing() -> None:
    im = new_ipam()
    # Three v4 hosts but only two v6 hosts.
    im.add_or_update_subnet("s", "10.16.0.0/29,fd00::/126", ["10.16.0.4..10.16.0.6"])
    im.get_random_address("p1", "s")
    im.get_random_address("p2", "s")
    before = im.subnet_usage("s")
    with pytest.raises(NoAvailableError, match="IPv6"):
        im.get_random_address("p3", "s")
    assert im.subnet_usage("s") == before
    assert im.get_pod_address("p3") == []


def test_mac_format_uniqueness_and_determinism() -> None:
    class Colliding(random.Random):
        """Hands out the same 24 bits twice before moving on."""

        def __init__(self) -> None:
            super().__init__(0)
            self.values = iter([0xABCDEF, 0xABCDEF, 0x123456])

        def getrandbits(self, k: int) -> int:
            return next(self.values)

    im = IPAM(rng=Colliding())
    im.add_or_update_subnet("s", V4_CIDR, None)
    mac1 = im.get_random_address("p1", "s")[2]
    mac2 = im.get_random_address("p2", "s")[2]
    assert (mac1, mac2) == ("00:00:00:AB:CD:EF", "00:00:00:12:34:56")

    first, second = new_ipam(7), new_ipam(7)
    for im2 in (first, second):
        im2.add_or_update_subnet("s", V4_CIDR, None)
    macs = [first.get_random_address(f"p{i}", "s")[2] for i in range(50)]
    assert macs == [second.get_random_address(f"p{i}", "s")[2] for i in range(50)]
    assert all(MAC_FORMAT.match(m) for m in macs) and len(set(macs)) == 50


def test_same_mac_may_be_used_in_two_subnets_but_not_twice_in_one() -> None:
    im = new_ipam()
    im.add_or_update_subnet("a", "10.16.0.0/24", None)
    im.add_or_update_subnet("b", "10.17.0.0/24", None)
    im.get_static_address("p1", "10.16.0.10", "00:00:00:aa:bb:cc", "a")
    assert im.get_static_address("p2", "10.17.0.10", "00:00:00:AA:BB:CC", "b")[2] == (
        "00:00:00:AA:BB:CC"
    )
    with pytest.raises(AddressConflictError, match="MAC 00:00:00:AA:BB:CC"):
        im.get_static_address("p3", "10.16.0.11", "00-00-00-aa-bb-cc", "a")
    # The failed request left nothing behind.
    assert not im.contain_address("10.16.0.11")
    with pytest.raises(InvalidAddressError):
        im.get_static_address("p3", "10.16.0.11", "zz:00:00:aa:bb:cc", "a")


# -- static allocation ---------------------------------------------------------------------


def test_static_excluded_and_gateway_addresses_are_allowed_but_network_and_broadcast_not() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", V4_CIDR, V4_EXCLUDES)
    assert im.get_static_address("gw", "10.16.0.1", "", "s")[0] == "10.16.0.1"
    assert im.get_static_address("p1", "10.16.0.12", "", "s")[0] == "10.16.0.12"
    for ip in ("10.16.0.0", "10.16.255.255"):
        with pytest.raises(NoAvailableError, match="network or broadcast"):
            im.get_static_address("p2", ip, "", "s")
    with pytest.raises(OutOfRangeError) as caught:
        im.get_static_address("p2", "10.17.0.1", "", "s")
    assert caught.value.subnet == "s" and caught.value.address == "10.17.0.1"
    assert str(caught.value).startswith("AddressOutOfRange:")
    # Excluded addresses do not come back into circulation once released.
    im.release_address_by_pod("p1")
    # 16 distinct excluded addresses (the gateway among them), none of them available.
    assert im.subnet_usage("s") == SubnetUsage(65534 - 16, 1, 0, 0)
    assert im.get_random_address("p3", "s")[0] == "10.16.0.2"


def test_static_of_a_family_the_subnet_lacks_is_no_available_and_changes_nothing() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", V4_CIDR, None)
    with pytest.raises(NoAvailableError, match="no IPv6"):
        im.get_static_address("p1", "10.16.0.5,fd00::5", "", "s")
    assert im.get_pod_address("p1") == []
    with pytest.raises(NoAvailableError):
        im.get_static_address("p1", "fd00::5", "", "s")
    with pytest.raises(InvalidAddressError):
        im.get_static_address("p1", "10.16.0", "", "s")


def test_dual_static_with_one_conflicting_family_leaves_no_half_allocation() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", DUAL_CIDR, DUAL_EXCLUDES)
    im.get_static_address("p1", "10.16.0.100,fd00::100", "", "s")
    with pytest.raises(AddressConflictError, match="fd00::100 is already assigned to p1"):
        im.get_static_address("p2", "10.16.0.101,fd00::100", "", "s")
    assert not im.contain_address("10.16.0.101")
    assert im.get_pod_address("p2") == []


def test_dual_static_single_family_gets_a_random_partner() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", DUAL_CIDR, DUAL_EXCLUDES)
    v4, v6, mac = im.get_static_address("p1", "fd00::0100", "", "s")
    assert (v4, v6) == ("10.16.0.2", "fd00::100")
    assert MAC_FORMAT.match(mac)
    # Asking again with the other family keeps the random half it got.
    assert im.get_static_address("p1", "10.16.0.2", "", "s") == (v4, v6, mac)


def test_static_request_for_a_new_address_releases_the_old_one() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", V4_CIDR, None)
    _, _, mac = im.get_static_address("p1", "10.16.0.10", "", "s")
    assert im.get_static_address("p1", "10.16.0.11", "", "s") == ("10.16.0.11", "", mac)
    assert not im.contain_address("10.16.0.10")
    assert im.subnet_usage("s").v4_used == 1
    # A static MAC replaces the random one; the old MAC is free for others again.
    assert im.get_static_address("p1", "10.16.0.11", "00:00:00:00:00:01", "s")[2] == (
        "00:00:00:00:00:01"
    )
    im.get_static_address("p2", "10.16.0.12", mac, "s")
    # An empty (or missing) MAC keeps the key's current one.
    assert im.get_static_address("p1", "10.16.0.11", "", "s")[2] == "00:00:00:00:00:01"
    assert im.get_static_address("p1", "10.16.0.11", None, "s")[2] == "00:00:00:00:00:01"


def test_static_is_idempotent_for_the_holder_and_a_conflict_for_others() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", V4_CIDR, None)
    first = im.get_static_address("p1", "10.16.0.10", "", "s")
    assert im.get_static_address("p1", "10.16.0.10", "", "s") == first
    assert im.get_random_address("p1", "s") == first
    with pytest.raises(AddressConflictError) as caught:
        im.get_static_address("p2", "10.16.0.10", "", "s")
    assert caught.value.reason == "AddressConflict" and caught.value.subnet == "s"


# -- queries, release, several subnets -----------------------------------------------------


def test_one_key_in_several_subnets() -> None:
    im = new_ipam()
    im.add_or_update_subnet("ovn-default", V4_CIDR, None)
    im.add_or_update_subnet("attach", "192.168.0.0/24,fd01::/120", None)
    im.add_or_update_subnet("other", "172.16.0.0/24", None)
    _, _, mac_a = im.get_random_address("ns/pod", "ovn-default")
    _, _, mac_b = im.get_random_address("ns/pod", "attach")
    assert im.get_pod_address("ns/pod") == [
        SubnetAddress("attach", "192.168.0.1", mac_b),
        SubnetAddress("attach", "fd01::1", mac_b),
        SubnetAddress("ovn-default", "10.16.0.1", mac_a),
    ]
    assert im.release_address("ns/pod", "attach")
    assert not im.release_address("ns/pod", "attach")
    assert [a.subnet for a in im.get_pod_address("ns/pod")] == ["ovn-default"]
    im.get_random_address("ns/pod", "attach")
    im.release_address_by_pod("ns/pod")
    assert im.get_pod_address("ns/pod") == []
    assert not im.contain_address("10.16.0.1") and not im.contain_address("fd01::1")
    im.release_address_by_pod("never-seen")


def test_is_ip_assigned_to_pod_means_held_by_another_key() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", V4_CIDR, None)
    im.get_static_address("p1", "10.16.0.9", "", "s")
    assert im.is_ip_assigned_to_pod("10.16.0.9", "s", "p2")
    assert not im.is_ip_assigned_to_pod("10.16.0.9", "s", "p1")
    assert not im.is_ip_assigned_to_pod("10.16.0.8", "s", "p2")
    assert not im.is_ip_assigned_to_pod("10.16.0.9", "nope", "p2")
    assert not im.is_ip_assigned_to_pod("garbage", "s", "p2")
    assert im.get_ip_owner("10.16.0.9", "s") == "p1"
    assert im.contain_address("10.16.0.9") and not im.contain_address("garbage")


def test_unknown_subnet_is_no_available() -> None:
    im = new_ipam()
    for call in (
        lambda: im.get_random_address("p", "missing"),
        lambda: im.get_static_address("p", "10.16.0.2", "", "missing"),
        lambda: im.subnet_usage("missing"),
    ):
        with pytest.raises(SubnetNotFoundError) as caught:
            call()
        assert isinstance(caught.value, NoAvailableError)
        assert isinstance(caught.value, IPAMError)
        assert caught.value.subnet == "missing"
        assert str(caught.value).startswith("NoAvailableAddress:")


def test_delete_subnet_forgets_its_allocations() -> None:
    im = new_ipam()
    im.add_or_update_subnet("a", V4_CIDR, None)
    im.add_or_update_subnet("b", "10.17.0.0/24", None)
    im.get_random_address("p", "a")
    im.get_random_address("p", "b")
    im.delete_subnet("a")
    im.delete_subnet("a")
    assert [a.subnet for a in im.get_pod_address("p")] == ["b"]
    assert im.subnet_names() == ["b"]
    im.add_or_update_subnet("a", V4_CIDR, None)
    assert im.get_random_address("q", "a")[0] == "10.16.0.1"


def test_usage_counts_each_address_once() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", DUAL_CIDR, DUAL_EXCLUDES)
    # 65534 hosts; excludes cover .1, .4 and .10-.23 = 16 (overlaps counted once).
    assert im.subnet_usage("s") == SubnetUsage(65534 - 16, 0, 65534 - 16, 0)
    im.get_random_address("p1", "s")
    im.get_static_address("p2", "10.16.0.1,fd00::1", "", "s")  # excluded: used, not available
    assert im.subnet_usage("s") == SubnetUsage(65534 - 17, 2, 65534 - 17, 2)
    im.release_address_by_pod("p1")
    assert im.subnet_usage("s") == SubnetUsage(65534 - 16, 1, 65534 - 16, 1)
    assert im.subnet_protocol("s") == "Dual"


def test_ipv6_slash_64_is_cheap_and_counts_exactly() -> None:
    im = new_ipam()
    im.add_or_update_subnet("big", "fd00:1::/64", ["fd00:1::1"])
    assert im.subnet_usage("big").v6_available == (1 << 64) - 3
    assert im.get_random_address("p1", "big")[1] == "fd00:1::2"
    assert im.get_static_address("p2", "fd00:1::ffff:ffff:ffff:fffe", "", "big")[1] == (
        "fd00:1::ffff:ffff:ffff:fffe"
    )
    assert im.subnet_protocol("big") == "IPv6"


# -- subnet updates ------------------------------------------------------------------------


def test_cidr_shrink_reports_dropped_allocations() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", "10.16.0.0/16", None)
    im.get_static_address("kept", "10.16.0.20", "", "s")
    im.get_static_address("outside", "10.16.1.20", "", "s")
    im.get_static_address("broadcast", "10.16.0.255", "", "s")
    im.get_static_address("excluded-now", "10.16.0.30", "", "s")
    stale = im.add_or_update_subnet("s", "10.16.0.0/24", ["10.16.0.30"])
    assert stale == (
        StaleAddress("s", "broadcast", "10.16.0.255", "not a host address of 10.16.0.0/24"),
        StaleAddress("s", "outside", "10.16.1.20", "not a host address of 10.16.0.0/24"),
    )
    assert [a.ip for a in im.get_pod_address("kept")] == ["10.16.0.20"]
    assert [a.ip for a in im.get_pod_address("excluded-now")] == ["10.16.0.30"]
    assert im.get_pod_address("outside") == []
    # The dropped key gets a fresh in-range address, not its stale one.
    assert im.get_random_address("outside", "s")[0] == "10.16.0.1"
    # 254 hosts - 1 excluded (held, but counted once) - 2 other held addresses.
    assert im.subnet_usage("s") == SubnetUsage(251, 3, 0, 0)


def test_update_keeps_released_addresses_released() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", "10.16.0.0/29", None)  # .1 - .6
    for i in range(3):
        im.get_random_address(f"p{i}", "s")  # .1 .2 .3
    im.release_address_by_pod("p1")  # .2 released
    im.add_or_update_subnet("s", "10.16.0.0/29", ["10.16.0.6"])
    # .4 and .5 have never been used, so they come before the released .2.
    assert [im.get_random_address(f"q{i}", "s")[0] for i in range(3)] == [
        "10.16.0.4",
        "10.16.0.5",
        "10.16.0.2",
    ]


def test_family_change_drops_the_removed_family_and_opens_the_new_one() -> None:
    im = new_ipam()
    im.add_or_update_subnet("s", DUAL_CIDR, None)
    im.get_random_address("p1", "s")
    stale = im.add_or_update_subnet("s", V4_CIDR, None)
    assert stale == (StaleAddress("s", "p1", "fd00::1", "subnet has no IPv6"),)
    assert [a.ip for a in im.get_pod_address("p1")] == ["10.16.0.1"]
    im.add_or_update_subnet("s", "10.16.0.0/16,fd02::/120", None)
    v4, v6, _ = im.get_random_address("p1", "s")
    assert (v4, v6) == ("10.16.0.1", "fd02::1")
    # A key that loses every address loses its MAC too.
    _, _, mac = im.get_random_address("p2", "s")
    im.add_or_update_subnet("s", "10.99.0.0/24", None)
    assert im.get_pod_address("p2") == []
    im.get_static_address("p3", "10.99.0.9", mac, "s")


def test_bad_exclude_entries_are_rejected_with_the_subnet_name() -> None:
    im = new_ipam()
    with pytest.raises(InvalidCIDRError, match=r"exclude_ips.*subnet s"):
        im.add_or_update_subnet("s", V4_CIDR, ["10.16.0.9..10.16.0.1"])


def test_a_bare_string_where_a_list_is_expected_is_a_clear_error() -> None:
    im = new_ipam()
    with pytest.raises(InvalidCIDRError, match="list of strings"):
        im.add_or_update_subnet("s", V4_CIDR, "10.16.0.1")
    im.add_or_update_subnet("s", V4_CIDR, None)
    with pytest.raises(InvalidAddressError, match="list of strings"):
        im.get_random_address("p", "s", "10.16.0.1")
