"""OVN NB client benchmark: kube-ovn's ovn-nbctl exec per port vs our ovsdbapp client.

Run from the repo root: `python bench/ovn.py` (full, a few minutes) or `--quick` (smoke run).

1. Create then delete N ports (N = 1000, 5000) on an empty switch, and again on a switch that
   already holds 5,000 ports, for: ovn-nbctl exec per port (kube-ovn v1.8's way; sampled, see
   --nbctl-ops, because it costs O(database) per exec), our client sequentially, from 8 threads
   (with group commit off: one transaction per verb; and on: concurrent verbs coalesced), and
   batched (50 ports per transaction).
2. Connect + initial sync of a database holding 10,000 and 50,000 ports, in a fresh process:
   time and RSS growth, for stock ovsdbapp (every table and column) and our client.

Every case runs against a fresh throwaway ovsdb-server; figures are ms per port op (median of the
per-run averages) and ratios against the ovn-nbctl baseline of the same run.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.ovn.api import PortSpec
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer

T = TypeVar("T")

LS = "ls0"
BATCH = 50
THREADS = 8
STRATA = 4
# The 8 threads with group commit off: every verb in its own transaction (the old path).
NO_GROUP = "8 thr, no group"


def spec(i: int) -> PortSpec:
    return PortSpec(
        name=f"pod{i}.bench",
        switch=LS,
        mac=f"00:00:{(i >> 24) & 255:02x}:{(i >> 16) & 255:02x}:{(i >> 8) & 255:02x}:{i & 255:02x}",
        ips=(f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",),
        pod_name=f"pod{i}",
        pod_namespace="bench",
        port_security=True,
    )


def nbctl_create(remote: str, s: PortSpec) -> None:
    addr = f"{s.mac} {s.ips[0]}"
    subprocess.run(
        [
            "ovn-nbctl",
            f"--db={remote}",
            "--timeout=60",
            "--may-exist",
            "lsp-add",
            LS,
            s.name,
            "--",
            "lsp-set-addresses",
            s.name,
            addr,
            "--",
            "lsp-set-port-security",
            s.name,
            addr,
            "--",
            "set",
            "logical_switch_port",
            s.name,
            f"external_ids:pod={s.pod_namespace}/{s.pod_name}",
            "external_ids:vendor=kube-ovn",
        ],
        check=True,
        capture_output=True,
    )


def nbctl_delete(remote: str, s: PortSpec) -> None:
    subprocess.run(
        ["ovn-nbctl", f"--db={remote}", "--timeout=60", "--if-exists", "lsp-del", s.name],
        check=True,
        capture_output=True,
    )


_TICK = os.sysconf("SC_CLK_TCK")


def _server_cpu(pid: int | None) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _client_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Sample:
    """Wall, client CPU (incl. ovn-nbctl children) and server CPU, in ms per port op."""

    def __init__(self, wall: float, client: float, server: float) -> None:
        self.wall, self.client, self.server = wall, client, server


def each(fn: Callable[[T], object], items: Iterable[T]) -> None:
    """Call `fn` on every item, in order (a timed body that keeps no results)."""
    for item in items:
        fn(item)


def timed(fn: Callable[[], object], n: int, server_pid: int | None) -> Sample:
    c0, s0, t = _client_cpu(), _server_cpu(server_pid), time.perf_counter()
    fn()
    wall = (time.perf_counter() - t) * 1000 / n
    return Sample(wall, (_client_cpu() - c0) * 1000 / n, (_server_cpu(server_pid) - s0) * 1000 / n)


def threaded(items: list[PortSpec], work: Callable[[PortSpec], None]) -> None:
    chunks = [items[i::THREADS] for i in range(THREADS)]
    errors: list[BaseException] = []

    def run(chunk: list[PortSpec]) -> None:
        try:
            for s in chunk:
                work(s)
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=run, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def one_case(approach: str, n: int, preload: int, nbctl_ops: int) -> tuple[Sample, Sample, int]:
    """(create, delete, ops measured) on a fresh server."""
    with tempfile.TemporaryDirectory(prefix="nbb") as d:
        server = NbServer(Path(d)).start()
        pid = server.pid
        try:
            group_commit = approach != NO_GROUP
            with OvsdbappNbClient.from_addr(
                server.remote, timeout=120, group_commit=group_commit
            ) as nb:
                nb.ensure_logical_switch(LS, "", "10.0.0.0/8", "10.0.0.1", {})
                base = 1 << 20
                pre = [spec(base + i) for i in range(preload)]
                for i in range(0, len(pre), 1000):
                    nb.create_ports(pre[i : i + 1000])
                items = [spec(i + 1) for i in range(n)]
                if approach == "nbctl":
                    c, d_ = nbctl_stratified(nb, server.remote, pid, items, nbctl_ops)
                    items = items[:nbctl_ops]
                elif approach == "sequential":
                    c = timed(lambda: each(nb.create_port, items), n, pid)
                    d_ = timed(lambda: each(lambda s: nb.delete_port(s.name), items), n, pid)
                elif approach in ("8 threads", NO_GROUP):
                    c = timed(lambda: threaded(items, nb.create_port), n, pid)
                    d_ = timed(lambda: threaded(items, lambda s: nb.delete_port(s.name)), n, pid)
                else:
                    batches = [items[i : i + BATCH] for i in range(0, n, BATCH)]
                    c = timed(lambda: each(nb.create_ports, batches), n, pid)
                    d_ = timed(
                        lambda: each(lambda b: nb.delete_ports([s.name for s in b]), batches),
                        n,
                        pid,
                    )
                assert len(nb.list_ports()) == preload, "benchmark left ports behind"
                return c, d_, len(items)
        finally:
            server.stop()


def nbctl_stratified(
    nb: OvsdbappNbClient, remote: str, pid: int | None, items: list[PortSpec], ops: int
) -> tuple[Sample, Sample]:
    """ovn-nbctl's average over creating all `items` one by one, from a stratified sample.

    An exec costs O(ports already there), so timing only the first ports would flatter it.
    The switch is filled (by our client, untimed) to STRATA evenly spaced sizes between empty
    and len(items); at each, ops/STRATA ports are created then deleted with ovn-nbctl.
    """
    strata = min(STRATA, max(1, ops), len(items))
    per = max(1, min(ops, len(items)) // strata)
    creates: list[Sample] = []
    deletes: list[Sample] = []
    filled = 0
    for k in range(strata):
        target = len(items) * k // strata
        if target > filled:
            for i in range(filled, target, 1000):
                nb.create_ports(items[i : min(i + 1000, target)])
            filled = target
        probe = items[filled : filled + per]
        creates.append(
            timed(
                functools.partial(each, functools.partial(nbctl_create, remote), probe),
                len(probe),
                pid,
            )
        )
        deletes.append(
            timed(
                functools.partial(each, functools.partial(nbctl_delete, remote), probe),
                len(probe),
                pid,
            )
        )
    if filled:
        nb.delete_ports([s.name for s in items[:filled]])

    def mean(xs: list[Sample]) -> Sample:
        return Sample(
            *(statistics.fmean(getattr(x, f) for x in xs) for f in ("wall", "client", "server"))
        )

    return mean(creates), mean(deletes)


def port_bench(sizes: list[int], preload: int, nbctl_ops: int, runs: int) -> None:
    approaches = ["nbctl", "sequential", NO_GROUP, "8 threads", f"batched {BATCH}/txn"]
    print(
        f"\n## Port create/delete, ms per port (median of {runs} run(s); ovn-nbctl: "
        f"{nbctl_ops} ports sampled at {STRATA} evenly spaced sizes of the growing switch).\n"
        "wall = elapsed; cli = CPU of this process and its ovn-nbctl children; "
        "srv = ovsdb-server CPU; x = wall speed-up over ovn-nbctl."
    )
    print(
        f"{'ports':>6} {'on LS':>6} {'approach':<17} {'create':>7} {'x':>6} {'cli':>6} "
        f"{'srv':>6} | {'delete':>7} {'x':>6} {'cli':>6} {'srv':>6}"
    )
    cost: dict[tuple[int, int, str], tuple[float, float, float]] = {}
    for n in sizes:
        for pre in (0, preload):
            base: tuple[float, float] | None = None
            for a in approaches:
                results = [one_case(a, n, pre, nbctl_ops) for _ in range(runs)]
                c = sorted((r[0] for r in results), key=lambda x: x.wall)[len(results) // 2]
                d = sorted((r[1] for r in results), key=lambda x: x.wall)[len(results) // 2]
                if base is None:
                    base = (c.wall, d.wall)
                cost[(n, pre, a)] = (c.wall + d.wall, c.client + d.client, c.server + d.server)
                label = f"nbctl exec ({results[0][2]})" if a == "nbctl" else a
                print(
                    f"{n:>6} {pre:>6} {label:<17} {c.wall:>7.2f} {base[0] / c.wall:>5.1f}x "
                    f"{c.client:>6.2f} {c.server:>6.2f} | {d.wall:>7.2f} "
                    f"{base[1] / d.wall:>5.1f}x {d.client:>6.2f} {d.server:>6.2f}",
                    flush=True,
                )
    print(f"\ncreate+delete per port, switch holding {preload} ports vs empty (loaded/empty):")
    for n in sizes:
        for a in approaches:
            e, f = cost[(n, 0, a)], cost[(n, preload, a)]
            print(
                f"  n={n:<5} {a:<17} wall {e[0]:7.2f} -> {f[0]:7.2f} ({f[0] / e[0]:4.2f})  "
                f"client CPU {e[1]:6.2f} -> {f[1]:6.2f} ({f[1] / e[1]:4.2f})  "
                f"server CPU {e[2]:6.2f} -> {f[2]:6.2f}"
            )


def _transact_raw(remote: str, params: list[object]) -> None:
    """One JSON-RPC transact over the unix socket (a 5000-row txn is too big for argv)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(remote.removeprefix("unix:"))
        sock.sendall(json.dumps({"method": "transact", "params": params, "id": 1}).encode())
        dec, buf = json.JSONDecoder(), ""
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("ovsdb-server closed the connection")
            buf += chunk.decode()
            try:
                reply, _ = dec.raw_decode(buf)
            except ValueError:
                continue
            if reply.get("id") != 1:
                buf = ""
                continue
            errors = [r for r in reply["result"] if isinstance(r, dict) and "error" in r]
            if reply.get("error") or errors:
                raise RuntimeError(f"transact failed: {reply.get('error') or errors[:2]}")
            return


