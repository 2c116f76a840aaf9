"""What the full pass over the node policy keys (`/<node>`) costs as the node count grows.

Run from the repo root: `python bench/node_policy_pass.py [--nodes 50,200,500] [--repeat 3]`.

Per N: a throwaway ovsdb-server, N Ready nodes (one InternalIP and one join address each) in a
node cache carrying the node informer's `NODE_IP_INDEX`, and a cluster router holding what a
converged cluster of N nodes has: each node's priority-30000 policy plus one subnet reroute per
node (the default subnet's node keys). Nothing is left to change, so every figure is the cost of
proving it, through `OvsdbappNbClient` as the controller runs it:

* before: the earlier form of a key, kept here to compare: each key computes the owner of
  every InternalIP of every node (`pod_logic.node_policies.internal_ip_owners`) and reads the
  router's policies and static routes itself; the pass runs it for every node;
* pass: the reconciler's `/` key (`controller.routing.node_policies`): one read of the router
  shared by the keys, owners looked up per address in the node cache;
* event key: one `/<node>` key as a node event queues it (a fresh read of the router, owners
  from the index), run for every node.

Printed per N: ms per full pass (median of `--repeat`) and per key (pass / N), and the ratio
before / pass of the same run. The machine may be shared: compare the ratios, not absolutes.

Then the subnet node keys (`<subnet>/<node>`), on a grid of S subnets x N nodes (`--grid`):
S distributed subnets, N Ready nodes, one running pod per (subnet, node), converged, so every
figure is again the cost of proving it:

* per key: what the periodic pass queued before it had a key of its own: every subnet key,
  then each node key as an event queues it (its own read of the router), for every pair;
* before: the earlier form of the `ALL_SUBNETS` key, kept here to compare: a read of the
  subnet names, every subnet key with its own read of the router, then one read shared by the
  node keys (S + 2 reads of the policies);
* pass: the reconciler's `ALL_SUBNETS` key: one read of the router
  (`controller.routing.node_key_rows`) shared by the subnet keys and the node keys.

Printed per grid point: keys (S x N), the router's policies, ms per pass of each form (median
of `--repeat`), the ratio before / pass, and ms per node key of the per-key form and the pass.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.cache import Indexer
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.ovn.api import RouterPolicy, RoutingChange
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod_logic import node_policies as node_rows
from controller.pod_logic import routing_state as rs
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.routing import RoutingReconciler
from controller.routing.node_key_rows import NodeKeyRows
from controller.routing.node_policies import ALL_NODE_POLICIES
from controller.routing.reconciler import ALL_SUBNETS
from controller.sandbox.ovn.ovsdb import NbServer
from controller.testing import builders
from controller.view import (
    IP_INDEX,
    NODE_INDEX,
    NODE_IP_INDEX,
    CacheView,
    ip_index,
    node_index,
    node_ip_index,
)

ROUTER = "ovn-cluster"
SUBNET = "ovn-default"
JOIN = "join"


def node_name(i: int) -> str:
    return f"node-{i:04d}"


def internal_ip(i: int) -> str:
    return f"172.20.{i // 250}.{i % 250 + 2}"


def join_ip(i: int) -> str:
    return f"100.64.{i // 250}.{i % 250 + 2}"


def ready_node(i: int) -> dict[str, object]:
    raw = builders.node(
        node_name(i),
        internal_ip(i),
        annotations={IP_ADDRESS_ANNOTATION: join_ip(i)},
        resource_version="1",
    )
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return raw


class Cluster:
    """N nodes in a node cache and a reconciler over it, writing through `client`."""

    def __init__(self, nodes: int, client: OvsdbappNbClient) -> None:
        self.count = nodes
        self.nodes = Indexer(indexers={NODE_IP_INDEX: node_ip_index})
        for i in range(nodes):
            self.nodes.add(ready_node(i))
        self.subnets = Indexer()
        self.subnets.add(builders.subnet(SUBNET, "10.16.0.0/16", resource_version="1"))
        self.view = CacheView(kube=None, nodes=self.nodes, subnets=self.subnets)
        self.config = Config(cluster_router=ROUTER, node_switch=JOIN, default_logical_switch=SUBNET)
        self.client = client
        self.reconciler = RoutingReconciler(
            config=self.config,
            view=self.view,
            kube=None,  # type: ignore[arg-type]
            nb=client,
            queue=RateLimitingQueue[str](default_controller_rate_limiter(), name="routing"),
            is_leader=lambda: True,
        )
        self.cfg = rs.RoutingConfig(router=ROUTER, node_switch=JOIN)

    def seed(self) -> None:
        """The rows a converged cluster holds: node policies and a subnet reroute per node."""
        self.reconciler.reconcile(ALL_NODE_POLICIES)
        reroutes = tuple(
            RouterPolicy(
                ROUTER,
                rp.GATEWAY_PRIORITY,
                f"ip4.src == ${rp.set_name(SUBNET, node_name(i), 4)}",
                "reroute",
                (join_ip(i),),
                rp.ids(rp.KIND_GATEWAY, 4, subnet=SUBNET, node=node_name(i)),
            )
            for i in range(self.count)
        )
        self.client.apply_routing(ROUTER, RoutingChange(policies=reroutes))

    def before_key(self, name: str) -> RoutingChange:
        """The earlier form of a node policy key (see the module docstring)."""
        owners = node_rows.internal_ip_owners(self.view.nodes())
        desired = node_rows.desired_node_policies(name, self.view.node(name), self.cfg, owners)
        policies = self.client.list_router_policies(ROUTER)
        actual = rs.actual_rows("", name, policies, (), (), (), ())
        routes = self.client.list_static_routes(ROUTER)
        change = node_rows.diff_node_policies(desired, actual, routes)
        if not change.empty():
            self.client.apply_routing(ROUTER, change)
        return change

    def before_pass(self) -> None:
        for i in range(self.count):
            assert self.before_key(node_name(i)).empty()

    def after_pass(self) -> None:
        assert self.reconciler.reconcile(ALL_NODE_POLICIES).empty()

    def event_keys(self) -> None:
        for i in range(self.count):
            assert self.reconciler.reconcile(rs.node_policy_key(node_name(i))).empty()


def timed(fn: Callable[[], None], repeat: int) -> float:
    """Median seconds of `repeat` runs of `fn`."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def subnet_name(s: int) -> str:
    return f"subnet-{s:02d}"


class Grid:
    """S distributed subnets x N nodes, one running pod per pair, and a reconciler over them."""

    def __init__(self, subnets: int, nodes: int, client: OvsdbappNbClient) -> None:
        self.subnets, self.count, self.client = subnets, nodes, client
        node_cache = Indexer(indexers={NODE_IP_INDEX: node_ip_index})
        for i in range(nodes):
            node_cache.add(ready_node(i))
        subnet_cache = Indexer()
        pods = Indexer(indexers={NODE_INDEX: node_index, IP_INDEX: ip_index})
        for s in range(subnets):
            cidr = f"10.{100 + s}.0.0/16"
            subnet_cache.add(builders.subnet(subnet_name(s), cidr, resource_version="1"))
            for i in range(nodes):
                ip = f"10.{100 + s}.{i // 250}.{i % 250 + 2}"
                annotations = {
                    LOGICAL_SWITCH_ANNOTATION: subnet_name(s),
                    IP_ADDRESS_ANNOTATION: ip,
                    ALLOCATED_ANNOTATION: "true",
                }
                pods.add(
                    builders.pod(
                        f"p-{s}-{i}",
                        "default",
                        annotations=annotations,
                        node=node_name(i),
                        phase="Running",
                        uid=f"uid-{s}-{i}",
                        resource_version="1",
                    )
                )
        view = CacheView(kube=None, nodes=node_cache, subnets=subnet_cache, pods=pods)
        config = Config(cluster_router=ROUTER, node_switch=JOIN, default_logical_switch=SUBNET)
        self.reconciler = RoutingReconciler(
            config=config,
            view=view,
            kube=None,  # type: ignore[arg-type]
            nb=client,
            queue=RateLimitingQueue[str](default_controller_rate_limiter(), name="routing"),
            is_leader=lambda: False,  # nothing queued: each form below runs its keys itself
        )

    def per_key(self) -> None:
        for s in range(self.subnets):
            assert self.reconciler.reconcile(rs.subnet_key(subnet_name(s))).empty()
            for i in range(self.count):
                key = rs.node_key(subnet_name(s), node_name(i))
                assert self.reconciler.reconcile(key).empty()

    def before_pass(self) -> None:
        """The earlier form of the `ALL_SUBNETS` key (see the module docstring)."""
        r, nb = self.reconciler, self.client
        nb.list_router_policies(ROUTER)  # the subnet names, as the pass read them
        nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY})
        for s in range(self.subnets):
            assert r.reconcile(rs.subnet_key(subnet_name(s))).empty()
        shared = NodeKeyRows.read(nb, ROUTER, False)
        for s in range(self.subnets):
            for i in range(self.count):
                change, _ = r._reconcile_node(subnet_name(s), node_name(i), shared=shared)
                assert change.empty()

    def full_pass(self) -> None:
        assert self.reconciler.reconcile(ALL_SUBNETS).empty()


