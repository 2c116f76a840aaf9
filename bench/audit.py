"""Benchmark of controller.audit.audit.audit() on a clean synthetic cluster, beside a baseline.

The cluster has N routed pods on one /16 (each with its annotations, IP CR, LSP and src-ip
route, as the controller leaves them) and one node. The baseline, measured in the same run, is
the IPAM rebuild alone (one add_or_update_subnet plus one get_static_address per pod: what
kube-ovn's InitIPAM costs), which audit() also performs; the ratio shows what the other checks
add on top. Sizes: 10,000 pods [--quick: 1,000]; time is wall-clock, best of --repeat runs.
Usage: ``python bench/audit.py [--quick]``.
"""

from __future__ import annotations

import argparse

import harness

from controller.audit.audit import ClusterSnapshot, audit
from controller.config import Config
from controller.ipam import IPAM
from tests.audit.helpers import DEFAULT, JOIN, Cluster, mac


def build(pods: int) -> ClusterSnapshot:
    c = Cluster()
    c.add_subnet(DEFAULT)
    c.add_subnet(JOIN)
    c.add_node("n1", "100.64.0.2", mac(1))
    for i in range(pods):
        ip = f"10.16.{(i + 2) // 256}.{(i + 2) % 256}"
        c.add_pod(f"p{i}", ip, f"00:00:00:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}")
    return c.snapshot()


def ipam_rebuild(snapshot: ClusterSnapshot) -> None:
    ipam = IPAM()
    ipam.add_or_update_subnet(DEFAULT.name, DEFAULT.cidr_block, DEFAULT.exclude_ips)
    for pod in snapshot.pods:
        a = pod.annotations
        ipam.get_static_address(
            pod.key,
            a["ovn.kubernetes.io/ip_address"],
            a["ovn.kubernetes.io/mac_address"],
            DEFAULT.name,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--repeat", type=int, default=0)
    args = parser.parse_args()
    pods = 1_000 if args.quick else 10_000
    repeat = args.repeat or (1 if args.quick else 3)
    snapshot = build(pods)
    report = audit(snapshot, Config())
    if not report.settled:
        print(report.render())
        return 1
    base = harness.best_of(lambda: ipam_rebuild(snapshot), repeat)
    full = harness.best_of(lambda: audit(snapshot, Config()), repeat)
    print(f"pods: {pods}")
    print(f"IPAM rebuild (baseline): {base:.3f} s  {base / pods * 1e6:.1f} us/pod")
    print(f"audit():                 {full:.3f} s  {full / pods * 1e6:.1f} us/pod")
    print(f"ratio audit / baseline:  {full / base:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
