"""NB work per pod for the two ways of routing a pod: kube-ovn v1.8's per-pod src-ip static route
(the baseline, what this controller wrote until now) and the router policies + per-node address
sets it writes now (`controller.core.router_policy`).

Run from the repo root: `python bench/routing.py [--quick] [--existing 0,20000] [--pods 500]`.

For each number E of pods already routed (default 0 and 20,000, spread over 10 nodes), a fresh
throwaway ovsdb-server per scheme is seeded with E pods' routing rows (one big raw transaction
for the static routes, one add per node set for the policies), then `--pods` more pods are
routed and deleted one by one through `OvsdbappNbClient`, with the calls the pod handlers make:

* v1.8: add = add_static_route + update_nat_rule x2 (the EIP/SNAT clean-up of a plain pod);
  delete = delete_static_route + delete_nat_rule;
* policies (the per-event writes of the pod handlers before the routing reconciler): add =
  add_router_policy x3 (the subnet's and the join's allow, the node's reroute: free once they
  exist) + add_address_set_addresses + update_nat_rule x2 + delete_static_route(src-ip) (the
  migration step: free when there is none); delete = delete_static_route + delete_nat_rule +
  remove_address_set_addresses + delete_router_policy (the pod's own policy: free when it has
  none);
* reconciler (`controller.routing.RoutingReconciler` over a `CacheView` of the pods, nodes and
  subnets, as the pod handlers call it): add = `route_pod` (the pod's rows, one `apply_routing`
  transaction); delete = the pod leaves the cache, then `release_pod` (its rows no live pod
  claims, one transaction). The keys they queue are settled by the reconciler's workers, off
  the pod's path (a queue coalesces a burst's events per key); not timed here.

Printed per case: NB transactions per pod add / delete (the client's own count: a verb with
nothing to change sends none), ms per add / delete (median of 3 runs), the rows the cluster
router carries at the end (static routes; policies; address-set entries), and the ratios
policies / v1.8 from the same run. The machine may be shared: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.cache import Indexer
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.model import Pod
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.routing import RoutingReconciler
from controller.sandbox.ovn.ovsdb import NbServer
from controller.testing import builders
from controller.view import IP_INDEX, NODE_INDEX, CacheView, ip_index, node_index

ROUTER = "ovn-cluster"
SWITCH = "ovn-default"
JOIN = "join"
NODES = 10
RUNS = 3


def pod_ip(i: int) -> str:
    return f"10.{16 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}"


def node_of(i: int) -> tuple[str, str]:
    n = i % NODES
    return f"node{n}", f"100.64.0.{n + 2}"


def topology(client: OvsdbappNbClient) -> None:
    client.ensure_logical_router(ROUTER)
    client.ensure_logical_switch(JOIN, ROUTER, "100.64.0.0/16", "100.64.0.1", {})
    client.ensure_logical_switch(SWITCH, ROUTER, "10.16.0.0/12", "10.16.0.1", {})


def seed_routes(
    remote: str,
    existing: range,
    ip_of: Callable[[int], str] = pod_ip,
    hop_of: Callable[[int], str] = lambda i: node_of(i)[1],
) -> None:
    """E src-ip routes as v1.8 left them, in raw transactions of 500 rows (ovsdb-client: one
    argument per transaction, and the kernel caps one argument at 128 KiB)."""
    for k in range(existing.start, existing.stop, 500):
        ops: list[object] = []
        names = []
        for i in range(k, min(k + 500, existing.stop)):
            name = f"r{i}"
            names.append(["named-uuid", name])
            row = {"ip_prefix": ip_of(i), "nexthop": hop_of(i), "policy": "src-ip"}
            ops.append(
                {
                    "op": "insert",
                    "table": "Logical_Router_Static_Route",
                    "row": row,
                    "uuid-name": name,
                }
            )
        ops.append(
            {
                "op": "mutate",
                "table": "Logical_Router",
                "where": [["name", "==", ROUTER]],
                "mutations": [["static_routes", "insert", ["set", names]]],
            }
        )
        subprocess.run(
            ["ovsdb-client", "transact", remote, json.dumps(["OVN_Northbound", *ops])],
            check=True,
            capture_output=True,
        )


def seed_policies(client: OvsdbappNbClient, existing: range) -> None:
    by_node: dict[str, list[str]] = {}
    for i in existing:
        by_node.setdefault(node_of(i)[0], []).append(pod_ip(i))
    allow(client)
    for node, ips in by_node.items():
        name = rp.set_name(SWITCH, node, 4)
        ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=SWITCH, node=node)
        client.add_address_set_addresses(name, ips, ids)
        hop = node_of(int(node[4:]))[1]
        client.add_router_policy(
            ROUTER, rp.GATEWAY_PRIORITY, rp.src_set_match(name, 4), "reroute", [hop], ids
        )


def allow(client: OvsdbappNbClient) -> None:
    for subnet, cidr in ((SWITCH, "10.16.0.0/12"), (JOIN, "100.64.0.0/16")):
        ids = rp.ids(rp.KIND_SUBNET, 4, subnet=subnet)
        client.add_router_policy(ROUTER, rp.SUBNET_PRIORITY, rp.dst_match(cidr), "allow", (), ids)


def add_v18(client: OvsdbappNbClient, i: int) -> None:
    ip = pod_ip(i)
    client.add_static_route("src-ip", ip, node_of(i)[1], ROUTER)
    client.update_nat_rule("dnat_and_snat", ip, "", ROUTER)
    client.update_nat_rule("snat", ip, "", ROUTER)


def delete_v18(client: OvsdbappNbClient, i: int) -> None:
    ip = pod_ip(i)
    client.delete_static_route(ip, ROUTER)
    client.delete_nat_rule(ip, ROUTER)


def add_policies(client: OvsdbappNbClient, i: int) -> None:
    ip = pod_ip(i)
    node, hop = node_of(i)
    name = rp.set_name(SWITCH, node, 4)
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=SWITCH, node=node)
    allow(client)
    client.add_router_policy(
        ROUTER, rp.GATEWAY_PRIORITY, rp.src_set_match(name, 4), "reroute", [hop], ids
    )
    client.add_address_set_addresses(name, [ip], ids)
    client.update_nat_rule("dnat_and_snat", ip, "", ROUTER)
    client.update_nat_rule("snat", ip, "", ROUTER)
    client.delete_static_route(ip, ROUTER, "src-ip")


def delete_policies(client: OvsdbappNbClient, i: int) -> None:
    ip = pod_ip(i)
    node, _ = node_of(i)
    client.delete_static_route(ip, ROUTER)
    client.delete_nat_rule(ip, ROUTER)
    client.remove_address_set_addresses(rp.set_name(SWITCH, node, 4), [ip])
    client.delete_router_policy(ROUTER, rp.POD_PRIORITY, rp.src_match(ip))


class Reconciled:
    """The reconciler's per-pod calls over caches holding the pods (seeded ones included)."""

    def __init__(self) -> None:
        self.pods = Indexer(indexers={NODE_INDEX: node_index, IP_INDEX: ip_index})
        self.nodes = Indexer()
        self.subnets = Indexer()
        for n in range(NODES):
            name, hop = node_of(n)
            raw = builders.node(
                name, f"172.18.0.{n + 2}", annotations={"ovn.kubernetes.io/ip_address": hop}
            )
            raw["metadata"]["resourceVersion"] = "1"  # informer objects have one (parsed once)
            self.nodes.add(raw)
        for name, cidr, gw in (
            (SWITCH, "10.16.0.0/12", "10.16.0.1"),
            (JOIN, "100.64.0.0/16", "100.64.0.1"),
        ):
            self.subnets.add(builders.subnet(name, cidr, gateway=gw, resource_version="1"))
        self.view = CacheView(kube=None, pods=self.pods, nodes=self.nodes, subnets=self.subnets)
        self.reconciler: RoutingReconciler | None = None

    def start(self, client: OvsdbappNbClient) -> None:
        self.reconciler = RoutingReconciler(
            config=Config(cluster_router=ROUTER, node_switch=JOIN, default_logical_switch=SWITCH),
            view=self.view,
            kube=None,  # type: ignore[arg-type]
            nb=client,
            queue=RateLimitingQueue[str](default_controller_rate_limiter(), name="routing"),
            is_leader=lambda: True,
        )

    def raw(self, i: int) -> dict[str, object]:
        return builders.pod(
            f"p{i}",
            "default",
            annotations=builders.allocated(pod_ip(i), "00:00:00:00:00:01", SWITCH),
            node=node_of(i)[0],
            phase="Running",
            resource_version=str(i + 1),
        )

    def seed(self, existing: range) -> None:
        for i in existing:
            self.pods.add(self.raw(i))

    def add(self, client: OvsdbappNbClient, i: int) -> None:
        assert self.reconciler is not None
        raw = self.raw(i)
        self.pods.add(raw)
        self.reconciler.route_pod(Pod.from_dict(raw))

    def delete(self, client: OvsdbappNbClient, i: int) -> None:
        assert self.reconciler is not None
        raw = self.pods.get_by_key(f"default/p{i}")
        self.pods.delete(raw)
        self.reconciler.release_pod(Pod.from_dict(raw), SWITCH, pod_ip(i))


