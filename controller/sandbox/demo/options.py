"""The demo's command line: flags -> `DemoOptions` (argparse exits 2 on anything invalid)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.demo.objects import MAX_DEPLOYMENT_PODS

DEFAULT_METRICS_PORT = 10660


@dataclass(frozen=True, slots=True)
class DemoOptions:
    pods: int = 3
    metrics_port: int = DEFAULT_METRICS_PORT
    workdir: Path | None = None
    once: bool = False
    timeout: float = 90.0
    log_level: str = "info"
    dataplane: bool = True
    control_plane: str = "emulator"
    node: str = "sandbox"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m controller.sandbox.demo",
        description="Run the kube-ovn pod controller against a local sandbox (an NB "
        "ovsdb-server and the API server emulator), create demo pods and show their addresses.",
    )
    p.add_argument(
        "--pods",
        type=int,
        default=3,
        help=f"replicas of the Deployment-like set (0..{MAX_DEPLOYMENT_PODS}; "
        "the StatefulSet and the dual-stack pod come on top)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="controller /metrics port on 127.0.0.1 (0: any free port)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the sandbox files (NB database, kubeconfig, controller log) here "
        "instead of a temporary directory removed at exit",
    )
    p.add_argument(
        "--once", action="store_true", help="exit 0 once every demo pod is up (for tests and CI)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=90.0,
        help="seconds for the controller to get ready and for the pods to come up",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="the controller's log level (its log goes to <workdir>/controller.log)",
    )
    p.add_argument(
        "--no-dataplane",
        dest="dataplane",
        action="store_false",
        help="do not start the OVN data plane nor wire the pods (no connectivity "
        "matrix); without root or the OVN/OVS packages it is skipped anyway",
    )
    p.add_argument(
        "--control-plane",
        default="emulator",
        choices=("emulator", "real"),
        help="the API server emulator (instant), or the real Kubernetes control "
        "plane built by .ci/build-control-plane",
    )
    p.add_argument(
        "--node",
        default="sandbox",
        choices=("sandbox", "real"),
        help="who runs the pods: the sandbox kubelet (default), or real nodes (containerd "
        "and the kubelet built by .ci/build-control-plane; needs --control-plane real, root)",
    )
    return p


def parse_args(argv: Sequence[str]) -> DemoOptions:
    """Flags -> options; argparse exits 2 with a message on anything invalid."""
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    if not 0 <= ns.pods <= MAX_DEPLOYMENT_PODS:
        parser.error(f"--pods must be between 0 and {MAX_DEPLOYMENT_PODS}, got {ns.pods}")
    if not 0 <= ns.metrics_port <= 65535:
        parser.error(f"--metrics-port must be a TCP port (0..65535), got {ns.metrics_port}")
    if not ns.timeout > 0:
        parser.error(f"--timeout must be positive, got {ns.timeout}")
    if ns.node == "real" and (ns.control_plane != "real" or not ns.dataplane):
        parser.error("--node real needs --control-plane real and the data plane")
    return DemoOptions(
        pods=ns.pods,
        metrics_port=ns.metrics_port,
        workdir=ns.workdir,
        once=ns.once,
        timeout=ns.timeout,
        log_level=ns.log_level,
        dataplane=ns.dataplane,
        control_plane=ns.control_plane,
        node=ns.node,
    )
