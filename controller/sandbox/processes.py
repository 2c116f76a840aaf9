"""Process helpers every sandbox daemon shares: children that die with us, readiness, reaping.

* `spawn` starts a foreground child with PDEATHSIG, so a crashed test or demo leaves no daemon.
* `wait_ready` polls a readiness check until a deadline, failing early when the child exits.
* `stop_process` signals and reaps a child, with SIGKILL after a deadline.
* `run_tool` runs a command-line tool with a deadline; `free_tcp_ports` and `can_connect_unix`
  find ports and probe sockets.
* `Service` is the shape every launcher has: `start()` returns the started part, `stop()` ends it,
  and `with part:` does both.

Every failure or expired wait raises `SandboxError`. The sandbox's subpackages (the emulator's
neighbours: the real control plane, the NB servers, the OVN data plane) all build on this module,
so it sits below them and imports nothing from the sandbox.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self

_PR_SET_PDEATHSIG = 1


class SandboxError(RuntimeError):
    """A sandbox server could not be created, started, stopped or queried in time."""


class Service(ABC):
    """A part of the test bed that runs between `start()` and `stop()`; a context manager."""

    @abstractmethod
    def start(self) -> Self:
        """Start the part and return it once it serves."""

    @abstractmethod
    def stop(self) -> None:
        """Stop everything the part started."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` that has the kernel SIGKILL the child when its parent dies."""
    # Loaded here, in the parent: the child (between fork and exec, other threads frozen
    # mid-flight) only makes one foreign call and never takes the dynamic loader's lock.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return preexec


def spawn(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stderr: int = subprocess.DEVNULL,
) -> subprocess.Popen[bytes]:
    """Start `args` as a foreground child that the kernel kills when this process dies."""
    return subprocess.Popen(
        list(args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=None if env is None else dict(env),
        preexec_fn=die_with_parent(),  # noqa: PLW1509 - one foreign call, no locks
    )


def log_tail(log: Path, size: int = 2000) -> str:
    try:
        return log.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"


def wait_ready(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    timeout: float,
    what: str,
    log: Path,
) -> None:
    """Poll `ready` until it holds; `SandboxError` when `proc` exits or `timeout` expires."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise SandboxError(f"{what} exited ({proc.returncode}): {log_tail(log)}")
        if time.monotonic() > deadline:
            raise SandboxError(f"{what} not ready after {timeout:.1f}s: {log_tail(log, 500)}")
        time.sleep(0.002)


def stop_process(
    proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM, timeout: float = 10.0
) -> None:
    """Signal our child `proc` and reap it (SIGKILL when it outlives `timeout`)."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    if proc.stderr is not None:
        proc.stderr.close()


def run_tool(args: Sequence[str], timeout: float = 10.0) -> str:
    try:
        out = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise SandboxError(f"{args[0]} timed out after {timeout}s") from e
    if out.returncode != 0:
        raise SandboxError(f"{' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def can_connect_unix(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def free_tcp_ports(n: int) -> list[int]:
    """Ports the kernel picked as free on 127.0.0.1 (for Raft, which cannot listen on port 0)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/<pid>/stat), None when it is gone:
    with the pid it names one process for good (a pid alone may be reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def owner_record() -> str:
    """The line naming this process as the owner of a run: `<pid> <start time>`."""
    return f"{os.getpid()} {process_start_time(os.getpid())}\n"


def owner_alive(record: Path) -> bool:
    """Is the process an `owner_record()` in `record` names still running (a missing or garbled
    record: no)?"""
    try:
        pid_text, start = record.read_text().split()[:2]
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    return process_start_time(pid) == start
