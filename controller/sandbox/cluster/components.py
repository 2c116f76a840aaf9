"""One control-plane process (`Component`): started with fixed flags as a foreground child that
dies with the test run, its output appended to its log, ready once its probe passes, stopped by
pid. `http_probe` is the readiness check the components use (`/health`, `/readyz`, `/healthz`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from controller.sandbox.processes import SandboxError, die_with_parent, stop_process

LOG = logging.getLogger(__name__)


# PDEATHSIG fires when the *thread* that forked the child ends, not the process. Every child is
# forked by this one long-lived worker, so a component started (or restarted) from a short-lived
# thread, as a fault test may do, is not killed when that thread ends.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="cp-spawn")

Probe = Callable[[], "str | None"]


class Component:
    """One control-plane process: started with fixed flags, its output appended to its log."""

    def __init__(
        self, name: str, argv: Sequence[str], log: Path, probe: Probe, ready_timeout: float
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._probe = probe
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, wait: bool = True) -> None:
        """Start the process (no-op if it runs) and, with `wait`, wait until it is ready."""
        if self.running:
            return
        self._close_log()
        self.starts += 1
        fh = self.log.open("ab")
        fh.write(f"==== start {self.starts}: {' '.join(self.argv)}\n".encode())
        fh.flush()
        self._log_fh = fh
        try:
            self.proc = _SPAWNER.submit(
                subprocess.Popen,
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                # One foreign call between fork and exec, no locks (see die_with_parent).
                preexec_fn=die_with_parent(),
            ).result()
        except OSError as e:
            self._close_log()
            raise SandboxError(f"{self.name} could not be started ({self.argv[0]}): {e}") from e
        LOG.debug("%s pid %s", self.name, self.proc.pid)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll the readiness probe until it passes; raise `SandboxError` at the deadline."""
        limit = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        reason: str | None = "not probed"
        while True:
            if self.proc is None:
                raise SandboxError(f"{self.name} is not started")
            code = self.proc.poll()
            if code is not None:
                raise SandboxError(
                    f"{self.name} exited with code {code} before it was ready; "
                    f"log: {self.log}\n{self.log_tail()}"
                )
            reason = self._probe()
            if reason is None:
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"{self.name} not ready after {limit:.0f}s ({reason}); "
                    f"log: {self.log}\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 15.0) -> None:
        """Signal the process and reap it (SIGKILL after `timeout`)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, sig, timeout)
        self._close_log()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self, *, kill: bool = True, wait: bool = True) -> None:
        """SIGKILL (or, with `kill=False`, SIGTERM) and start again with the same flags."""
        self.stop(signal.SIGKILL if kill else signal.SIGTERM)
        self.start(wait=wait)

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _close_log(self) -> None:
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None


def http_probe(url: str, context: ssl.SSLContext | None, expect: Callable[[bytes], bool]) -> Probe:
    def probe() -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                body: bytes = resp.read()
        except urllib.error.HTTPError as e:
            return f"{url} answered {e.code}: {e.read()[:300].decode(errors='replace')}"
        except (OSError, ssl.SSLError) as e:
            return f"{url}: {e}"
        return None if expect(body) else f"{url} answered {body[:300]!r}"

    return probe
