"""Benchmark of controller.ipam against naive baselines measured in the same run.

Scenarios (sizes in brackets are the --quick ones):

1. empty subnet: memory of a freshly registered /24, /16 and IPv6 /64;
2. fill + drain: allocate every host of a /16 [/20] with get_random_address, then release all
   of them in random order;
3. churn: with half of a /16 [/20] allocated, release a random key and allocate a new one;
4. restart: rebuild state for 50,000 [3,000] existing pods (the controller's InitIPAM path:
   one add_or_update_subnet, then get_static_address per pod with its IP and MAC).

Baselines:

* ``set``: the free addresses as a Python set of ints (one object per address), plus the same
  key <-> address dicts and the same string parsing/formatting at the edge; no lock, no MACs.
* ``IPSet``: netaddr.IPSet as the free list (range-based but re-normalises CIDRs on every
  change); only run on the first --ipset-ops operations of scenario 2 because it is slow.

Time is wall-clock per operation (best of --repeat runs); memory is what tracemalloc sees
allocated (retained at the end, and the peak), measured in a separate run so tracing does not
distort the timings. Usage: ``python bench/ipam.py [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import harness  # noqa: F401 - puts the repository root on sys.path
import netaddr
from netaddr.strategy import ipv4

from controller.ipam import IPAM

MiB = 1024 * 1024


# -- baselines -------------------------------------------------------------------------------


class SetIPAM:
    """Naive single-subnet IPv4 allocator: one int per free address in a set."""

    def __init__(self, cidr: str) -> None:
        net = netaddr.IPNetwork(cidr)
        self.free: set[int] = set(range(net.first + 1, net.last))
        self.pod_to_ip: dict[str, int] = {}
        self.ip_to_pod: dict[int, str] = {}

    def get_random_address(self, pod: str) -> str:
        ip = self.pod_to_ip.get(pod)
        if ip is None:
            ip = self.free.pop()
            self.pod_to_ip[pod] = ip
            self.ip_to_pod[ip] = pod
        text: str = ipv4.int_to_str(ip)
        return text

    def get_static_address(self, pod: str, text: str) -> str:
        ip = ipv4.str_to_int(text)
        owner = self.ip_to_pod.get(ip)
        if owner is not None and owner != pod:
            raise ValueError("conflict")
        self.free.discard(ip)
        self.pod_to_ip[pod] = ip
        self.ip_to_pod[ip] = pod
        return text

    def release(self, pod: str) -> None:
        ip = self.pod_to_ip.pop(pod, None)
        if ip is not None:
            del self.ip_to_pod[ip]
            self.free.add(ip)


class IPSetIPAM:
    """Naive allocator over netaddr.IPSet (lowest address first)."""

    def __init__(self, cidr: str) -> None:
        net = netaddr.IPNetwork(cidr)
        self.free = netaddr.IPSet(netaddr.IPRange(net.first + 1, net.last - 1))
        self.pod_to_ip: dict[str, int] = {}

    def get_random_address(self, pod: str) -> str:
        ip = self.pod_to_ip.get(pod)
        if ip is None:
            first = next(iter(self.free.iter_cidrs()))[0]
            self.free.remove(first)
            ip = int(first)
            self.pod_to_ip[pod] = ip
        text: str = ipv4.int_to_str(ip)
        return text

    def release(self, pod: str) -> None:
        ip = self.pod_to_ip.pop(pod, None)
        if ip is not None:
            self.free.add(ip)


# -- measurement -----------------------------------------------------------------------------

# A scenario run returns what it built (kept alive for the memory figure) and, per timed phase,
# (operations, seconds); untimed set-up such as a churn prefill is left out of the phases.
Phases = dict[str, tuple[int, float]]
Scenario = Callable[[], tuple[object, Phases]]


@dataclass
class Row:
    scenario: str
    impl: str
    ops: int
    us_per_op: float
    retained_mib: float
    peak_mib: float


def clock() -> float:
    return time.perf_counter()


def traced(fn: Scenario) -> tuple[float, float]:
    gc.collect()
    tracemalloc.start()
    keep = fn()  # kept alive so the retained size includes what the scenario built
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del keep
    return current / MiB, peak / MiB


def measure(scenario: str, impl: str, fn: Scenario, repeat: int) -> list[Row]:
    best: dict[str, tuple[int, float]] = {}
    for _ in range(repeat):
        gc.collect()
        _, phases = fn()
        for phase, (ops, seconds) in phases.items():
            if phase not in best or seconds < best[phase][1]:
                best[phase] = (ops, seconds)
    retained, peak = traced(fn)
    return [
        Row(f"{scenario} {phase}".strip(), impl, ops, seconds / ops * 1e6, retained, peak)
        for phase, (ops, seconds) in best.items()
    ]


# -- scenarios -------------------------------------------------------------------------------


def hosts_of(cidr: str) -> int:
    return int(netaddr.IPNetwork(cidr).size) - 2


def fill_drain(
    make: Callable[[], tuple[object, Callable[[str], object], Callable[[str], None]]], count: int
) -> Scenario:
    def run() -> tuple[object, Phases]:
        state, allocate, release = make()
        pods = [f"ns/p{i}" for i in range(count)]
        start = clock()
        for pod in pods:
            allocate(pod)
        filled = clock()
        random.Random(2).shuffle(pods)
        drain_start = clock()
        for pod in pods:
            release(pod)
        end = clock()
        return state, {"fill": (count, filled - start), "drain": (count, end - drain_start)}

    return run


def churn(
    make: Callable[[], tuple[object, Callable[[str], object], Callable[[str], None]]],
    prefill: int,
    rounds: int,
) -> Scenario:
    def run() -> tuple[object, Phases]:
        state, allocate, release = make()
        live = [f"ns/p{i}" for i in range(prefill)]
        for pod in live:
            allocate(pod)
        rng = random.Random(3)
        victims = [rng.randrange(prefill) for _ in range(rounds)]
        start = clock()
        for n, index in enumerate(victims):
            release(live[index])
            live[index] = f"ns/new{n}"
            allocate(live[index])
        return state, {"": (rounds, clock() - start)}

    return run


def ours(cidr: str) -> tuple[object, Callable[[str], object], Callable[[str], None]]:
    im = IPAM(rng=random.Random(1))
    im.add_or_update_subnet("s", cidr, None)
    return im, (lambda pod: im.get_random_address(pod, "s")), im.release_address_by_pod


def naive_set(cidr: str) -> tuple[object, Callable[[str], object], Callable[[str], None]]:
    naive = SetIPAM(cidr)
    return naive, naive.get_random_address, naive.release


def naive_ipset(cidr: str) -> tuple[object, Callable[[str], object], Callable[[str], None]]:
    naive = IPSetIPAM(cidr)
    return naive, naive.get_random_address, naive.release


def restart_inputs(cidr: str, pods: int) -> list[tuple[str, str, str]]:
    net = netaddr.IPNetwork(cidr)
    rng = random.Random(4)
    chosen = rng.sample(range(net.first + 2, net.last), pods)
    return [
        (
            f"ns{i % 50}/pod-{i}",
            ipv4.int_to_str(ip),
            f"00:00:00:{i >> 16 & 0xFF:02X}:{i >> 8 & 0xFF:02X}:{i & 0xFF:02X}",
        )
        for i, ip in enumerate(chosen)
    ]


def restart_ours(cidr: str, inputs: list[tuple[str, str, str]]) -> Scenario:
    gateway = str(netaddr.IPNetwork(cidr).network + 1)

    def run() -> tuple[object, Phases]:
        start = clock()
        im = IPAM()
        im.add_or_update_subnet("s", cidr, [gateway])
        for pod, ip, mac in inputs:
            im.get_static_address(pod, ip, mac, "s")
        return im, {"": (len(inputs), clock() - start)}

    return run


def restart_set(cidr: str, inputs: list[tuple[str, str, str]]) -> Scenario:
    def run() -> tuple[object, Phases]:
        start = clock()
        naive = SetIPAM(cidr)
        for pod, ip, _ in inputs:
            naive.get_static_address(pod, ip)
        return naive, {"": (len(inputs), clock() - start)}

    return run


def build(make: Callable[[], object]) -> Scenario:
    def run() -> tuple[object, Phases]:
        start = clock()
        built = make()
        return built, {"": (1, clock() - start)}

    return run


def empty_subnet_rows(repeat: int) -> list[Row]:
    rows: list[Row] = []
    for cidr in ("10.16.0.0/24", "10.16.0.0/16", "fd00:1::/64"):

        def make_ours(cidr: str = cidr) -> object:
            im = IPAM()
            im.add_or_update_subnet("s", cidr, None)
            return im

        label = f"empty {cidr}"
        rows += measure(label, "ours", build(make_ours), repeat)
        if ":" in cidr:
            rows.append(Row(label, "set", 1, float("nan"), float("nan"), float("nan")))
        else:
            rows += measure(label, "set", build(functools.partial(SetIPAM, cidr)), repeat)
        rows += measure(label, "IPSet", build(functools.partial(netaddr.IPSet, [cidr])), repeat)
    return rows


def print_rows(rows: list[Row]) -> None:
    print(
        f"{'scenario':<36}{'impl':<7}{'ops':>8}{'us/op':>10}{'retained MiB':>14}"
        f"{'peak MiB':>10}{'time x':>8}{'mem x':>8}"
    )
    ours_by_scenario = {r.scenario: r for r in rows if r.impl == "ours"}
    for row in rows:
        ref = ours_by_scenario.get(row.scenario)
        time_ratio = row.us_per_op / ref.us_per_op if ref and ref.us_per_op else float("nan")
        mem_ratio = row.peak_mib / ref.peak_mib if ref and ref.peak_mib else float("nan")
        us = "n/a" if row.us_per_op != row.us_per_op else f"{row.us_per_op:.2f}"
        print(
            f"{row.scenario:<36}{row.impl:<7}{row.ops:>8}{us:>10}"
            f"{row.retained_mib:>14.3f}{row.peak_mib:>10.3f}{time_ratio:>8.2f}{mem_ratio:>8.2f}"
        )
    print(
        "time x / mem x: the row's time per op and peak memory divided by ours (above 1: ours "
        "is faster / smaller).\nn/a: a set of 2^64 ints cannot be built. Memory is for the "
        "whole scenario (peak) and what it leaves allocated (retained)."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per measurement")
    parser.add_argument("--ipset-ops", type=int, default=None, help="IPSet operations to time")
    args = parser.parse_args(argv)
    cidr = "10.16.0.0/20" if args.quick else "10.16.0.0/16"
    pods = 3_000 if args.quick else 50_000
    rounds = 2_000 if args.quick else 20_000
    repeat = args.repeat or (1 if args.quick else 3)
    ipset_ops = args.ipset_ops or (400 if args.quick else 4_000)
    hosts = hosts_of(cidr)
    print(
        f"python {sys.version.split()[0]}, netaddr {netaddr.__version__}, "
        f"{'quick' if args.quick else 'full'} run, best of {repeat}"
    )

    rows = empty_subnet_rows(repeat)
    label = f"fill+drain {cidr}"
    rows += measure(label, "ours", fill_drain(lambda: ours(cidr), hosts), repeat)
    rows += measure(label, "set", fill_drain(lambda: naive_set(cidr), hosts), repeat)
    rows += measure(label, "IPSet", fill_drain(lambda: naive_ipset(cidr), ipset_ops), 1)

    label = f"churn {cidr} half full"
    rows += measure(label, "ours", churn(lambda: ours(cidr), hosts // 2, rounds), repeat)
    rows += measure(label, "set", churn(lambda: naive_set(cidr), hosts // 2, rounds), repeat)

    label = f"restart {pods} pods {cidr}"
    inputs = restart_inputs(cidr, pods)
    rows += measure(label, "ours", restart_ours(cidr, inputs), repeat)
    rows += measure(label, "set", restart_set(cidr, inputs), repeat)
    print_rows(rows)
    print(
        "churn: one op = release a random key + allocate a new one. IPSet only runs the first "
        f"{ipset_ops} fill/drain operations (it is too slow for more)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
