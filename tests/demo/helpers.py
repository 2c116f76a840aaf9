"""Runs `python -m controller.sandbox.demo` as a subprocess and reads its output with deadlines."""

from __future__ import annotations

import ipaddress
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 90.0  # a whole demo run; pods come up in well under a second on an idle machine

NB_LINE = re.compile(r"^NB ovsdb-server ready at \S+ \(pid (\d+)\)")
CONTROLLER_LINE = re.compile(r"^controller started \(pid (\d+),")
WORKDIR_LINE = re.compile(r"workdir (\S+)$")
METRICS_LINE = re.compile(r"^metrics: (http://\S+/metrics)$")
SERVING_LINE = re.compile(r"^serving until Ctrl-C")


@dataclass(frozen=True)
class Row:
    pod: str
    ips: tuple[str, ...]
    mac: str
    lsp: str
    switch: str
    node: str
    routed: str


def parse_rows(lines: list[str]) -> dict[str, Row]:
    """The table rows, by namespace/name (the header line starts with POD)."""
    rows: dict[str, Row] = {}
    in_table = False
    for line in lines:
        if line.startswith("POD "):
            in_table = True
            continue
        if in_table:
            cells = line.split()
            if len(cells) != 8:
                break
            pod, ips, mac, lsp, switch, node, routed, _ = cells
            rows[pod] = Row(pod, tuple(ips.split(",")), mac, lsp, switch, node, routed)
    return rows


def in_net(ip: str, cidr: str) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


def process_alive(pid: int, needle: bytes) -> bool:
    """True when `pid` is still a live process running `needle` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return needle in cmdline and state != "Z"


@dataclass
class DemoRun:
    """One demo subprocess; stdout and stderr merged, read line by line by a thread."""

    args: list[str]
    proc: subprocess.Popen[str] = field(init=False)
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _reader: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controller.sandbox.demo", *self.args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_line(self, pattern: re.Pattern[str], timeout: float = DEADLINE) -> re.Match[str]:
        """The first new line matching `pattern`; fails at EOF or after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"no line matching {pattern.pattern!r} within {timeout}s:\n" + self.output()
                )
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self._queue.put(None)
                raise AssertionError(
                    f"demo ended before a line matching {pattern.pattern!r}:\n" + self.output()
                )
            self.lines.append(line)
            match = pattern.search(line)
            if match:
                return match

    def finish(self, timeout: float = DEADLINE) -> int:
        """Wait for the exit and collect the rest of the output."""
        code = self.proc.wait(timeout)
        while True:
            line = self._queue.get(timeout=10)
            if line is None:
                self._queue.put(None)
                return code
            self.lines.append(line)

    def interrupt(self, sig: signal.Signals = signal.SIGINT, *, group: bool = False) -> None:
        """Signal the demo; `group=True` signals its whole process group, as a terminal's
        Ctrl-C does (the NB ovsdb-server is in it; the controller has its own session)."""
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)

    def output(self) -> str:
        return "\n".join(self.lines)

    def first(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        for line in self.lines:
            match = pattern.search(line)
            if match:
                return match
        return None

    def kill(self) -> None:
        """Teardown: SIGKILL when still running (its children die with it: PDEATHSIG)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)
        if self.proc.stdout is not None and not self._reader.is_alive():
            self.proc.stdout.close()
