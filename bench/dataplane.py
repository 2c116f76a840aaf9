"""The real OVN data plane's costs: its start-up, and the time from a pod's creation to its first
answered ping.

Usage, from the repo root, as root: `python bench/dataplane.py [--pods 100] [--sequential 10]
[--startups 3] [--workdir DIR]`.

What runs: a throwaway NB ovsdb-server (`NbServer`), the API server emulator in this process, the
controller as `python -m cmd.controller` (leader election off), the data plane (`DataPlane`: SB,
ovn-northd, OVS netdev, ovn-controller), and the sandbox kubelet serving one node with
`CniWiring` (pods wired as kube-ovn's CNI wires them). A probe pod pings the others.

Measured in one run:

1. data-plane start-up (`DataPlane.start`, a fresh work directory each time, `--startups` runs),
   beside the start of one NB ovsdb-server alone as the baseline;
2. a burst of `--pods` pods created at once: per pod, the time from its creation to `routed`
   (the controller's work), to phase Running (the kubelet wired it and ovn-controller bound its
   port) and to the first ping from the probe that is answered (pings, 0.2 s apart at most,
   start once the pod is Running, as its workload would; at most 8 ping processes at a time),
   p50/p99/max;
3. `--sequential` pods created one after the other (each once the previous one answered): the
   same figures without queueing, the baseline of 2 (ratio burst / sequential).

The machine may be shared: figures vary by run; compare ratios from the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness

from controller.core.constants import IP_ADDRESS_ANNOTATION, ROUTED_ANNOTATION
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode
from controller.sandbox.ovn.cni import CniWiring
from controller.sandbox.ovn.dataplane import DataPlane, missing_requirements
from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.processes import die_with_parent, stop_process

NS = "default"
NODE = SimNode("node1", "172.18.0.2")
POLL = 0.005
PING_SLOTS = 8
TIMEOUT = 120.0


@dataclass
class PodTimes:
    created: float = 0.0
    routed: float = 0.0
    running: float = 0.0
    pinged: float = 0.0
    error: str = ""

    def phases(self) -> tuple[float, float, float]:
        return self.routed - self.created, self.running - self.created, self.pinged - self.created


@dataclass
class Bed:
    server: ApiServer
    dp: DataPlane
    cni: CniWiring
    probe_netns: str = ""
    ping_slots: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(PING_SLOTS))

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self.server.store.get("pods", NS, name)
        except ApiError:  # not created yet, or gone: the caller polls
            return None


def _create(bed: Bed, name: str) -> float:
    spec = {"containers": [{"name": "app", "image": "busybox"}], "nodeName": NODE.name}
    t = time.monotonic()
    bed.server.store.create("pods", {"metadata": {"name": name, "namespace": NS}, "spec": spec})
    return t


def _watch(bed: Bed, results: dict[str, PodTimes], stop: threading.Event) -> None:
    """Timestamp, every POLL seconds, the pods that became routed or Running."""
    while not stop.is_set():
        now = time.monotonic()
        for obj in bed.server.store.list("pods", NS):
            times = results.get(obj["metadata"]["name"])
            if times is None:
                continue
            ann = obj["metadata"].get("annotations") or {}
            if not times.routed and ann.get(ROUTED_ANNOTATION) == "true":
                times.routed = now
            if not times.running and (obj.get("status") or {}).get("phase") == "Running":
                times.running = now
        stop.wait(POLL)


def _ping_until_answered(bed: Bed, name: str, times: PodTimes) -> None:
    """Ping `name` from the probe from the moment it is Running until it answers."""
    deadline = time.monotonic() + TIMEOUT
    ip = ""
    while time.monotonic() < deadline:
        if not ip:
            obj = bed.pod(name) or {}
            ann = (obj.get("metadata") or {}).get("annotations") or {}
            if (obj.get("status") or {}).get("phase") != "Running":
                time.sleep(POLL)
                continue
            ip = str(ann.get(IP_ADDRESS_ANNOTATION, "")).split(",")[0]
        with bed.ping_slots:
            rtt = bed.dp.ping(bed.probe_netns, ip, wait=0.2)
        if rtt is not None:
            times.pinged = time.monotonic()
            return
    times.error = f"{name}: no answered ping within {TIMEOUT}s"


def _run_pods(bed: Bed, names: list[str], *, burst: bool) -> list[PodTimes]:
    results = {n: PodTimes() for n in names}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(bed, results, stop), daemon=True)
    watcher.start()
    try:
        if burst:
            threads = []
            for name in names:
                results[name].created = _create(bed, name)
                t = threading.Thread(
                    target=_ping_until_answered, args=(bed, name, results[name]), daemon=True
                )
                t.start()
                threads.append(t)
            for t in threads:
                t.join(TIMEOUT + 10)
        else:
            for name in names:
                results[name].created = _create(bed, name)
                _ping_until_answered(bed, name, results[name])
        # the watcher's last sighting of routed/Running may trail the answered ping by a poll
        _wait(lambda: all(r.running or r.error for r in results.values()), "pods Running")
    finally:
        stop.set()
        watcher.join(10)
    errors = [r.error for r in results.values() if r.error]
    if errors:
        raise SystemExit("; ".join(errors[:5]))
    return list(results.values())


def _wait(cond: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextlib.contextmanager
def _controller(kubeconfig: Path, nb_remote: str, log: Path) -> Iterator[None]:
    argv = [
        sys.executable,
        "-m",
        "cmd.controller",
        f"--kubeconfig={kubeconfig}",
        f"--ovn-nb-addr={nb_remote}",
        "--leader-elect=false",
        "--metrics-addr=127.0.0.1",
        "--metrics-port=0",
        "--worker-num=3",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=harness.ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - one foreign call, no locks
        )
    try:
        yield
    finally:
        stop_process(proc)


def _startups(workdir: Path, nb_remote: str, runs: int) -> tuple[list[float], list[float]]:
    dp_times, nb_times = [], []
    for i in range(runs):
        t = time.monotonic()
        with NbServer(workdir / f"nb-baseline-{i}"):
            nb_times.append(time.monotonic() - t)
        with DataPlane(workdir / f"dp-startup-{i}", nb_remote) as dp:
            dp_times.append(dp.startup_seconds)
    return dp_times, nb_times


def _row(label: str, values: list[float]) -> str:
    p50, p99 = harness.percentile(values, 0.5), harness.percentile(values, 0.99)
    return f"{label:<44}{p50 * 1000:>9.0f}{p99 * 1000:>9.0f}{max(values) * 1000:>9.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100, help="pods in the burst (default 100)")
    parser.add_argument("--sequential", type=int, default=10, help="pods one at a time (10)")
    parser.add_argument("--startups", type=int, default=3, help="data-plane start-ups timed (3)")
    parser.add_argument("--workdir", type=Path, help="work directory (kept)")
    args = parser.parse_args(argv)
    why = missing_requirements()
    if why:
        print(f"bench/dataplane.py: {why}", file=sys.stderr)
        return 2
    if min(args.pods, args.sequential, args.startups) < 1:
        parser.error("--pods, --sequential and --startups must be at least 1")

    with contextlib.ExitStack() as stack:
        if args.workdir is not None:
            workdir = args.workdir
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dpbench")))
        nb = stack.enter_context(NbServer(workdir / "nb"))
        dp_times, nb_times = _startups(workdir, nb.remote, args.startups)

        server = stack.enter_context(ApiServer(bookmark_interval=0.5))
        server.store.create(
            "nodes",
            {
                "metadata": {"name": NODE.name},
                "status": {"addresses": [{"type": "InternalIP", "address": NODE.internal_ip}]},
            },
        )
        kubeconfig = server.write_kubeconfig(workdir / "kubeconfig")
        stack.enter_context(_controller(kubeconfig, nb.remote, workdir / "controller.log"))
        dp = stack.enter_context(DataPlane(workdir / "dp", nb.remote))
        cni = CniWiring(dp)
        bed = Bed(server, dp, cni)
        node = _wait(
            lambda: (
                (obj := server.store.get("nodes", None, NODE.name))
                and (obj["metadata"].get("annotations") or {}).get(IP_ADDRESS_ANNOTATION)
                and obj
            ),
            "the node's join address (is the controller up? see controller.runtime.log)",
        )
        cni.wire_node(node)
        api = server.api_client()
        stack.callback(api.close)
        stack.enter_context(SandboxKubelet(api, [NODE], wiring=cni))

        _create(bed, "probe")
        probe = _wait(
            lambda: (
                (p := bed.pod("probe")) and (p.get("status") or {}).get("phase") == "Running" and p
            ),
            "the probe pod Running",
        )
        bed.probe_netns = cni.pod_netns(probe)

        sequential = _run_pods(bed, [f"seq-{i}" for i in range(args.sequential)], burst=False)
        burst = _run_pods(bed, [f"burst-{i}" for i in range(args.pods)], burst=True)

    print(
        f"data-plane start-up (SB, northd, OVS, ovn-controller; {args.startups} runs): "
        f"median {statistics.median(dp_times):.2f} s (min {min(dp_times):.2f}, max "
        f"{max(dp_times):.2f}); one NB ovsdb-server alone {statistics.median(nb_times):.3f} s; "
        f"ratio {statistics.median(dp_times) / statistics.median(nb_times):.0f}x"
    )
    print()
    header = f"{'ms from pod creation to':<44}{'p50':>9}{'p99':>9}{'max':>9}"
    for title, runs in (
        (f"burst: {args.pods} pods created at once", burst),
        (f"sequential: {args.sequential} pods, one at a time", sequential),
    ):
        print(title)
        print(header)
        phases = [r.phases() for r in runs]
        print(_row("  routed (controller)", [p[0] for p in phases]))
        print(_row("  Running (wired, port bound)", [p[1] for p in phases]))
        print(_row("  first answered ping", [p[2] for p in phases]))
        print()
    b50 = harness.percentile([r.phases()[2] for r in burst], 0.5)
    s50 = harness.percentile([r.phases()[2] for r in sequential], 0.5)
    print(f"first answered ping p50, burst / sequential: {b50 / s50:.1f}x")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
