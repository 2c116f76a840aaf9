"""The processes a run starts: the emulator child (`serve-emulator`), the real plane, the
controller.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

import harness
import urllib3

from bench.e2e.model import DEADLINE, cpu_seconds
from controller.sandbox.processes import free_tcp_ports

# --- the emulator child --------------------------------------------------------------------------


def serve_emulator(seed: Path | None, kubeconfig: Path) -> int:
    """Child mode: serve the emulator; stdin lines `counts` / `reset` answer on stdout."""
    from controller.sandbox.apiserver.server import ApiServer

    server = ApiServer(request_log_limit=1, bookmark_interval=30.0)
    if seed is not None:
        with seed.open(encoding="utf-8") as fh:
            server.store.load(json.load(fh))
    lock = threading.Lock()
    counts: Counter[str] = Counter()

    def count(rec: Any) -> None:
        sub = f"/{rec.subresource}" if rec.subresource else ""
        with lock:
            counts[f"{rec.method} {rec.resource}{sub} {rec.code}"] += 1

    server.add_request_hook(count)
    server.start()
    server.write_kubeconfig(kubeconfig)
    print(f"listening on {server.url}", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "counts":
            with lock:
                print(json.dumps(dict(counts)), flush=True)
        elif cmd == "reset":
            with lock:
                counts.clear()
            print("{}", flush=True)
        elif cmd == "quit":
            break
    server.stop()
    return 0


class ApiPlane(Protocol):
    """The API side of a run: the emulator child, or the real control plane (bench/realplane.py)."""

    name: str
    url: str
    kubeconfig: Path

    def counts(self) -> dict[str, int]: ...

    def reset(self) -> None: ...

    def cpu_seconds(self) -> float: ...

    def stop(self) -> None: ...


#: TLS of an https API URL for the bench's own pools: url -> (CA file, bearer token)
TLS_BY_URL: dict[str, tuple[str, str]] = {}


def real_plane(workdir: Path, seed: list[dict[str, Any]]) -> ApiPlane:
    """A fresh real control plane seeded like an emulator (bench/realplane.py)."""
    from bench.realplane import RealApi  # the kubernetes client: only when asked

    api = RealApi(workdir, seed)
    TLS_BY_URL[api.url] = api.tls
    return api


class Emulator:
    """The emulator child process, its URL and its request counts."""

    name = "emulator"

    def __init__(self, workdir: Path, seed: list[dict[str, Any]]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        seed_path = workdir / "seed.json"
        seed_path.write_text(json.dumps(seed), encoding="utf-8")
        self.kubeconfig = workdir / "kubeconfig"
        self._log = (workdir / "emulator.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve().parent),  # the package: its __main__
                "serve-emulator",
                "--seed",
                str(seed_path),
                "--kubeconfig",
                str(self.kubeconfig),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=harness.ROOT,
        )
        assert self.proc.stdout is not None
        line = _readline(self.proc, 120.0)
        if not line.startswith("listening on "):
            raise RuntimeError(f"emulator did not start: {line!r}; see {workdir}/emulator.log")
        self.url = line.split()[-1]

    def _ask(self, cmd: str) -> dict[str, int]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(_readline(self.proc, 30.0)))

    def counts(self) -> dict[str, int]:
        return self._ask("counts")

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)

    def reset(self) -> None:
        self._ask("reset")

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    """One stdout line of a child, or RuntimeError after `timeout` s (a wedged child)."""
    out: list[str] = []
    reader = threading.Thread(
        target=lambda: out.append(proc.stdout.readline()),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    reader.join(timeout)
    if not out:
        raise RuntimeError(f"no answer from pid {proc.pid} within {timeout}s")
    return out[0].strip()


# --- the controller subprocess -------------------------------------------------------------------


class ControllerProcess:
    """`python -m cmd.controller` against the emulator and the NB; its log in the workdir."""

    def __init__(self, workdir: Path, kubeconfig: Path, nb_remote: str, worker_num: int) -> None:
        self.port = free_tcp_ports(1)[0]
        self.log_path = workdir / "controller.log"
        argv = [
            sys.executable,
            "-m",
            "cmd.controller",
            f"--kubeconfig={kubeconfig}",
            f"--ovn-nb-addr={nb_remote}",
            "--ovn-timeout=60",
            "--metrics-addr=127.0.0.1",
            f"--metrics-port={self.port}",
            "--leader-elect=false",
            f"--worker-num={worker_num}",
            "--log-level=info",
        ]
        env = {**os.environ, "POD_NAME": "bench-controller", "KUBE_NAMESPACE": "kube-system"}
        self._log = self.log_path.open("wb")
        self.started = time.time()
        self.proc = subprocess.Popen(
            argv, cwd=harness.ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = DEADLINE) -> float:
        """Seconds from spawn to the first /readyz 200 (polled every 20 ms)."""
        http = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=1, read=5))
        url = f"http://127.0.0.1:{self.port}/readyz"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"controller exited ({self.proc.returncode}); see {self.log_path}"
                )
            try:
                if http.request("GET", url).status == 200:
                    return time.time() - self.started
            except urllib3.exceptions.HTTPError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"controller not ready within {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def log_lines(self) -> list[str]:
        return self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()


def start_py_spy(pid: int, profile: Path | None) -> subprocess.Popen[bytes] | None:
    """Sample `pid` with py-spy (a one-off `pip install py-spy`, not a dependency): collapsed
    stacks of the thread holding the GIL in `profile` (without `--gil` py-spy counts threads
    blocked in socket reads and condition waits as busy, which hides where the CPU goes), at
    BENCH_SPY_RATE samples per second (100 unless set)."""
    if profile is None:
        return None
    profile.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--rate",
            os.environ.get("BENCH_SPY_RATE", "100"),
            "--nonblocking",
            "--gil",
            "--format",
            "raw",
            "-o",
            str(profile),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy attaches asynchronously and says nothing we could wait on
    return spy


def stop_py_spy(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
