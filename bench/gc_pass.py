"""Garbage-collection pass cost: `GarbageCollector.run_once` over N live pods and N/10 orphans.

Usage: python bench/gc_pass.py [--quick] [--pods N]

What is measured (one run, same machine, same in-memory stand-ins):

* baseline: the reading floor of a pass: list the N + N/10 ports and routes and convert every
  cached pod with `Pod.from_dict` (what any collector must at least do);
* mark pass: the first `run_once` (every orphan seen for the first time, nothing deleted);
* sweep pass: the second `run_once`, deleting the N/10 orphans with their IP CRs, addresses,
  routes and NAT;
* steady pass: `run_once` with nothing left to delete (best of 3).

The NB port is `DictNb` below (O(1) dict rows; `FakeNbClient` deep-copies its state on every
write) and the API server `FakeKubeApi`, so the figures are the collector's own overhead. kube-ovn
runs this every 6 minutes (--gc-interval 360 s), so anything well under a second at 10k pods is
negligible.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import cast

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.cache import Indexer
from controller.config import Config
from controller.controllers.gc import GarbageCollector
from controller.core.model import Pod
from controller.ipam import IPAM
from controller.ovn.api import (
    AddressSetInfo,
    NatRule,
    NbClient,
    PortInfo,
    RouterPolicy,
    StaticRoute,
)
from controller.testing.fake_kube import FakeKubeApi

LR, LS = "ovn-cluster", "ovn-default"


class DictNb:
    """The NB verbs the collector uses, as dict operations."""

    def __init__(self) -> None:
        self.ports: dict[str, PortInfo] = {}
        self.routes: dict[str, StaticRoute] = {}
        self.nats: dict[str, NatRule] = {}

    def list_ports(self, vendor: str = "kube-ovn") -> list[PortInfo]:
        return list(self.ports.values())

    def delete_port(self, name: str) -> None:
        self.ports.pop(name, None)

    def list_static_routes(self, router: str) -> list[StaticRoute]:
        return list(self.routes.values())

    def delete_static_route(self, cidr: str, router: str, policy: str = "") -> None:
        self.routes.pop(cidr, None)

    def list_router_policies(self, router: str) -> list[RouterPolicy]:
        return []  # the routing rows' sweep is measured by its tests, not here

    def list_address_sets(self, external_ids: Mapping[str, str]) -> list[AddressSetInfo]:
        return []

    def list_nat_rules(self, router: str) -> list[NatRule]:
        return list(self.nats.values())

    def delete_nat_rule(self, logical_ip: str, router: str) -> None:
        self.nats.pop(logical_ip, None)


def _ip(i: int) -> str:
    return f"10.{16 + i // 65000}.{(i % 65000) // 250}.{i % 250 + 2}"


def _mac(i: int) -> str:
    return f"00:00:{i >> 24 & 255:02x}:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}"


def build(n: int) -> tuple[GarbageCollector, DictNb, Indexer, int]:
    orphans = max(1, n // 10)
    kube, nb, ipam = FakeKubeApi(), DictNb(), IPAM()
    ipam.add_or_update_subnet(LS, "10.16.0.0/12", ["10.16.0.1"])
    pods, ips = Indexer(), Indexer()
    for i in range(n + orphans):
        name, ip, mac = f"pod-{i}", _ip(i), _mac(i)
        key, port = f"default/{name}", f"{name}.default"
        ipam.get_static_address(key, ip, mac, LS)
        nb.ports[port] = PortInfo(
            port, LS, (f"{mac} {ip}",), external_ids={"vendor": "kube-ovn", "pod": key}
        )
        nb.routes[ip] = StaticRoute(LR, ip, "100.64.0.2", "src-ip")
        nb.nats[ip] = NatRule(LR, "snat", "172.18.0.100", ip)
        spec = {"podName": name, "namespace": "default", "subnet": LS, "ipAddress": ip}
        ips.add({"metadata": {"name": port}, "spec": spec})
        if i < n:
            annotations = {
                "ovn.kubernetes.io/allocated": "true",
                "ovn.kubernetes.io/ip_address": ip,
                "ovn.kubernetes.io/logical_switch": LS,
            }
            pods.add(
                {
                    "metadata": {"name": name, "namespace": "default", "annotations": annotations},
                    "spec": {"nodeName": "n1"},
                    "status": {"phase": "Running"},
                }
            )
    gc = GarbageCollector(
        config=dataclasses.replace(Config()),
        pods=pods,
        nodes=Indexer(),
        ips=ips,
        subnets=Indexer(),
        statefulsets=Indexer(),
        vms=Indexer(),
        kube=kube,
        nb=cast(NbClient, nb),
        ipam=ipam,
    )
    return gc, nb, pods, orphans


def baseline(nb: DictNb, pods: Indexer) -> float:
    start = time.perf_counter()
    nb.list_ports()
    nb.list_static_routes(LR)
    for raw in pods.list():
        Pod.from_dict(raw)
    return time.perf_counter() - start


def timed_pass(gc: GarbageCollector) -> float:
    start = time.perf_counter()
    gc.run_once()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--pods", type=int, default=0)
    args = parser.parse_args()
    n = args.pods or (1000 if args.quick else 10000)
    logging.basicConfig(level=logging.ERROR)
    gc, nb, pods, orphans = build(n)
    base = baseline(nb, pods)
    mark = timed_pass(gc)
    before = len(nb.ports)
    sweep = timed_pass(gc)
    deleted = before - len(nb.ports)
    steady = min(timed_pass(gc) for _ in range(3))
    assert deleted == orphans, (deleted, orphans)
    print(f"pods={n} orphans={orphans}")
    print(f"baseline (list + Pod.from_dict): {base * 1000:8.1f} ms")
    for label, value in (("mark pass", mark), ("sweep pass", sweep), ("steady pass", steady)):
        print(f"{label:32s} {value * 1000:8.1f} ms  ({value / base:5.1f}x baseline)")


if __name__ == "__main__":
    main()
