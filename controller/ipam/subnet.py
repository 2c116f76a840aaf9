"""Allocation state of one subnet: kube-ovn's pkg/ipam/subnet.go over range lists.

A `SubnetPool` (kube-ovn's ipam.Subnet) holds one `AddressPool` per family it has (IPv4, IPv6 or
both) plus the MAC maps shared by the families. Every host address of a pool (network+1 ..
broadcast-1) is, at all times, in exactly one of:

* ``free``     -- never handed out since the pool was built (random allocation takes these first);
* ``released`` -- handed out once and given back (reused only when ``free`` has nothing usable);
* ``reserved`` -- excluded by the subnet's excludeIps (never handed out randomly, but a static
  request may take it, as kube-ovn allows for the gateway);
* held by a key in ``ip_to_pod`` (an excluded address held statically is both reserved and held).

Operations validate everything first and mutate last, so a raised error leaves the subnet as it
was. Inputs are integers: parsing lives in `address.py`, locking in the `IPAM` facade.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass

from controller.ipam.address import V4, V6, Network, format_ip, generate_mac, protocol_of
from controller.ipam.errors import AddressConflictError, NoAvailableError, OutOfRangeError
from controller.ipam.ip_range import IPRangeList

LOG = logging.getLogger(__name__)

# A subnet with millions of pods could make a random draw collide often; past this many misses
# the MAC space is treated as exhausted instead of looping forever.
_MAC_ATTEMPTS = 4096


@dataclass(frozen=True, slots=True)
class SubnetUsage:
    """Address counts of one subnet, per family (0 for a family the subnet does not have).

    ``*_available`` counts the addresses random allocation can still hand out: never-used plus
    released ones, excluding the excluded addresses and the network/broadcast addresses. kube-ovn's
    status ``v4availableIPs`` means the same, but computes it as hosts - len(excludes) - used and
    so counts overlapping excludes twice and an excluded address held statically twice; here each
    address is counted once. ``*_used`` counts addresses held by a key, excluded ones included.
    """

    v4_available: int
    v4_used: int
    v6_available: int
    v6_used: int


@dataclass(frozen=True, slots=True)
class StaleAddress:
    """An allocation dropped by a subnet update because it no longer fits the new spec."""

    subnet: str
    pod_key: str
    ip: str
    reason: str


class AddressPool:
    """One address family of one subnet (see the module docstring for the invariant)."""

    __slots__ = (
        "first",
        "free",
        "ip_to_pod",
        "last",
        "network",
        "pod_to_ip",
        "released",
        "reserved",
    )

    def __init__(self, network: Network, excludes: list[tuple[int, int]]) -> None:
        self.network = network
        self.first = first = network.first
        self.last = last = network.last
        self.reserved = IPRangeList((max(s, first), min(e, last)) for s, e in excludes)
        self.free = IPRangeList([(first, last)] if first <= last else [])
        for start, end in self.reserved.ranges():
            self.free.remove_range(start, end)
        self.released = IPRangeList()
        self.ip_to_pod: dict[int, str] = {}
        self.pod_to_ip: dict[str, int] = {}

    @property
    def version(self) -> int:
        return self.network.version

    def is_host(self, ip: int) -> bool:
        return self.first <= ip <= self.last

    def assign(self, pod_key: str, ip: int) -> None:
        """Record `ip` for `pod_key`, taking it out of free or released (reserved stays)."""
        if not self.free.remove(ip):
            self.released.remove(ip)
        self.ip_to_pod[ip] = pod_key
        self.pod_to_ip[pod_key] = ip

    def unassign(self, pod_key: str) -> int | None:
        """Forget `pod_key`'s address; it goes to released unless it is excluded."""
        ip = self.pod_to_ip.pop(pod_key, None)
        if ip is None:
            return None
        del self.ip_to_pod[ip]
        if self.is_host(ip) and not self.reserved.contains(ip):
            self.released.add(ip)
        return ip


