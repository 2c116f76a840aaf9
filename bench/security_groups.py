"""SecurityGroup benchmark: translating rules, applying them to a real NB, and a one-rule edit.

Run from the repo root: `python bench/security_groups.py` (N = 50, 200, 1000 rules) or `--quick`.

For a group of N ingress rules (plus allowSameGroupTraffic), against a fresh throwaway
ovsdb-server and the ovsdbapp client:

* translate: `plan_security_group` of the N rules (pure Python), microseconds per rule;
* create: the first `apply_security_group` (port group, address sets, N + 4 ACLs; one txn);
* edit one rule: `apply_security_group` with one rule changed (this client keeps the N + 3
  unchanged ACL rows), beside the baseline of the same edit done kube-ovn v1.8's way in this run:
  every ACL of the group removed, then all of them added back (here two transactions, where
  v1.8 even runs one ovn-nbctl per ACL), which rewrites every row;
* rows rewritten by each edit (ACL UUIDs that changed), read back with ovn-nbctl.

Figures are medians of `--repeat` runs, in ms; the ratio is baseline / ours.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.core.security_group import plan_security_group
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer

SG = "bench-web"
PG = "ovn.sg.bench.web"


def spec(n: int, edited: int = -1) -> dict[str, Any]:
    rules = []
    for i in range(n):
        port = 1000 + i + (50000 if i == edited else 0)
        rules.append(
            {
                "ipVersion": "ipv4",
                "protocol": "tcp",
                "priority": 1 + i % 200,
                "remoteType": "address",
                "remoteAddress": f"10.{i // 256 % 256}.{i % 256}.0/24",
                "portRangeMin": port,
                "portRangeMax": port,
                "policy": "allow",
            }
        )
    return {"allowSameGroupTraffic": True, "ingressRules": rules}


def acl_uuids(remote: str) -> set[str]:
    out = subprocess.run(
        [
            "ovn-nbctl",
            f"--db={remote}",
            "--format=json",
            "--columns=acls",
            "find",
            "Port_Group",
            f"name={PG}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (row,) = json.loads(out)["data"]
    kind, inner = row[0]
    return {inner} if kind == "uuid" else {u for _, u in inner}


def one_run(n: int, workdir: Path) -> dict[str, float]:
    t = time.perf_counter()
    plan = plan_security_group(SG, spec(n))
    translate_us = (time.perf_counter() - t) / n * 1e6
    assert not plan.errors and len(plan.acls) == n + 4
    edited = plan_security_group(SG, spec(n, edited=n // 2))
    with NbServer(workdir) as server, OvsdbappNbClient.from_addr(server.remote, 30.0) as nb:
        t = time.perf_counter()
        nb.apply_security_group(SG, plan.acls)
        create_ms = (time.perf_counter() - t) * 1000
        before = acl_uuids(server.remote)
        t = time.perf_counter()
        nb.apply_security_group(SG, edited.acls)
        edit_ms = (time.perf_counter() - t) * 1000
        after = acl_uuids(server.remote)
        ours_rewritten = len(after - before)
        t = time.perf_counter()
        nb.apply_security_group(SG, [])
        nb.apply_security_group(SG, plan.acls)
        baseline_ms = (time.perf_counter() - t) * 1000
        baseline_rewritten = len(acl_uuids(server.remote) - after)
    return {
        "translate_us": translate_us,
        "create_ms": create_ms,
        "edit_ms": edit_ms,
        "baseline_ms": baseline_ms,
        "ours_rewritten": ours_rewritten,
        "baseline_rewritten": baseline_rewritten,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one small size, one run (smoke test)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    sizes = [20] if args.quick else [50, 200, 1000]
    repeat = 1 if args.quick else args.repeat
    print(
        f"{'rules':>6} {'translate us/rule':>18} {'create ms':>10} {'edit ms':>8} "
        f"{'baseline ms':>12} {'ratio':>6} {'rows rewritten (ours/baseline)':>31}"
    )
    with tempfile.TemporaryDirectory(prefix="sgb") as d:
        for n in sizes:
            runs = [one_run(n, Path(d) / f"{n}-{i}") for i in range(repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(
                f"{n:>6} {med['translate_us']:>18.1f} {med['create_ms']:>10.1f} "
                f"{med['edit_ms']:>8.1f} {med['baseline_ms']:>12.1f} "
                f"{med['baseline_ms'] / med['edit_ms']:>6.1f} "
                f"{int(med['ours_rewritten']):>15}/{int(med['baseline_rewritten'])}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