SCHEMES: dict[str, tuple[Callable[[OvsdbappNbClient, int], None], ...]] = {
    "v1.8 src-ip routes": (add_v18, delete_v18),
    "policies + sets": (add_policies, delete_policies),
    "reconciler": (),
}


def run_case(scheme: str, existing: int, pods: int, workdir: Path) -> dict[str, float]:
    reconciled = Reconciled() if scheme == "reconciler" else None
    add: Callable[[OvsdbappNbClient, int], None]
    delete: Callable[[OvsdbappNbClient, int], None]
    if reconciled is not None:
        add, delete = reconciled.add, reconciled.delete
    else:
        add, delete = SCHEMES[scheme]
    calls: Counter[str] = Counter()
    nb = NbServer(workdir / f"nb-{existing}-{scheme[:2]}").start()
    try:
        client = OvsdbappNbClient.from_addr(
            nb.remote, timeout=120.0, on_request=lambda m, _t, _ok: calls.update([m])
        )
        try:
            topology(client)
            seeded = range(pods, pods + existing)
            if scheme.startswith("v1.8"):
                client.close()
                seed_routes(nb.remote, seeded)
                client = OvsdbappNbClient.from_addr(
                    nb.remote, timeout=120.0, on_request=lambda m, _t, _ok: calls.update([m])
                )
            else:
                seed_policies(client, seeded)
            if reconciled is not None:
                reconciled.seed(seeded)
                reconciled.start(client)
                allow(client)
            add(client, 0)  # the node's policy and the allows exist, as in a running cluster
            delete(client, 0)
            adds, deletes = [], []
            add_txns = delete_txns = 0
            for _ in range(RUNS):
                calls.clear()
                t0 = time.perf_counter()
                for i in range(1, pods):
                    add(client, i)
                adds.append((time.perf_counter() - t0) / (pods - 1))
                add_txns = sum(calls.values())
                calls.clear()
                t0 = time.perf_counter()
                for i in range(1, pods):
                    delete(client, i)
                deletes.append((time.perf_counter() - t0) / (pods - 1))
                delete_txns = sum(calls.values())
            for i in range(1, pods):  # leave the pods routed to count the rows
                add(client, i)
            routes = len(client.list_static_routes(ROUTER))
            policies = len(client.list_router_policies(ROUTER))
            entries = sum(len(a.addresses) for a in client.list_address_sets({}))
        finally:
            client.close()
    finally:
        nb.stop()
    return {
        "txns/add": add_txns / (pods - 1),
        "txns/delete": delete_txns / (pods - 1),
        "ms/add": 1000 * statistics.median(adds),
        "ms/delete": 1000 * statistics.median(deletes),
        "static routes": routes,
        "policies": policies,
        "set entries": entries,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="0 and 2,000 existing, 100 pods")
    p.add_argument("--existing", default="0,20000", help="comma list of pods already routed")
    p.add_argument("--pods", type=int, default=500, help="pods added and deleted per run")
    args = p.parse_args()
    try:
        existing = [int(x) for x in args.existing.split(",") if x.strip()]
    except ValueError:
        p.error(f"--existing: not a comma list of integers: {args.existing!r}")
    pods = args.pods
    if args.quick:
        existing, pods = [0, 2000], 100
    if pods < 2 or any(e < 0 for e in existing):
        p.error("--pods must be >= 2 and --existing >= 0")
    with tempfile.TemporaryDirectory(prefix="bench-routing") as d:
        for e in existing:
            results = {s: run_case(s, e, pods, Path(d)) for s in SCHEMES}
            base, old = results["v1.8 src-ip routes"], results["policies + sets"]
            new = results["reconciler"]
            print(f"\n== {e} pods already routed on {NODES} nodes; {pods} pods added, then deleted")
            print(
                f"{'':18}{'v1.8 src-ip routes':>20}{'policies + sets':>18}{'reconciler':>12}"
                f"{'rec/pol':>9}"
            )
            for key in base:
                ratio = f"{new[key] / old[key]:.2f}" if old[key] else "-"
                print(f"{key:18}{base[key]:20.2f}{old[key]:18.2f}{new[key]:12.2f}{ratio:>9}")


if __name__ == "__main__":
    main()