# (address the key ends up with, address it gives back or None)
_Plan = tuple[int, int | None]


class SubnetPool:
    """Per-subnet allocation state; not thread-safe on its own."""

    def __init__(
        self,
        name: str,
        networks: Mapping[int, Network],
        excludes: list[tuple[int, int, int]],
        rng: random.Random,
    ) -> None:
        self.name = name
        self._rng = rng
        self.pools: dict[int, AddressPool] = {
            version: AddressPool(net, [(s, e) for v, s, e in excludes if v == version])
            for version, net in sorted(networks.items())
        }
        self.pod_to_mac: dict[str, str] = {}
        self.mac_to_pod: dict[str, str] = {}

    @property
    def protocol(self) -> str:
        return protocol_of(set(self.pools))

    @property
    def cidr(self) -> str:
        return ",".join(str(pool.network) for pool in self.pools.values())

    # -- allocation ------------------------------------------------------------------------

    def get_random_address(
        self, pod_key: str, skipped: Mapping[int, frozenset[int]], mac: str = ""
    ) -> tuple[dict[int, int], str]:
        """One address per family (existing ones kept unless skipped) plus the key's MAC, or
        `mac` when given (AddressConflictError when another key holds it)."""
        plans = {
            version: self._plan_random(pool, pod_key, skipped.get(version, frozenset()))
            for version, pool in self.pools.items()
        }
        mac = self._plan_mac(pod_key, mac)
        return self._commit(pod_key, plans, mac), mac

    def get_static_address(
        self, pod_key: str, ips: Mapping[int, int], mac: str
    ) -> tuple[dict[int, int], str]:
        """The requested addresses (a random partner for a missing family on dual stack)."""
        plans: dict[int, _Plan] = {}
        for version, ip in sorted(ips.items()):
            pool = self.pools.get(version)
            if pool is None:
                raise NoAvailableError(
                    f"subnet has no IPv{version} CIDR ({self.cidr})",
                    subnet=self.name,
                    address=format_ip(version, ip),
                )
            plans[version] = self._plan_static(pool, pod_key, ip)
        for version, pool in self.pools.items():
            if version not in plans:
                plans[version] = self._plan_random(pool, pod_key, frozenset())
        chosen_mac = self._plan_mac(pod_key, mac)
        return self._commit(pod_key, plans, chosen_mac), chosen_mac

    def _plan_random(self, pool: AddressPool, pod_key: str, skipped: frozenset[int]) -> _Plan:
        current = pool.pod_to_ip.get(pod_key)
        if current is not None and current not in skipped:
            return current, None
        candidate = pool.free.lowest_not_in(skipped)
        if candidate is None:
            candidate = pool.released.lowest_not_in(skipped)
        if candidate is None:
            if pool.free or pool.released:
                raise AddressConflictError(
                    f"every available IPv{pool.version} address is in the skipped list",
                    subnet=self.name,
                )
            raise NoAvailableError(
                f"no available IPv{pool.version} address in {pool.network}", subnet=self.name
            )
        return candidate, current

    def _plan_static(self, pool: AddressPool, pod_key: str, ip: int) -> _Plan:
        network = pool.network
        if not network.network <= ip <= network.broadcast:
            text = format_ip(pool.version, ip)
            raise OutOfRangeError(f"{text} is outside {network}", subnet=self.name, address=text)
        owner = pool.ip_to_pod.get(ip)
        if owner is not None:
            if owner != pod_key:
                text = format_ip(pool.version, ip)
                raise AddressConflictError(
                    f"{text} is already assigned to {owner}", subnet=self.name, address=text
                )
            return ip, None
        # Every other host address is free, released or reserved (the pool's invariant).
        if ip in (network.network, network.broadcast):
            text = format_ip(pool.version, ip)
            raise NoAvailableError(
                f"{text} is the network or broadcast address of {network}",
                subnet=self.name,
                address=text,
            )
        return ip, pool.pod_to_ip.get(pod_key)

    def _plan_mac(self, pod_key: str, requested: str) -> str:
        if requested:
            owner = self.mac_to_pod.get(requested)
            if owner is not None and owner != pod_key:
                raise AddressConflictError(
                    f"MAC {requested} is already assigned to {owner}",
                    subnet=self.name,
                    address=requested,
                )
            return requested
        existing = self.pod_to_mac.get(pod_key)
        if existing is not None:
            return existing
        for _ in range(_MAC_ATTEMPTS):
            candidate = generate_mac(self._rng.getrandbits(24))
            if candidate not in self.mac_to_pod:
                return candidate
        raise NoAvailableError("no free MAC address", subnet=self.name)

    def _commit(self, pod_key: str, plans: Mapping[int, _Plan], mac: str) -> dict[int, int]:
        result: dict[int, int] = {}
        for version, (ip, old) in plans.items():
            pool = self.pools[version]
            if old is not None and old != ip:
                pool.unassign(pod_key)
            if pool.pod_to_ip.get(pod_key) != ip:
                pool.assign(pod_key, ip)
            result[version] = ip
        old_mac = self.pod_to_mac.get(pod_key)
        if old_mac != mac:
            if old_mac is not None:
                del self.mac_to_pod[old_mac]
            self.pod_to_mac[pod_key] = mac
            self.mac_to_pod[mac] = pod_key
        return result

    # -- release and queries ---------------------------------------------------------------

    def release(self, pod_key: str) -> bool:
        """Give back every address and the MAC of `pod_key`; False if it held nothing."""
        released = False
        for pool in self.pools.values():
            if pool.unassign(pod_key) is not None:
                released = True
        mac = self.pod_to_mac.pop(pod_key, None)
        if mac is not None:
            del self.mac_to_pod[mac]
            released = True
        return released

    def pod_address(self, pod_key: str) -> tuple[dict[int, int], str]:
        """(addresses by family, MAC or "") held by `pod_key`."""
        ips = {
            version: pool.pod_to_ip[pod_key]
            for version, pool in self.pools.items()
            if pod_key in pool.pod_to_ip
        }
        return ips, self.pod_to_mac.get(pod_key, "")

    def has_pod(self, pod_key: str) -> bool:
        return pod_key in self.pod_to_mac or any(
            pod_key in pool.pod_to_ip for pool in self.pools.values()
        )

    def pod_keys(self) -> set[str]:
        keys = set(self.pod_to_mac)
        for pool in self.pools.values():
            keys.update(pool.pod_to_ip)
        return keys

    def holder(self, version: int, ip: int) -> str | None:
        pool = self.pools.get(version)
        return None if pool is None else pool.ip_to_pod.get(ip)

    def usage(self) -> SubnetUsage:
        def counts(version: int) -> tuple[int, int]:
            pool = self.pools.get(version)
            if pool is None:
                return 0, 0
            return pool.free.size + pool.released.size, len(pool.pod_to_ip)

        v4_available, v4_used = counts(V4)
        v6_available, v6_used = counts(V6)
        return SubnetUsage(v4_available, v4_used, v6_available, v6_used)

    def verify(self) -> list[str]:
        """Check the invariant of the module docstring; returns the violations found (none when
        consistent). O(ranges + keys); meant for tests and debugging, not the hot path."""
        problems: list[str] = []
        holders: set[str] = set()
        for version, pool in self.pools.items():
            problems += _pool_problems(f"{self.name} IPv{version}", version, pool)
            holders.update(pool.pod_to_ip)
        if {mac: k for k, mac in self.pod_to_mac.items()} != self.mac_to_pod:
            problems.append(f"{self.name}: pod_to_mac and mac_to_pod disagree")
        if set(self.pod_to_mac) != holders:
            problems.append(f"{self.name}: MAC holders differ from address holders")
        return problems

    # -- spec change -----------------------------------------------------------------------

    def update(
        self, networks: Mapping[int, Network], excludes: list[tuple[int, int, int]]
    ) -> list[StaleAddress]:
        """Apply a new CIDR block / exclude list, keeping every allocation that still fits.

        An allocation fits when it is a host address of the new CIDR of its family (an address
        that became excluded stays held). Released addresses that still fit and are not excluded
        stay released. Allocations that do not fit are dropped and returned.
        """
        stale: list[StaleAddress] = []
        new_pools: dict[int, AddressPool] = {}
        for version, network in sorted(networks.items()):
            pool = AddressPool(network, [(s, e) for v, s, e in excludes if v == version])
            old = self.pools.get(version)
            if old is not None:
                carried = old.released.intersection(network.first, network.last)
                for start, end in pool.reserved.ranges():
                    carried.remove_range(start, end)
                for start, end in carried.ranges():
                    pool.free.remove_range(start, end)
                pool.released = carried
                for pod_key, ip in old.pod_to_ip.items():
                    if pool.is_host(ip):
                        pool.assign(pod_key, ip)
                    else:
                        stale.append(
                            StaleAddress(
                                self.name,
                                pod_key,
                                format_ip(version, ip),
                                f"not a host address of {network}",
                            )
                        )
            new_pools[version] = pool
        for version, old in self.pools.items():
            if version not in networks:
                stale.extend(
                    StaleAddress(
                        self.name, pod_key, format_ip(version, ip), f"subnet has no IPv{version}"
                    )
                    for pod_key, ip in old.pod_to_ip.items()
                )
        self.pools = new_pools
        still_holding: set[str] = set()
        for pool in new_pools.values():
            still_holding.update(pool.pod_to_ip)
        for pod_key in [k for k in self.pod_to_mac if k not in still_holding]:
            del self.mac_to_pod[self.pod_to_mac.pop(pod_key)]
        stale.sort(key=lambda s: (s.pod_key, s.ip))
        for item in stale:
            LOG.warning(
                "subnet %s: dropped %s of %s: %s", self.name, item.ip, item.pod_key, item.reason
            )
        return stale


