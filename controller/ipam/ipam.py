"""The thread-safe IPAM facade: kube-ovn's pkg/ipam/ipam.go API in snake_case.

`IPAM` maps subnet names to `SubnetPool` state and serialises every call with one lock (each call is
microseconds of in-memory work, so a single lock costs less than kube-ovn's RWMutex plus
per-subnet mutexes and rules out their lock-ordering bugs, e.g. kube-ovn #2979 and #4126). It
parses strings at the edge (`address.py`), works on integers inside and returns canonical strings.

Keys: like kube-ovn v1.8, the key is whatever the caller passes, normally the pod key
``"<ns>/<pod>"`` (``"node-<name>"`` for nodes). A key holds at most one address per family and one
MAC *per subnet*, so one key can hold addresses in several subnets (the pod's default network plus
multus attachments on other subnets). An index key -> subnets makes `release_address_by_pod` and
`get_pod_address` cost O(subnets of the key), not O(all subnets).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from controller.ipam.address import (
    V4,
    V6,
    format_ip,
    ip_value,
    normalize_mac,
    parse_cidr_block,
    parse_exclude,
    parse_ip_list,
)
from controller.ipam.errors import InvalidAddressError, InvalidCIDRError, SubnetNotFoundError
from controller.ipam.subnet import StaleAddress, SubnetPool, SubnetUsage

LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SubnetAddress:
    """One address held by a key (kube-ovn's SubnetAddress{Subnet, Ip, Mac})."""

    subnet: str
    ip: str
    mac: str


_NO_SKIP: Mapping[int, frozenset[int]] = MappingProxyType({})

# (v4, v6, mac); "" for a family the subnet does not have.
Address = tuple[str, str, str]


class IPAM:
    """In-memory address management for every subnet; all methods are thread-safe.

    Guarantees:

    * an address is held by at most one key per subnet, whatever the interleaving of calls;
    * every call either fully succeeds or raises an `IPAMError` and changes nothing;
    * random allocation never returns an excluded, network or broadcast address.
    """

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self._lock = threading.Lock()
        self._rng = rng if rng is not None else random.Random()
        self._subnets: dict[str, SubnetPool] = {}
        # key -> subnets it holds something in; tuples, as nearly every key has exactly one
        # subnet and a 1-tuple costs a fifth of a set (this map has one entry per pod).
        self._pod_subnets: dict[str, tuple[str, ...]] = {}

    # -- subnets ---------------------------------------------------------------------------

    def add_or_update_subnet(
        self,
        name: str,
        cidr: str,
        exclude_ips: Iterable[str] | None = None,
        *,
        quiet: bool = False,
    ) -> tuple[StaleAddress, ...]:
        """Register a subnet, or apply a new CIDR block / exclude list to an existing one.

        `cidr` is "v4", "v6" or dual "v4,v6"; `exclude_ips` entries are addresses or "a..b"
        ranges, possibly overlapping or outside the CIDR (clipped). Everything is parsed before
        anything changes, so an InvalidCIDRError keeps the old state. Returns the allocations the
        update dropped because they no longer fit (always empty for a new subnet).
        """
        if isinstance(exclude_ips, str):
            raise InvalidCIDRError("exclude_ips must be a list of strings", subnet=name)
        networks = parse_cidr_block(cidr, subnet=name)
        excludes = [parse_exclude(entry, subnet=name) for entry in exclude_ips or ()]
        with self._lock:
            existing = self._subnets.get(name)
            if existing is None:
                self._subnets[name] = SubnetPool(name, networks, excludes, self._rng)
                LOG.log(logging.DEBUG if quiet else logging.INFO, "add subnet %s %s", name, cidr)
                return ()
            stale = existing.update(networks, excludes)
            for item in stale:
                if not existing.has_pod(item.pod_key):
                    self._unindex(item.pod_key, name)
            LOG.info("update subnet %s %s, %d allocations dropped", name, cidr, len(stale))
            return tuple(stale)

    def delete_subnet(self, name: str) -> None:
        """Forget a subnet and every allocation in it (no-op when unknown)."""
        with self._lock:
            subnet = self._subnets.pop(name, None)
            if subnet is None:
                return
            for pod_key in subnet.pod_keys():
                self._unindex(pod_key, name)
            LOG.info("delete subnet %s", name)

    def has_subnet(self, name: str) -> bool:
        with self._lock:
            return name in self._subnets

    def subnet_names(self) -> list[str]:
        with self._lock:
            return sorted(self._subnets)

    def subnet_usage(self, name: str) -> SubnetUsage:
        """Available and used counts per family (see SubnetUsage for their meaning)."""
        with self._lock:
            return self._subnet(name, "").usage()

    def subnet_protocol(self, name: str) -> str:
        """The protocol: "IPv4", "IPv6" or "Dual"."""
        with self._lock:
            return self._subnet(name, "").protocol

    # -- allocation ------------------------------------------------------------------------

    def get_random_address(
        self,
        pod_key: str,
        subnet_name: str,
        skipped_addrs: Iterable[str] | None = None,
        *,
        mac: str = "",
    ) -> Address:
        """An address of every family of the subnet for `pod_key`, lowest free first.

        Idempotent: a key that already holds an address keeps it, unless that address is in
        `skipped_addrs`, in which case it is given back and another one chosen. Raises
        NoAvailableError when nothing is left, AddressConflictError when only skipped addresses are.
        `mac` ("" for the key's current or a random one) is the MAC wanted with the address,
        as kube-ovn v1.9.41's GetRandomAddress takes it: AddressConflictError when another key holds
        it, InvalidAddressError when it does not parse.
        """
        wanted_mac = normalize_mac(mac, subnet=subnet_name) if mac and mac.strip() else ""
        frozen: Mapping[int, frozenset[int]] = _NO_SKIP
        if isinstance(skipped_addrs, str):
            raise InvalidAddressError("skipped_addrs must be a list of strings", subnet=subnet_name)
        if skipped_addrs:
            skipped: dict[int, set[int]] = {V4: set(), V6: set()}
            for text in skipped_addrs:
                version, value = ip_value(text)
                skipped[version].add(value)
            frozen = {version: frozenset(values) for version, values in skipped.items()}
        with self._lock:
            subnet = self._subnet(subnet_name, "")
            ips, got_mac = subnet.get_random_address(pod_key, frozen, wanted_mac)
            self._index(pod_key, subnet_name)
        result = _address(ips, got_mac)
        LOG.info("allocate v4 %s v6 %s mac %s for %s from subnet %s", *result, pod_key, subnet_name)
        return result

    def get_static_address(
        self, pod_key: str, ip: str, mac: str | None, subnet_name: str, *, quiet: bool = False
    ) -> Address:
        """The requested address(es) for `pod_key`: ip is "v4", "v6" or "v4,v6"; mac may be ""
        or None (then the key's current MAC is kept, or a random one generated).

        On a dual-stack subnet a single-family request gets a random partner of the other
        family. Excluded addresses (the gateway included) may be taken; the network and broadcast
        addresses may not (NoAvailableError). Raises OutOfRangeError outside the CIDR,
        AddressConflictError when another key holds the address or the MAC, InvalidAddressError for
        text that does not parse. `quiet` logs the allocation at debug level (the rebuild at
        start-up restores every address and logs one summary line instead).
        """
        ips = parse_ip_list(ip, subnet=subnet_name)
        wanted_mac = normalize_mac(mac, subnet=subnet_name) if mac and mac.strip() else ""
        with self._lock:
            subnet = self._subnet(subnet_name, ip)
            got, got_mac = subnet.get_static_address(pod_key, ips, wanted_mac)
            self._index(pod_key, subnet_name)
        result = _address(got, got_mac)
        LOG.log(
            logging.DEBUG if quiet else logging.INFO,
            "allocate static v4 %s v6 %s mac %s for %s from subnet %s",
            *result,
            pod_key,
            subnet_name,
        )
        return result

    # -- release ---------------------------------------------------------------------------

    def release_address_by_pod(self, pod_key: str) -> None:
        """Give back everything `pod_key` holds, in every subnet."""
        with self._lock:
            for name in self._pod_subnets.pop(pod_key, ()):
                subnet = self._subnets.get(name)
                if subnet is not None:
                    subnet.release(pod_key)
        LOG.debug("released addresses of %s", pod_key)

    def release_address(self, pod_key: str, subnet_name: str) -> bool:
        """Give back what `pod_key` holds in one subnet (an attachment); False if nothing."""
        with self._lock:
            subnet = self._subnets.get(subnet_name)
            if subnet is None or not subnet.release(pod_key):
                return False
            self._unindex(pod_key, subnet_name)
            return True

    # -- queries ---------------------------------------------------------------------------

    def get_pod_address(self, pod_key: str) -> list[SubnetAddress]:
        """Every address `pod_key` holds: by subnet name, then v4 before v6.

        Unlike kube-ovn, subnets where the key holds nothing are not listed.
        """
        with self._lock:
            result: list[SubnetAddress] = []
            for name in sorted(self._pod_subnets.get(pod_key, ())):
                ips, mac = self._subnets[name].pod_address(pod_key)
                result.extend(
                    SubnetAddress(name, format_ip(version, ips[version]), mac)
                    for version in (V4, V6)
                    if version in ips
                )
            return result

    def contain_address(self, ip: str) -> bool:
        """True when some key holds `ip` in some subnet. False for text that does not parse."""
        try:
            version, value = ip_value(ip)
        except InvalidAddressError:
            return False
        with self._lock:
            return any(s.holder(version, value) is not None for s in self._subnets.values())

    def get_ip_owner(self, ip: str, subnet_name: str) -> str | None:
        """The key holding `ip` in the subnet, if any (kube-ovn v1.11 IsIPAssignedToOtherPod)."""
        try:
            version, value = ip_value(ip)
        except InvalidAddressError:
            return None
        with self._lock:
            subnet = self._subnets.get(subnet_name)
            return None if subnet is None else subnet.holder(version, value)

    def is_ip_assigned_to_pod(self, ip: str, subnet_name: str, pod_key: str) -> bool:
        """True when a key *other than* `pod_key` holds `ip` in the subnet (kube-ovn's
        misleadingly named IsIPAssignedToPod). False for an unknown subnet or unparsable ip."""
        owner = self.get_ip_owner(ip, subnet_name)
        return owner is not None and owner != pod_key

    def verify(self) -> list[str]:
        """Consistency self-check of every subnet and of the key index; [] when consistent."""
        with self._lock:
            problems: list[str] = []
            for name, subnet in self._subnets.items():
                problems.extend(subnet.verify())
                for pod_key in subnet.pod_keys():
                    if name not in self._pod_subnets.get(pod_key, ()):
                        problems.append(f"{name}: {pod_key} missing from the key index")
            for pod_key, names in self._pod_subnets.items():
                for name in names:
                    holder = self._subnets.get(name)
                    if holder is None or not holder.has_pod(pod_key):
                        problems.append(f"{name}: index lists {pod_key} but it holds nothing")
            return problems

    # -- internals (lock held) -------------------------------------------------------------

    def _subnet(self, name: str, address: str) -> SubnetPool:
        subnet = self._subnets.get(name)
        if subnet is None:
            raise SubnetNotFoundError("subnet is not registered", subnet=name, address=address)
        return subnet

    def _index(self, pod_key: str, subnet_name: str) -> None:
        names = self._pod_subnets.get(pod_key)
        if names is None:
            self._pod_subnets[pod_key] = (subnet_name,)
        elif subnet_name not in names:
            self._pod_subnets[pod_key] = (*names, subnet_name)

    def _unindex(self, pod_key: str, subnet_name: str) -> None:
        names = self._pod_subnets.get(pod_key)
        if names is not None and subnet_name in names:
            rest = tuple(n for n in names if n != subnet_name)
            if rest:
                self._pod_subnets[pod_key] = rest
            else:
                del self._pod_subnets[pod_key]


def _address(ips: dict[int, int], mac: str) -> Address:
    v4 = format_ip(V4, ips[V4]) if V4 in ips else ""
    v6 = format_ip(V6, ips[V6]) if V6 in ips else ""
    return v4, v6, mac
