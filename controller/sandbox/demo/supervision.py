"""What the demo needs to start, watch and stop its children.

`StopFlag`: SIGINT/SIGTERM only set a flag (no step is interrupted halfway; every wait checks
it). `ControllerProcess`: `python -m cmd.controller` as the demo's child, in its own session,
dying with the demo. The loopback probes: a free port, an HTTP status, a log's tail.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from controller.runtime.metrics import port_is_free
from controller.sandbox.processes import die_with_parent

REPO_ROOT = Path(__file__).resolve().parents[3]
CONTROLLER_STOP_TIMEOUT = 15.0
POLL = 0.25  # seconds a wait may take before it looks at the stop flag again


class DemoError(RuntimeError):
    """The sandbox could not be brought up; the message says what to do about it."""


class StopFlag:
    """SIGINT/SIGTERM set a flag and nothing else: no exception ever lands in the middle of
    starting or stopping a child, and the handler takes no lock (it runs on the main thread,
    which may hold any). The wakeup fd lets `wait()` return at once when a signal arrives."""

    def __init__(self) -> None:
        self.count = 0
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._saved: dict[int, Any] = {}
        self._saved_wakeup = -1

    @property
    def requested(self) -> bool:
        return self.count > 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def install(self) -> None:
        self._saved_wakeup = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()
        signal.set_wakeup_fd(self._saved_wakeup)
        os.close(self._rfd)
        os.close(self._wfd)

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for a stop request; True when one was made."""
        if not self.requested and timeout > 0:
            with contextlib.suppress(InterruptedError):
                select.select([self._rfd], [], [], timeout)
            with contextlib.suppress(BlockingIOError):
                os.read(self._rfd, 512)
        return self.requested


class Interrupted(Exception):
    """A stop was requested during start-up; unwinding cleans up what was started."""


def metrics_port_is_free(port: int) -> bool:
    # As the controller's metrics server will bind it: TIME-WAIT leftovers of a previous run
    # (its scrapes and readiness probes) do not make the port busy.
    return port_is_free("127.0.0.1", port)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Loopback only: an http_proxy in the environment must not swallow our readiness probe.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_status(url: str, timeout: float = 1.0) -> int | None:
    try:
        with _DIRECT.open(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class ControllerProcess:
    """`python -m cmd.controller` as our child, in its own session (a terminal's Ctrl-C reaches
    only us, so we stop it in order), dying with us (PDEATHSIG)."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self) -> None:
        if not (REPO_ROOT / "cmd" / "controller.py").is_file():
            raise DemoError(
                f"cmd/controller.py not found under {REPO_ROOT}: run the demo from "
                "a checkout of this repository"
            )
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cmd.controller", *self.argv],
                cwd=REPO_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - one foreign call, no locks
            )

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, flag: StopFlag, timeout: float = CONTROLLER_STOP_TIMEOUT) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` s or at a further Ctrl-C; reaps the child."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            signals_before = flag.count
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                if flag.count > signals_before:
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(POLL)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode
