"""How long routing takes to follow a change: from the API write to the cluster router's rows
sending every affected pod's egress to the right node.

Usage, from the repo root: `python bench/routing_convergence.py [--pods 100,1000] [--repeat 5]
[--workdir DIR]`.

Per N (default 100 and 1,000), each part in its own process as in bench/e2e (whose
`Emulator` and `ControllerProcess` it reuses): a throwaway `ovsdb-server`, the API server
emulator seeded with three Ready nodes, and `python -m cmd.controller` (leader election off,
`--gc-interval=3600`, so nothing but the events converges a change; its routing resync runs
every 60 s and a change that needed it would show as ~60 s). N pods of a distributed subnet
are spread over the nodes and routed, then, one after the other:

* pod add (the baseline: the per-pod path): a new pod on node-0, `--repeat` times;
* distributed -> centralized (gatewayNode node-1): every pod via node-1's join address;
* centralized -> distributed: every pod via its own node again;
* join address change: node-2's `ovn.kubernetes.io/ip_address` set to another join address:
  its N/3 pods via the new one (the others unchanged);
* pod re-created on another node: a pod of node-0 deleted and re-created under its name on
  node-1 at once, `--repeat` times: the successor via node-1 alone, the old address (if it
  changed) in no reroute and no routing set.

"Converged" is read from the NB by content, as tests/e2e/routing_state.py does: one
`ovn-nbctl list` of the router's policies and the address sets, every pod address evaluated
against the reroute policies (exactly one match, naming the expected next hop). Times are from
the API write's return to the start of the first NB read that shows convergence; the
resolution is one NB read (its median is printed). No timing is asserted anywhere: the figures
are for reading beside the baseline of the same run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import harness  # noqa: F401 - puts the repository root on sys.path
from kubernetes import config as kube_config

from bench.e2e.children import ControllerProcess, Emulator
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    ROUTED_ANNOTATION,
)
from controller.sandbox.apiserver.remotestore import RemoteStore
from controller.sandbox.ovn.ovsdb import NbServer
from controller.testing import builders
from tests.e2e.routing_state import (
    READY,
    Snapshot,
    _as_list,
    reroutes,
    routing_sets_holding,
)

NS = "conv"
SUBNET = "conv"
CIDR = "10.80.0.0/16"
NODES = ("node-0", "node-1", "node-2")
MOVED_JOIN = "100.64.0.250"
DEADLINE = 300.0
_SET_TERM = re.compile(r"^\s*ip[46]\.src\s*==\s*\$([A-Za-z0-9_.]+)\s*$")


# --- reading convergence from the NB ------------------------------------------------------------


class Reader:
    """Reads the router's reroutes for a set of addresses; counts the reads' durations."""

    def __init__(self, remote: str) -> None:
        self.remote = remote
        self.read_seconds: list[float] = []

    def egress(self, ips: Iterable[str]) -> tuple[float, dict[str, list[tuple[str, ...]]]]:
        """(when the read started, ip -> the next hops of every reroute it matches)."""
        started = time.monotonic()
        snap = Snapshot.read(self.remote)
        self.read_seconds.append(time.monotonic() - started)
        wanted = list(ips)
        out: dict[str, list[tuple[str, ...]]] = {ip: [] for ip in wanted}
        others = []
        for p in sorted(snap.policies, key=lambda p: -int(p["priority"])):
            if p["action"] != "reroute":
                continue
            m = _SET_TERM.match(str(p["match"]))
            if m is None:
                others.append(p)
                continue
            # a `src == $set` policy: membership, not one ip_network per entry per address
            row = snap.sets.get(m[1])
            members = {str(ipaddress.ip_address(a)) for a in (row or {}).get("addresses", [])}
            hops = tuple(sorted(h for h in _as_list(p.get("nexthops")) if h))
            for ip in wanted:
                if ip in members:
                    out[ip].append(hops)
        if others:
            narrowed = Snapshot([*others], snap.sets)
            for ip in wanted:
                out[ip] += [r.nexthops for r in reroutes(narrowed, ip)]
        return started, out

    def leftovers(self, ip: str) -> bool:
        snap = Snapshot.read(self.remote)
        return bool(reroutes(snap, ip) or routing_sets_holding(snap, ip))

    def until(
        self, want: Callable[[], dict[str, str]], since: float, what: str, old: str = ""
    ) -> float:
        """Seconds from `since` to the first read where every address of `want()` has exactly
        one reroute, to its next hop (and `old`, if given, has no routing rows left)."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            expected = want()
            started, got = self.egress(expected)
            if all(got[ip] == [(hop,)] for ip, hop in expected.items()) and not (
                old and old not in expected and self.leftovers(old)
            ):
                return started - since
        raise RuntimeError(f"{what}: not converged within {DEADLINE:.0f} s")


# --- the cluster ---------------------------------------------------------------------------------


def seed() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    ]
    for i, name in enumerate(NODES):
        node = builders.node(name, f"172.18.0.{i + 2}")
        node["status"]["conditions"] = READY
        objs.append({"apiVersion": "v1", "kind": "Node", **node})
    return objs


def fixed(want: dict[str, str]) -> Callable[[], dict[str, str]]:
    """`until`'s expectation when it does not change while waiting."""
    return lambda: want


def wait(cond: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)  # polling a condition under a deadline
    raise RuntimeError(f"timed out waiting for {what}")


