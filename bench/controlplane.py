"""Start-up time of the real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, then the CRDs), beside the API server emulator's as the baseline.

Usage: python bench/controlplane.py [--runs N]

Each run starts a fresh plane in a new temporary directory (new certificates, empty etcd), and
prints how long each phase took: certificates, each component until ready (etcd /health,
kube-apiserver /readyz, the others /healthz), the `default` ServiceAccount (kube-controller-
manager at work), the chart's and the watched CRDs until Established. The baseline is the
emulator from `ApiServer().start()` until its /version answers. Needs the binaries
(`bash .ci/build-control-plane`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.controlplane import (
    RealControlPlane,
    find_binaries,
    render_chart,
)
from controller.sandbox.processes import SandboxError

PHASES = (
    "pki",
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "default-serviceaccount",
    "crds",
    "total",
)


def one_run(manifests: list[dict[str, object]]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cpbench") as d:
        t0 = time.monotonic()
        with RealControlPlane(Path(d)) as plane:
            t = time.monotonic()
            plane.install_crds(manifests)
            times = dict(plane.startup_seconds)
            times["crds"] = time.monotonic() - t
            times["total"] = time.monotonic() - t0
        return times


def emulator_start() -> float:
    t0 = time.monotonic()
    with ApiServer() as server, urllib.request.urlopen(f"{server.url}/version", timeout=5):
        return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        binaries = find_binaries()
    except SandboxError as e:
        print(f"cannot run: {e}", file=sys.stderr)
        return 1
    print(f"binaries: {binaries.dir}")
    manifests = render_chart()
    runs = []
    for i in range(args.runs):
        try:
            runs.append(one_run(manifests))
        except SandboxError as e:
            print(f"run {i + 1} failed: {e}", file=sys.stderr)
            return 1
    baseline = statistics.median(emulator_start() for _ in range(args.runs))
    print(f"{'phase':<26}{'median s':>10}{'min s':>8}{'max s':>8}")
    for phase in PHASES:
        values = [r[phase] for r in runs if phase in r]
        if values:
            print(
                f"{phase:<26}{statistics.median(values):>10.2f}"
                f"{min(values):>8.2f}{max(values):>8.2f}"
            )
    total = statistics.median(r["total"] for r in runs)
    print(f"{'emulator start (baseline)':<26}{baseline:>10.3f}")
    print(f"real plane / emulator: {total / baseline:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
