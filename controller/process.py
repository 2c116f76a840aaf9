"""The controller process: flags, logging, signals and exit codes around a `Controller`.

`main(argv)` is `python -m cmd.controller` / `kube-ovn-controller` (through `controller.cli`):
parse the flags (a bad one prints "error: ..." and exits 2), set up logging, then run a
`controller.app.Controller` until SIGTERM/SIGINT (exit 0, the lease handed back) or until the
leadership is lost or start-up fails (exit 1). `kube-ovn-controller check` audits the cluster
once instead (`controller.audit.check.run_check`). `run_controller(argv, environ)` parses and
starts one `Controller` in this process (tests, the sandbox).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from controller.apiclient.errors import KubeApiError, KubeConfigError
from controller.app import EXIT_FAILURE, Controller
from controller.audit.check import run_check
from controller.config import COMMAND_CHECK, EXIT_USAGE, parse_args
from controller.core.errors import ConfigError
from controller.ovn.api import OvnError
from controller.runtime import pygc
from controller.runtime.log import LogOutputs, setup_logging
from controller.runtime.startup import StartupError

LOG = logging.getLogger(__name__)


def run_controller(
    argv: Sequence[str], environ: Mapping[str, str] | None = None, **kwargs: Any
) -> Controller:
    """Parse `argv` (ConfigError on bad flags) and start a `Controller` in this process."""
    config = parse_args(list(argv), os.environ if environ is None else environ)
    return Controller(config, **kwargs).start()


def _log_level_given(args: Sequence[str]) -> bool:
    """Did the command line choose a log level (`--log-level`, `-v` / `--v`)?"""
    return any(arg.split("=", 1)[0] in ("--log-level", "--v") for arg in args)


def main(argv: Sequence[str] | None = None) -> int:
    pygc.tune()
    args = list(sys.argv[1:] if argv is None else argv)
    # The leader-election identity is POD_NAME, else the host name (a pod's is its name).
    environ = {"HOSTNAME": socket.gethostname(), **os.environ}
    try:
        config = parse_args(args, environ)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    level = config.log_level
    if config.command == COMMAND_CHECK and not _log_level_given(args):
        # check's output is its report: the connection chatter waits for -v / --log-level
        level = "warning"
    try:
        setup_logging(
            level,
            config.log_format,
            outputs=LogOutputs(
                logtostderr=config.logtostderr,
                alsologtostderr=config.alsologtostderr,
                log_file=config.log_file,
                log_dir=config.log_dir,
                log_file_max_size=config.log_file_max_size,
                stderrthreshold=config.stderrthreshold,
            ),
            skip_headers=config.skip_headers,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if config.command == COMMAND_CHECK:
        return run_check(config, strict=config.strict)
    LOG.info("kube-ovn-controller starting on %s", socket.gethostname())
    controller = Controller(config, load_scope=pygc.loading)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        LOG.info("received %s, shutting down", signal.Signals(signum).name)
        threading.Thread(target=controller.stop, name="stop-signal", daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            controller.start()
        except (StartupError, KubeConfigError, KubeApiError, OvnError, OSError, ValueError) as exc:
            # One line where the operator looks: the log too only when it is not on stderr.
            print(f"error: {exc}", file=sys.stderr)
            if not config.logtostderr:
                LOG.error("start-up failed: %s", exc)
            return EXIT_FAILURE
        while True:
            code = controller.wait(1.0)
            if code is not None:
                return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
