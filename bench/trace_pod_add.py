"""Which controller/ source files one bound pod's add runs through: a reading-cost figure.

Usage: python bench/trace_pod_add.py [--list]

A pod already bound to a node is created in the in-memory test bed of tests/pod/env.py (the
fakes of controller/testing behind the real IPAM, queues, cache view and routing reconciler);
then the AddPod worker handles its key once (`process_next_work_item`: the add, which allocates,
writes the port and IP CR, routes the pod in the same pass and patches its annotations) while
`sys.setprofile` records the file of every Python function that starts. Only that one work item
is traced: not the informer callback that queued it, nor the routing reconciler's later passes.

Printed, by group (a file counts once, in the first group that matches):

* fakes: controller/testing/ (what stands in for the API server and the NB; never counted);
* infrastructure: controller/cache/, queues/, runtime/ (the worker, queue and key lock every
  controller shares, not what a reader of the pod flow needs);
* pod: controller/pod/ (the handler chain) and controller/pod_logic/ (its pure rules);
* other: the rest of controller/ (models, view, IPAM, routing, OVN logic, ...).

"total" is every counted file (all groups but the fakes); "without infrastructure" leaves the
shared worker machinery out too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import harness

from controller.runtime.worker import process_next_work_item
from tests.pod.env import NODE, raw_pod, standard_env

PACKAGE = (harness.ROOT / "controller").resolve()
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fakes", ("testing",)),
    ("infrastructure", ("cache", "queues", "runtime")),
    ("pod", ("pod", "pod_logic")),
)


def group_of(path: Path) -> str:
    top = path.relative_to(PACKAGE).parts[0]
    for name, packages in GROUPS:
        if top in packages:
            return name
    return "other"


def trace_add() -> set[Path]:
    """The controller/ files whose functions ran while the AddPod worker handled one pod."""
    env = standard_env()
    try:
        env.create_pod(raw_pod("traced", node=NODE))
        handler = next(h for q, h, _ in env.handlers() if q is env.queues.add)
        seen: set[str] = set()

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                seen.add(frame.f_code.co_filename)

        sys.setprofile(profile)
        try:
            process_next_work_item(env.queues.add, handler, name="AddPod")
        finally:
            sys.setprofile(None)
        annotations = env.kube.pods["default/traced"]["metadata"]["annotations"]
        if annotations.get("ovn.kubernetes.io/routed") != "true":
            raise SystemExit("the traced add did not allocate and route the pod")
    finally:
        env.close()
    files = {Path(name).resolve() for name in seen}
    return {f for f in files if f.is_relative_to(PACKAGE)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--list", action="store_true", help="name every file, by group")
    args = parser.parse_args()
    files = trace_add()
    by_group: dict[str, list[str]] = {}
    for path in sorted(files):
        by_group.setdefault(group_of(path), []).append(str(path.relative_to(PACKAGE.parent)))
    counted = [f for g, fs in by_group.items() if g != "fakes" for f in fs]
    infra = len(by_group.get("infrastructure", []))
    print(f"controller/ files one bound pod's add runs through: {len(counted)} total")
    print(f"  without infrastructure (cache/, queues/, runtime/): {len(counted) - infra}")
    pod_files = by_group.get("pod", [])
    chain = [f for f in pod_files if f.startswith("controller/pod/")]
    print(f"  pod-specific (controller/pod/, controller/pod_logic/): {len(pod_files)}")
    print(f"  the handler chain (controller/pod/): {len(chain)}")
    print(f"  (fakes run, not counted: {len(by_group.get('fakes', []))})")
    if args.list:
        for name, _ in (*GROUPS, ("other", ())):
            for file in by_group.get(name, []):
                print(f"{name:15} {file}")


if __name__ == "__main__":
    main()
