"""The command line's entry point (`kube-ovn-controller`, `python -m controller`,
`python -m cmd.controller`): parses the flags before anything heavy is imported, so `--help`,
`--version` and a bad flag answer at once, then hands over to `controller.process.main`, which
imports the Kubernetes and OVN clients and runs the controller or the `check` audit.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence

from controller.config import EXIT_USAGE, parse_args
from controller.core.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    environ = {"HOSTNAME": socket.gethostname(), **os.environ}
    try:
        parse_args(args, environ)  # --help and --version print and exit here
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from controller import process  # noqa: PLC0415 - the clients: heavy, needed from here on

    return process.main(args)
