"""Composition root: the only module that builds concrete adapters and wires the controller.

Until the pod controller lands this only parses the command line, so `python -m cmd.controller
--help` already shows the contract the later issues fill in.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kube-ovn-controller",
        description="kube-ovn pod network controller (Python re-implementation)",
    )
    parser.add_argument(
        "--kubeconfig", default="", help="path to a kubeconfig; in-cluster if empty"
    )
    parser.add_argument("--ovn-nb-addr", default="", help="OVN northbound database remote(s)")
    parser.add_argument("--worker-num", type=int, default=3, help="workers per queue")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    build_parser().parse_args(argv)
    return 0
