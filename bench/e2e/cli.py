"""End-to-end throughput of the controller: the command line (`python bench/e2e`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

from bench.e2e.children import Emulator, real_plane, serve_emulator
from bench.e2e.clients import Throughput
from bench.e2e.report import print_paced, print_planes, print_startup, print_throughput
from bench.e2e.runs import (
    ControllerRun,
    run_controller,
    run_emulator_limit,
    run_floor,
    run_ovn_limit,
)
from bench.e2e.startup import run_startup
from controller.sandbox.processes import SandboxError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve-emulator":
        p = argparse.ArgumentParser(prog="bench/e2e serve-emulator")
        p.add_argument("--seed", type=Path)
        p.add_argument("--kubeconfig", type=Path, required=True)
        a = p.parse_args(argv[1:])
        return serve_emulator(a.seed, a.kubeconfig)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 pods, 2,000 existing")
    parser.add_argument("--pods", default="1000,5000", help="comma list of N")
    parser.add_argument("--existing", type=int, default=20_000)
    parser.add_argument(
        "--existing-routes",
        choices=("none", "v18", "policies"),
        default="none",
        help="v18: the existing pods also carry kube-ovn v1.8's src-ip routes (time the "
        "migration); policies: they carry the router policies and address-set entries",
    )
    parser.add_argument(
        "--control-plane",
        choices=("emulator", "real", "both"),
        default="emulator",
        help="the API side of the throughput runs: the emulator, the real Kubernetes control "
        "plane (needs its binaries: bash .ci/build-control-plane), or both side by side; the "
        "start-up with existing pods runs on the emulator only",
    )
    parser.add_argument("--worker-num", type=int, default=3)
    parser.add_argument(
        "--no-paced",
        dest="paced",
        action="store_false",
        help="skip the paced runs (pods at half the controller's measured maximum)",
    )
    parser.add_argument("--workdir", type=Path, help="keep logs here (default: a temp dir)")
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="profile the controller during each N run with py-spy (installed "
        "separately); collapsed stacks written to DIR/controller-N.txt",
    )
    args = parser.parse_args(argv)
    try:
        sizes = [int(x) for x in args.pods.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--pods: not a comma list of integers: {args.pods!r}")
    if args.quick:
        sizes, args.existing = [200], 2_000
    if any(n <= 0 for n in sizes) or args.existing < 0 or args.worker_num <= 0:
        parser.error("sizes and --worker-num must be positive")
    # the bench's own NB client warns about its big preload batches; that is expected here
    logging.getLogger("controller.ovn").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-e2e") as tmp:
        root = args.workdir or Path(tmp)
        print(
            f"bench/e2e: sizes {sizes}, existing {args.existing}, worker-num "
            f"{args.worker_num}, cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}; "
            f"workdir {root}",
            flush=True,
        )
        baseline = None
        emulated = args.control_plane in ("emulator", "both")
        real = args.control_plane in ("real", "both")
        for n in sizes:
            profile = args.py_spy / f"controller-{n}.txt" if args.py_spy else None
            ovn = run_ovn_limit(n, root / f"ovn-{n}", args.worker_num) if real else None
            planes: dict[str, tuple[ControllerRun, Throughput]] = {}
            if emulated:
                ctl = run_controller(n, root / f"ctl-{n}", args.worker_num, profile)
                baseline = baseline or ctl.ready_seconds
                emu = run_emulator_limit(n, root / f"emu-{n}", args.worker_num, ctl)
                ovn = ovn or run_ovn_limit(n, root / f"ovn-{n}", args.worker_num)
                floor = run_floor(n, root / f"floor-{n}", ctl)
                print_throughput(n, ctl, emu, ovn, floor=floor)
                planes["emulator"] = ctl, emu
                sys.stdout.flush()
            if real:
                assert ovn is not None
                rprofile = args.py_spy / f"controller-real-{n}.txt" if args.py_spy else None
                try:
                    ctl = run_controller(
                        n, root / f"real-ctl-{n}", args.worker_num, rprofile, real_plane
                    )
                    lim = run_emulator_limit(
                        n, root / f"real-api-{n}", args.worker_num, ctl, real_plane
                    )
                except SandboxError as e:
                    print(f"bench/e2e: real control plane: {e}", file=sys.stderr)
                    return 1
                print_throughput(n, ctl, lim, ovn, plane="real")
                planes["real"] = ctl, lim
            if len(planes) == 2:
                print_planes(n, planes["emulator"], planes["real"])
            if args.paced:
                paced = []
                for name, (run, _) in planes.items():
                    rate = run.result.to_routed / 2
                    where = real_plane if name == "real" else Emulator
                    try:
                        got = run_controller(
                            n, root / f"paced-{name}-{n}", args.worker_num, None, where, rate
                        )
                    except SandboxError as e:
                        print(f"bench/e2e: real control plane: {e}", file=sys.stderr)
                        return 1
                    paced.append((name, rate, got))
                print_paced(paced)
            sys.stdout.flush()
        if args.existing and emulated:
            profile = args.py_spy / "controller-startup.txt" if args.py_spy else None
            print_startup(
                run_startup(
                    args.existing,
                    root / "startup",
                    args.worker_num,
                    profile,
                    routes=args.existing_routes,
                ),
                baseline,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
