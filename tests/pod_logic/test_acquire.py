"""pod_logic.acquire_address (kube-ovn pod.go acquireAddress) over a tiny in-memory allocator,
plus boundaries."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from controller import pod_logic as pl
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import Node, PodNet, ProviderType, Subnet
from controller.ipam import IPAM
from controller.ipam import errors as ipam_errors
from controller.pod_logic import AddressMode, AddressRequest
from controller.testing.builders import NOW
from controller.testing.models import namespace, node, pod, sts_pod, subnet

ROOT = Path(__file__).resolve().parents[2]


NoAvailable = ipam_errors.NoAvailableError
Conflict = ipam_errors.AddressConflictError


class FakeAllocator:
    """Hands out v4 addresses of each subnet from .2 upward; records who holds what."""

    def __init__(self, subnets: Iterable[Subnet]) -> None:
        self.cidrs = {s.name: s.cidr_block for s in subnets}
        self.owner: dict[tuple[str, str], str] = {}  # (subnet, ip) -> key

    def _prefix(self, subnet: str) -> str:
        return self.cidrs[subnet].split("/")[0].rsplit(".", 1)[0]

    def get_random_address(
        self,
        pod_key: str,
        subnet_name: str,
        skipped_addrs: Iterable[str] | None = None,
        *,
        mac: str = "",
    ) -> tuple[str, str, str]:
        del mac  # the MAC is not what these tests look at
        skipped = set(skipped_addrs or ())
        for (s, ip), key in list(self.owner.items()):
            if key == pod_key and s == subnet_name:
                if ip not in skipped:
                    return ip, "", "00:00:00:00:00:01"
                del self.owner[(s, ip)]
        for host in range(2, 6):
            ip = f"{self._prefix(subnet_name)}.{host}"
            if (subnet_name, ip) not in self.owner and ip not in skipped:
                self.owner[(subnet_name, ip)] = pod_key
                return ip, "", "00:00:00:00:00:01"
        raise (Conflict if skipped else NoAvailable)(subnet_name)

    def get_static_address(
        self, pod_key: str, ip: str, mac: str, subnet_name: str
    ) -> tuple[str, str, str]:
        if not ip.startswith(self._prefix(subnet_name) + "."):
            raise ipam_errors.OutOfRangeError(ip)
        holder = self.owner.get((subnet_name, ip))
        if holder not in (None, pod_key):
            raise Conflict(ip)
        self.owner[(subnet_name, ip)] = pod_key
        return ip, "", mac or "00:00:00:00:00:02"

    def is_ip_assigned_to_pod(self, ip: str, subnet_name: str, pod_key: str) -> bool:
        holder = self.owner.get((subnet_name, ip))
        return holder is not None and holder != pod_key


DEFAULT = subnet("ovn-default", "10.16.0.0/24")
S2 = subnet("s2", "10.18.0.0/24")
UNDERLAY = subnet("u", "10.19.0.0/24", vlan="v10")


def acquire(
    alloc: FakeAllocator, request: AddressRequest, nodes: Sequence[Node] = ()
) -> tuple[str, str, str, str]:
    v4, v6, mac, sub = pl.acquire_address(alloc, request, nodes)
    return v4, v6, mac, sub.name


def test_random_skips_node_addresses() -> None:
    alloc = FakeAllocator([DEFAULT])
    nodes = [node("n1", "10.16.0.2"), node("n2", "10.16.0.3")]
    req = AddressRequest(AddressMode.RANDOM, "ns/p", (DEFAULT,))
    assert acquire(alloc, req, nodes) == ("10.16.0.4", "", "00:00:00:00:00:01", "ovn-default")
    assert alloc.owner == {("ovn-default", "10.16.0.4"): "ns/p"}  # skipped ones given back
    # idempotent per key
    assert acquire(alloc, req, nodes)[0] == "10.16.0.4"


def test_random_on_underlay_does_not_check_nodes() -> None:
    alloc = FakeAllocator([UNDERLAY])
    req = AddressRequest(AddressMode.RANDOM, "ns/p", (UNDERLAY,))
    assert acquire(alloc, req, [node("n1", "10.19.0.2")])[0] == "10.19.0.2"


def test_random_exhaustion_propagates_the_allocator_error() -> None:
    alloc = FakeAllocator([DEFAULT])
    nodes = [node(f"n{i}", f"10.16.0.{i}") for i in range(2, 6)]
    with pytest.raises(Conflict):
        acquire(alloc, AddressRequest(AddressMode.RANDOM, "ns/p", (DEFAULT,)), nodes)


def test_static_tries_candidates_in_order() -> None:
    alloc = FakeAllocator([DEFAULT, S2])
    req = AddressRequest(AddressMode.STATIC, "ns/p", (DEFAULT, S2), ("10.18.0.9",), "aa:bb")
    assert acquire(alloc, req) == ("10.18.0.9", "", "aa:bb", "s2")


def test_static_failure_reraises_last_error() -> None:
    alloc = FakeAllocator([DEFAULT])
    alloc.owner[("ovn-default", "10.16.0.9")] = "ns/other"
    req = AddressRequest(AddressMode.STATIC, "ns/p", (DEFAULT,), ("10.16.0.9",))
    with pytest.raises(Conflict, match="AddressConflict"):
        acquire(alloc, req)
    bad = AddressRequest(AddressMode.STATIC, "ns/p", (DEFAULT,), ("10.16.0.9/24",))
    with pytest.raises(InvalidPodNetworkError, match="failed to parse IP"):
        acquire(alloc, bad)


def test_pool_skips_addresses_held_by_others() -> None:
    alloc = FakeAllocator([DEFAULT])
    alloc.owner[("ovn-default", "10.16.0.7")] = "ns/other"
    req = AddressRequest(
        AddressMode.POOL, "ns/p", (DEFAULT,), ("10.16.0.7", "10.16.0.8"), check_assigned=True
    )
    assert acquire(alloc, req)[0] == "10.16.0.8"


def test_pool_exhausted_is_no_available_without_random_fallback() -> None:
    alloc = FakeAllocator([DEFAULT])
    alloc.owner[("ovn-default", "10.16.0.7")] = "ns/other"
    req = AddressRequest(AddressMode.POOL, "ns/p", (DEFAULT,), ("10.16.0.7", "bad"), "", True)
    with pytest.raises(NoAvailable):
        acquire(alloc, req)
    with pytest.raises(NoAvailable):
        acquire(alloc, AddressRequest(AddressMode.POOL, "ns/web-5", (DEFAULT,)))


def test_plan_then_acquire_statefulset_pool_end_to_end() -> None:
    alloc = FakeAllocator([DEFAULT, S2])
    by_name = {"ovn-default": DEFAULT, "s2": S2}
    the_pod = sts_pod("web-1", annotations={"ovn.kubernetes.io/ip_pool": "10.18.0.5,10.18.0.6"})
    net = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
    ns_nets = pl.get_ns_available_subnets(namespace("default", "ovn-default,s2"), by_name)
    req = pl.plan_address_request(the_pod, net, ns_nets, keep_vm_ip=False)
    v4, _, _, sub = acquire(alloc, req)
    assert (v4, sub) == ("10.18.0.6", "s2")  # index 1 of the pool, from the second subnet


def test_is_replaced_by_and_timezone_guard() -> None:
    old = pod("p")
    assert not pl.is_replaced_by(old, None)
    assert not pl.is_replaced_by(old, pod("p"))
    assert pl.is_replaced_by(old, pod("p", uid="other"))
    with pytest.raises(ValueError, match="timezone-aware"):
        pl.is_pod_alive(old, NOW.replace(tzinfo=None))


def test_pure_modules_import_no_io_libraries() -> None:
    code = (
        "import sys\n"
        "import controller.config, controller.core.constants, controller.core.errors\n"
        "import controller.core.model\n"
        "import controller.core.annotations, controller.core.naming, controller.pod_logic\n"
        "import controller.core.network_attachment, controller.core.address\n"
        "bad = [m for m in ('kubernetes', 'ovsdbapp', 'ovs', 'prometheus_client', 'urllib3')\n"
        "       if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == ""


def test_inspect_pod() -> None:
    default_net = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
    attach_net = PodNet(ProviderType.ORIGINAL, "n.ns.ovn", S2)
    ipam_net = PodNet(ProviderType.IPAM, "mv.ns", UNDERLAY)
    allocated = {
        "ovn.kubernetes.io/allocated": "true",
        "n.ns.ovn.kubernetes.io/allocated": "true",
        "mv.ns.kubernetes.io/allocated": "true",
    }
    nets = [attach_net, default_net, ipam_net]
    ports = {"p.default", "p.default.n.ns.ovn"}
    the_pod = pod("p", annotations=allocated, node_name="n1")
    got = pl.inspect_pod(the_pod, nets, ports.__contains__, NOW, keep_vm_ip=False)
    assert got == pl.InspectResult((), needs_update=True)
    routed = pod("p", annotations={**allocated, "ovn.kubernetes.io/routed": "true"}, node_name="n1")
    assert pl.inspect_pod(routed, nets, ports.__contains__, NOW, keep_vm_ip=False) == (
        pl.InspectResult()
    )
    lost = pl.inspect_pod(the_pod, nets, {"p.default"}.__contains__, NOW, keep_vm_ip=False)
    assert lost == pl.InspectResult(("n.ns.ovn",), needs_update=False)
    unscheduled = pod("p", annotations=allocated)
    assert not pl.inspect_pod(
        unscheduled, nets, ports.__contains__, NOW, keep_vm_ip=False
    ).needs_update
    dead = pod("p", annotations=allocated, phase="Failed", restart_policy="Never")
    assert pl.inspect_pod(dead, nets, set().__contains__, NOW, keep_vm_ip=False) == (
        pl.InspectResult()
    )


# --- with the real in-memory IPAM ------------------------------------------------------------


def real_ipam(*subnets: Subnet) -> IPAM:
    ipam = IPAM()
    for s in subnets:
        ipam.add_or_update_subnet(s.name, s.cidr_block, [s.gateway])
    return ipam


def test_real_ipam_random_skips_node_ips() -> None:
    ipam = real_ipam(DEFAULT)
    nodes = [node("n1", "10.16.0.2")]
    req = AddressRequest(AddressMode.RANDOM, "ns/p", (DEFAULT,))
    v4, v6, mac, sub = pl.acquire_address(ipam, req, nodes)
    assert (v4, v6, sub.name) == ("10.16.0.3", "", "ovn-default")
    assert mac.startswith("00:00:00:")
    assert not ipam.contain_address("10.16.0.2")  # the skipped address was given back


def test_real_ipam_static_falls_through_to_the_matching_subnet() -> None:
    ipam = real_ipam(DEFAULT, S2)
    req = AddressRequest(AddressMode.STATIC, "ns/p", (DEFAULT, S2), ("10.18.0.9",))
    assert pl.acquire_address(ipam, req, [])[0::3] == ("10.18.0.9", S2)
    other = AddressRequest(AddressMode.STATIC, "ns/q", (DEFAULT, S2), ("10.18.0.9",))
    with pytest.raises(ipam_errors.AddressConflictError):
        pl.acquire_address(ipam, other, [])


def test_real_ipam_pool_exhausted_is_no_available() -> None:
    ipam = real_ipam(DEFAULT)
    ipam.get_static_address("ns/other", "10.16.0.7", "", "ovn-default")
    pool = AddressRequest(
        AddressMode.POOL, "ns/p", (DEFAULT,), ("10.16.0.7", "10.16.0.8"), check_assigned=True
    )
    assert pl.acquire_address(ipam, pool, [])[0] == "10.16.0.8"
    taken = AddressRequest(
        AddressMode.POOL, "ns/q", (DEFAULT,), ("10.16.0.7", "10.16.0.8"), "", True
    )
    with pytest.raises(ipam_errors.NoAvailableError, match="NoAvailableAddress"):
        pl.acquire_address(ipam, taken, [])