class Bed:
    """The emulator, a real NB and the controller process, for one N."""

    def __init__(self, workdir: Path) -> None:
        self.nb = NbServer(workdir / "nb").start()
        self.api = Emulator(workdir / "api", seed())
        self.ctl = ControllerProcess(workdir, self.api.kubeconfig, self.nb.remote, 2)
        self.store = RemoteStore(kube_config.new_client_from_config(str(self.api.kubeconfig)))
        self.reader = Reader(self.nb.remote)

    def stop(self) -> None:
        self.ctl.stop()
        self.api.stop()
        self.nb.stop()

    def join(self, node: str) -> str:
        ann = self.store.get("nodes", None, node)["metadata"].get("annotations") or {}
        return str(ann.get(IP_ADDRESS_ANNOTATION, "")).split(",")[0]

    def pods(self) -> dict[str, tuple[str, str, str]]:
        """name -> (uid, node, address) of every routed pod."""
        out = {}
        for obj in self.store.list("pods", NS):
            ann = obj["metadata"].get("annotations") or {}
            if ann.get(ROUTED_ANNOTATION) == "true":
                out[obj["metadata"]["name"]] = (
                    obj["metadata"]["uid"],
                    obj["spec"]["nodeName"],
                    ann[IP_ADDRESS_ANNOTATION],
                )
        return out

    def create_pod(self, name: str, node: str) -> str:
        body = builders.pod(name, NS, annotations={LOGICAL_SWITCH_ANNOTATION: SUBNET}, node=node)
        return str(self.store.create("pods", body)["metadata"]["uid"])

    def routed(self, name: str, uid: str) -> str:
        def done() -> str | None:
            obj = self.store.get("pods", NS, name)
            ann = obj["metadata"].get("annotations") or {}
            if obj["metadata"]["uid"] == uid and ann.get(ROUTED_ANNOTATION) == "true":
                return str(ann[IP_ADDRESS_ANNOTATION])
            return None

        return str(wait(done, f"pod {name} routed"))


def run(n: int, repeat: int, workdir: Path) -> dict[str, str]:
    bed = Bed(workdir)
    try:
        bed.ctl.wait_ready(DEADLINE)
        joins = {node: wait(functools.partial(bed.join, node), f"{node} join") for node in NODES}
        bed.store.create("subnets", builders.subnet(SUBNET, CIDR, gatewayType="distributed"))
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: bed.create_pod(f"p{i:05d}", NODES[i % 3]), range(n)))

        def all_routed() -> dict[str, tuple[str, str, str]] | None:
            routed = bed.pods()
            return routed if len(routed) == n else None

        pods = wait(all_routed, f"{n} pods routed")
        routed_all = time.monotonic() - started
        own = {ip: joins[node] for _, node, ip in pods.values()}
        reader = bed.reader
        reader.until(lambda: own, time.monotonic(), "distributed at start")
        figures: dict[str, str] = {"route N new pods (to annotated)": f"{routed_all:.2f}"}

        adds = []
        for k in range(repeat):
            since = time.monotonic()
            uid = bed.create_pod(f"extra{k}", NODES[0])
            ip = bed.routed(f"extra{k}", uid)
            adds.append(reader.until(fixed({ip: joins[NODES[0]]}), since, "pod add"))
        figures["pod add (baseline)"] = _spread(adds)

        since = time.monotonic()
        bed.store.patch(
            "subnets",
            None,
            SUBNET,
            {"spec": {"gatewayType": "centralized", "gatewayNode": NODES[1]}},
        )
        gw = {ip: joins[NODES[1]] for ip in own}
        figures["distributed -> centralized"] = f"{reader.until(lambda: gw, since, 'd->c'):.2f}"

        since = time.monotonic()
        bed.store.patch("subnets", None, SUBNET, {"spec": {"gatewayType": "distributed"}})
        figures["centralized -> distributed"] = f"{reader.until(lambda: own, since, 'c->d'):.2f}"

        since = time.monotonic()
        bed.store.patch(
            "nodes",
            None,
            NODES[2],
            {"metadata": {"annotations": {IP_ADDRESS_ANNOTATION: MOVED_JOIN}}},
        )
        moved = {ip: MOVED_JOIN if hop == joins[NODES[2]] else hop for ip, hop in own.items()}
        figures["join address change (N/3 pods)"] = (
            f"{reader.until(lambda: moved, since, 'join change'):.2f}"
        )

        recreated = []
        on_node0 = sorted(name for name, (_, node, _) in pods.items() if node == NODES[0])
        for name in on_node0[:repeat]:
            old_ip = pods[name][2]
            since = time.monotonic()
            bed.store.delete("pods", NS, name)
            uid = bed.create_pod(name, NODES[1])
            ip = bed.routed(name, uid)
            recreated.append(
                reader.until(fixed({ip: joins[NODES[1]]}), since, "re-created", old_ip)
            )
        figures["pod re-created on another node"] = _spread(recreated)
        figures["NB read (resolution)"] = f"{statistics.median(reader.read_seconds):.3f}"
        return figures
    finally:
        bed.stop()


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (max {max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", default="100,1000", help="comma-separated N")
    parser.add_argument("--repeat", type=int, default=5, help="pod adds / re-creations timed")
    parser.add_argument("--workdir", default="", help="keep logs here (default: a temp dir)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.pods.split(",") if x.strip()]
    results: dict[int, dict[str, str]] = {}
    for n in sizes:
        if args.workdir:
            work = Path(args.workdir) / f"n{n}"
            work.mkdir(parents=True, exist_ok=True)
            results[n] = run(n, args.repeat, work)
        else:
            with tempfile.TemporaryDirectory(prefix="conv") as d:
                results[n] = run(n, args.repeat, Path(d))
        print(f"N={n} done", file=sys.stderr, flush=True)
    rows = list(next(iter(results.values())))
    width = max(len(r) for r in rows)
    print(f"{'seconds to converge':<{width}}  " + "  ".join(f"{'N=' + str(n):>18}" for n in sizes))
    for row in rows:
        print(f"{row:<{width}}  " + "  ".join(f"{results[n][row]:>18}" for n in sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