def run_grid(subnets: int, nodes: int, repeat: int, workdir: Path) -> dict[str, float]:
    nb = NbServer(workdir / f"nb-grid-{subnets}x{nodes}").start()
    try:
        client = OvsdbappNbClient.from_addr(nb.remote, timeout=120.0)
        try:
            client.ensure_logical_router(ROUTER)
            grid = Grid(subnets, nodes, client)
            grid.reconciler.reconcile(ALL_SUBNETS)  # converge
            policies = len(client.list_router_policies(ROUTER))
            return {
                "policies": float(policies),
                "per key": timed(grid.per_key, repeat),
                "before": timed(grid.before_pass, repeat),
                "pass": timed(grid.full_pass, repeat),
            }
        finally:
            client.close()
    finally:
        nb.stop()


def run(nodes: int, repeat: int, workdir: Path) -> dict[str, float]:
    nb = NbServer(workdir / f"nb-{nodes}").start()
    try:
        client = OvsdbappNbClient.from_addr(nb.remote, timeout=120.0)
        try:
            client.ensure_logical_router(ROUTER)
            cluster = Cluster(nodes, client)
            cluster.seed()
            policies = len(client.list_router_policies(ROUTER))
            return {
                "policies": float(policies),
                "before": timed(cluster.before_pass, repeat),
                "pass": timed(cluster.after_pass, repeat),
                "event keys": timed(cluster.event_keys, repeat),
            }
        finally:
            client.close()
    finally:
        nb.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="50,200,500", help="node counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--grid", default="2x50,2x200,5x200", help="subnets x nodes of the node keys' table"
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",") if n.strip()]
    grid = [
        (int(s), int(n))
        for s, _, n in (g.strip().partition("x") for g in args.grid.split(","))
        if s and n
    ]
    with tempfile.TemporaryDirectory(prefix="bench-node-policy-") as tmp:
        workdir = args.workdir or Path(tmp)
        header = (
            f"{'nodes':>6} {'policies':>9} {'before ms':>10} {'pass ms':>9} {'ratio':>7}"
            f" {'before ms/key':>14} {'pass ms/key':>12} {'event key ms':>13}"
        )
        print(header)
        for n in counts:
            r = run(n, args.repeat, workdir)
            ms = {k: 1000 * v for k, v in r.items() if k != "policies"}
            print(
                f"{n:>6} {int(r['policies']):>9} {ms['before']:>10.1f} {ms['pass']:>9.1f}"
                f" {ms['before'] / ms['pass']:>6.1f}x {ms['before'] / n:>14.3f}"
                f" {ms['pass'] / n:>12.3f} {ms['event keys'] / n:>13.3f}",
                flush=True,
            )
        print()
        print(
            f"{'subnets x nodes':>15} {'keys':>6} {'policies':>9} {'per-key ms':>11}"
            f" {'before ms':>10} {'pass ms':>9} {'ratio':>7} {'per-key ms/key':>15}"
            f" {'pass ms/key':>12}"
        )
        for subnets, nodes in grid:
            r = run_grid(subnets, nodes, args.repeat, workdir)
            keys = subnets * nodes
            ms = {k: 1000 * v for k, v in r.items() if k != "policies"}
            print(
                f"{f'{subnets}x{nodes}':>15} {keys:>6} {int(r['policies']):>9}"
                f" {ms['per key']:>11.1f} {ms['before']:>10.1f} {ms['pass']:>9.1f}"
                f" {ms['before'] / ms['pass']:>6.1f}x"
                f" {ms['per key'] / keys:>15.3f} {ms['pass'] / keys:>12.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
