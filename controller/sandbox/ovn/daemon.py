"""One OVS/OVN daemon (ovn-northd, ovs-vswitchd, ovn-controller) as a foreground child.

Its log, pid file and control socket live in the run's workdir; with `netns` it runs inside
that network namespace (`ip netns exec` execs it in place, so the pid and PDEATHSIG are the
daemon's). `stop()` sends SIGTERM and reaps it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from controller.sandbox.processes import spawn, stop_process


class Daemon:
    """One OVS/OVN daemon as our foreground child, with its pid, log and control socket."""

    def __init__(self, workdir: Path, name: str, args: Sequence[str], netns: str = "") -> None:
        self.name = name
        self.log = workdir / f"{name}.log"
        self.pidfile = workdir / f"{name}.pid"
        self.args = list(args)
        self.netns = netns
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        argv = [
            *self.args,
            f"--log-file={self.log}",
            f"--pidfile={self.pidfile}",
            "--no-chdir",
            "-vconsole:off",
            "-vfile:info",
        ]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        # `ip netns exec` execs the daemon in place: the pid (and PDEATHSIG) are the daemon's.
        self.proc = spawn(argv, env=env)
        return self.proc

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, signal.SIGTERM, timeout=10.0)