def build_db(path: Path, ports: int) -> None:
    """A DB file with `ports` LSPs on switches of 1000, written in 5000-row JSON-RPC txns."""
    with tempfile.TemporaryDirectory(prefix="nbg") as d:
        server = NbServer(Path(d), db=path).start()
        try:
            for start in range(0, ports, 5000):
                ops: list[dict[str, object]] = []
                for sw in range(start // 1000, min(start + 5000, ports) // 1000 + 1):
                    lo, hi = max(sw * 1000, start), min((sw + 1) * 1000, start + 5000, ports)
                    if lo >= hi:
                        continue
                    refs = []
                    for i in range(lo, hi):
                        s = spec(i + 1)
                        addr = f"{s.mac} {s.ips[0]}"
                        ops.append(
                            {
                                "op": "insert",
                                "table": "Logical_Switch_Port",
                                "uuid-name": f"p{i}",
                                "row": {
                                    "name": s.name,
                                    "addresses": addr,
                                    "port_security": addr,
                                    "external_ids": [
                                        "map",
                                        [
                                            ["pod", f"bench/pod{i + 1}"],
                                            ["ls", f"sw{sw}"],
                                            ["vendor", "kube-ovn"],
                                        ],
                                    ],
                                },
                            }
                        )
                        refs.append(["named-uuid", f"p{i}"])
                    if lo == sw * 1000:
                        ops.append(
                            {
                                "op": "insert",
                                "table": "Logical_Switch",
                                "uuid-name": f"s{sw}",
                                "row": {"name": f"sw{sw}", "ports": ["set", refs]},
                            }
                        )
                    else:
                        ops.append(
                            {
                                "op": "mutate",
                                "table": "Logical_Switch",
                                "where": [["name", "==", f"sw{sw}"]],
                                "mutations": [["ports", "insert", ["set", refs]]],
                            }
                        )
                _transact_raw(server.remote, ["OVN_Northbound", *ops])
        finally:
            server.stop()
    subprocess.run(["ovsdb-tool", "compact", str(path)], check=True, capture_output=True)


_SYNC_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
mode, remote = sys.argv[1], sys.argv[2]
if mode == "ours":
    from controller.ovn.impl_idl import OvsdbappNbClient
else:
    if mode == "stock-c":
        from controller.ovn.connection import enable_c_json_parser
        enable_c_json_parser()
    from ovsdbapp.backend.ovs_idl import connection
    from ovsdbapp.schema.ovn_northbound import impl_idl
r0 = rss(); t = time.perf_counter()
if mode == "ours":
    c = OvsdbappNbClient.from_addr(remote, timeout=600)
    n = len(c._idl.tables["Logical_Switch_Port"].rows)
    import ovs.json; parser = ovs.json.PARSER
else:
    idl = connection.OvsdbIdl.from_server(remote, "OVN_Northbound")
    api = impl_idl.OvnNbApiIdlImpl(connection.Connection(idl=idl, timeout=600))
    n = len(idl.tables["Logical_Switch_Port"].rows)
    import ovs.json; parser = ovs.json.PARSER
print(json.dumps({"s": time.perf_counter() - t, "mib": rss() - r0, "n": n, "parser": parser}))
"""


def sync_bench(sizes: list[int]) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    print("\n## Connect + initial sync of an existing database (fresh process each)")
    print(f"{'ports':>7} {'client':<44} {'seconds':>8} {'x':>6} {'RSS MiB':>8} {'x':>6}")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="nbs") as d:
            db = Path(d) / "big.db"
            t = time.perf_counter()
            build_db(db, n)
            built = time.perf_counter() - t
            server = NbServer(Path(d) / "srv", db=db).start()
            try:
                base = None
                for mode, label in (
                    ("stock", "stock ovsdbapp (all tables)"),
                    ("stock-c", "stock ovsdbapp (all tables)"),
                    ("ours", "ours (8 tables, no yield)"),
                ):
                    out = subprocess.run(
                        [sys.executable, "-c", _SYNC_CHILD, mode, server.remote, root],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    assert r["n"] == n, r
                    if base is None:
                        base = r
                    shown = f"{label} [{r['parser']} json]"
                    print(
                        f"{n:>7} {shown:<44} {r['s']:>8.2f} {base['s'] / r['s']:>5.1f}x "
                        f"{r['mib']:>8.1f} {base['mib'] / max(r['mib'], 0.1):>5.1f}x",
                        flush=True,
                    )
            finally:
                server.stop()
        print(f"{'':>7} (database of {n} ports built in {built:.1f}s)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--nbctl-ops", type=int, default=None, help="ovn-nbctl ports per case")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--skip-sync", action="store_true")
    a = p.parse_args()
    if a.quick:
        sizes, preload, nbctl_ops, sync_sizes = [200], 1000, a.nbctl_ops or 50, [2000]
    else:
        sizes, preload, nbctl_ops, sync_sizes = (
            [1000, 5000],
            5000,
            a.nbctl_ops or 200,
            [10000, 50000],
        )
    import ovs.json

    from controller.ovn.connection import enable_c_json_parser

    enable_c_json_parser()
    print(f"# OVN NB benchmark (python-ovs JSON parser: {ovs.json.PARSER}, pid {os.getpid()})")
    port_bench(sizes, preload, nbctl_ops, a.runs)
    if not a.skip_sync:
        sync_bench(sync_sizes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