__all__ = ["V4", "V6", "AddressPool", "StaleAddress", "SubnetPool", "SubnetUsage"]


def _pool_problems(where: str, version: int, pool: AddressPool) -> list[str]:
    """The invariant's violations within one family's pool (see `SubnetPool.verify`)."""
    problems: list[str] = []
    net = pool.network
    hosts = max(0, net.last - net.first + 1)
    if {ip: k for k, ip in pool.pod_to_ip.items()} != pool.ip_to_pod:
        problems.append(f"{where}: pod_to_ip and ip_to_pod disagree")
    lists = {"free": pool.free, "released": pool.released, "reserved": pool.reserved}
    for name, ranges in lists.items():
        if ranges and not (net.first <= ranges.ranges()[0][0]):
            problems.append(f"{where}: {name} starts below the first host")
        if ranges and not (ranges.ranges()[-1][1] <= net.last):
            problems.append(f"{where}: {name} ends above the last host")
    for a, b in (("free", "released"), ("free", "reserved"), ("released", "reserved")):
        for start, end in lists[a].ranges():
            if lists[b].intersection(start, end):
                problems.append(f"{where}: {a} and {b} overlap")
    held_outside = 0
    for ip in pool.ip_to_pod:
        if pool.free.contains(ip) or pool.released.contains(ip):
            problems.append(f"{where}: held {format_ip(version, ip)} is also available")
        if not pool.is_host(ip):
            problems.append(f"{where}: held {format_ip(version, ip)} is not a host")
        if not pool.reserved.contains(ip):
            held_outside += 1
    total = pool.free.size + pool.released.size + pool.reserved.size + held_outside
    if total != hosts:
        problems.append(f"{where}: counts add up to {total}, not {hosts} hosts")
    return problems
