"""End-to-end throughput of the controller: pods created in the emulator, a real ovsdb-server.

Usage, from the repo root: `python bench/e2e.py [--quick] [--pods 1000,5000] [--existing 20000]
[--worker-num 3] [--control-plane emulator|real|both] [--workdir DIR] [--py-spy DIR]`
(`--quick`: 200 pods, 2,000 existing, ~20 s; `--workdir` keeps the controller and emulator
logs; `--py-spy` samples the controller, see `_py_spy`).

What runs where (each in its own process, so their CPU and memory are measured apart and no two
of them share a GIL):

* the OVN NB database: a throwaway `ovsdb-server` (`controller.sandbox.ovn.ovsdb.NbServer`);
* the API server emulator: a child process of this script (`python bench/e2e.py
  serve-emulator`), seeded in-process from a JSON file and counting the requests it serves by
  (method, resource, subresource) on demand (a line protocol on its stdin). NOT in the bench
  process: the bench's creating threads and its watch parser would otherwise take the GIL from
  the server and the figures would be the bench's, not the emulator's;
* the controller: `python -m cmd.controller` from the repo root (as tests/e2e runs it), leader
  election off, its log in the work directory; CPU from /proc/<pid>/stat, memory from
  /proc/<pid>/status (VmRSS, VmHWM);
* this process: a few threads POSTing pods (with spec.nodeName: no scheduler) and one pod watch
  that timestamps, on receipt, when each pod first shows `allocated` and `routed`.

For each N (default 1,000 and 5,000), three measurements in the same run:

1. the controller: pods/s to allocated and to routed (N / time from the first POST to the last
   pod allocated or routed), p50/p99 per-pod latency from its POST to the annotation on the watch,
   controller CPU seconds and memory, emulator CPU;
2. the emulator limit: a fresh emulator, the same pod POSTs, and the API calls the controller made
   per pod (counted in run 1 from the emulator's request log: IP GETs/POSTs, pod PATCHes, Events)
   replayed by worker threads of this process with the same worker count, with a pod watch and an
   IP watch open as the controller's informers have; no OVN;
3. the OVN limit: a fresh NB database and the controller's NB calls per pod (create_port, then
   the routing policies (free once they exist), the pod's address-set entry, the two
   update_nat_rule calls of a pod without EIP/SNAT and the src-ip route removal) through
   `OvsdbappNbClient` from two pools of worker threads (add, update), no API.

The table prints the figures, the limits and the ratios controller / limit, and what the
limits' own client threads spent per pod (the same calls at the same concurrency, nothing else).
Then the floor: the bare libraries doing a pod's writes from one thread in a process of their
own (`run_floor`, at most 1,000 pods): urllib3 (the kubernetes client's transport) POSTing the
IP CR and PATCHing the pod against a fresh emulator, and ovsdbapp's own NB API committing
lsp_add, its addresses and the address-set entry as one transaction; no controller on these
libraries can spend less CPU per pod than their sum.

Then start-up with E existing pods (default 20,000): the emulator seeded with E allocated and
routed pods and their IP CRs, the NB with the router, the switches and E ports (in batches);
the controller is started and timed until /readyz answers 200, with its RSS then and its peak,
(with `--existing-routes=v18` the NB also holds every pod's v1.8 src-ip route, and the time
from /readyz until the controller has replaced the last of them is printed too),
and the phases read from its log: process start to leading (imports, NB connection and initial
sync), informer sync and bootstrap, IPAM rebuild ("take X seconds to initialize IPAM"), start-up
gc, workers. An empty cluster's start-up (from run 1) is printed beside it as the baseline.

With `--control-plane real` the throughput runs (1 and 2) go to the real Kubernetes control plane
instead (bench/realplane.py: a fresh etcd, kube-apiserver, kube-controller-manager and
kube-scheduler per run, the chart's CRDs and RBAC, the controller as its ServiceAccount, the
nodes registered Ready by the sandbox kubelet), the per-pod requests read from kube-apiserver's
audit log and the API limit replayed against kube-apiserver; with `both` each N runs on both
planes and a table puts them side by side. The start-up with existing pods stays on the
emulator. The real plane needs its binaries (`bash .ci/build-control-plane`).

The machine may be shared: figures vary by run; compare ratios from the same run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import harness
import urllib3
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
from ovsdbapp.schema.ovn_northbound.impl_idl import OvnNbApiIdlImpl

from bench.routing import seed_routes
from controller.core import router_policy as rp
from controller.core.annotations import PodNetworkAnnotations, apply_allocation
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    POLICY_SRC_IP,
    ROUTED_ANNOTATION,
)
from controller.ovn.api import PortSpec
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod_logic import build_ip_cr
from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.processes import SandboxError, free_tcp_ports
from tests.e2e.helpers import node as node_obj
from tests.e2e.helpers import pod as pod_obj

NS = "bench"
NODES = 4
CIDR = "10.16.0.0/16"
GATEWAY = "10.16.0.1"
ROUTER = "ovn-cluster"
SWITCH = "ovn-default"
JOIN = "join"
JOIN_CIDR = "100.64.0.0/16"
JOIN_GATEWAY = "100.64.0.1"
CREATORS = 4
REAL_NAME = "kube-apiserver+etcd"  # bench/realplane.py RealApi.name
DEADLINE = 600.0  # seconds, the bound of every wait of a run
FLOOR_PODS = 1000  # enough for a stable per-pod figure
CLIENT_CPU = "replay client CPU ms/pod"  # the limits' own client threads, see the runs
CLK_TCK = os.sysconf("SC_CLK_TCK")
LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z")


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
_TLS: dict[str, tuple[str, str]] = {}


def real_plane(workdir: Path, seed: list[dict[str, Any]]) -> ApiPlane:
    """A fresh real control plane seeded like an emulator (bench/realplane.py)."""
    from bench.realplane import RealApi  # the kubernetes client: only when asked

    api = RealApi(workdir, seed)
    _TLS[api.url] = api.tls
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
                str(Path(__file__).resolve()),
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


# --- process accounting --------------------------------------------------------------------------


def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process (all its threads) in seconds, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB, from /proc/<pid>/status."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


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


def _py_spy(pid: int, profile: Path | None) -> subprocess.Popen[bytes] | None:
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


def _py_spy_stop(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


# --- objects -------------------------------------------------------------------------------------


def nodes() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Node", **node_obj(f"node-{i}", f"172.18.0.{i + 2}")}
        for i in range(NODES)
    ]


def base_seed() -> list[dict[str, Any]]:
    # kube-system and default exist in a new emulator store
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, *nodes()]


def pod_ip(i: int) -> str:
    n = i + 2  # .0 is the network, .1 the gateway
    return f"10.16.{n >> 8}.{n & 255}"


def pod_mac(i: int) -> str:
    return f"00:00:00:{(i >> 16) & 255:02X}:{(i >> 8) & 255:02X}:{i & 255:02X}"


def port_spec(name: str, i: int) -> PortSpec:
    return PortSpec(
        name=f"{name}.{NS}",
        switch=SWITCH,
        mac=pod_mac(i),
        ips=(pod_ip(i),),
        cidrs=(CIDR,),
        pod_name=name,
        pod_namespace=NS,
    )


def existing_pod(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """An allocated and routed pod, and its IP CR, as the controller would have left them."""
    name = f"old-{i:06d}"
    allocation = PodNetworkAnnotations(
        ip_address=pod_ip(i),
        mac_address=pod_mac(i),
        cidr=CIDR,
        gateway=GATEWAY,
        logical_switch=SWITCH,
        network_type="geneve",
    )
    annotations = apply_allocation({}, allocation, pod_nic_type="veth-pair")
    annotations[ROUTED_ANNOTATION] = "true"
    node_name = f"node-{i % NODES}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        **pod_obj(name, NS, annotations=annotations, node_name=node_name),
    }
    ip_cr = build_ip_cr(
        pod_name=name,
        ip=pod_ip(i),
        mac=pod_mac(i),
        subnet=SWITCH,
        namespace=NS,
        node_name=node_name,
        provider="ovn",
        pod_type="",
        node_switch=JOIN,
    )
    return pod, ip_cr


# --- the bench's HTTP side -----------------------------------------------------------------------


class _TokenPool(urllib3.HTTPSConnectionPool):
    """An https pool whose every request carries its bearer token (a request's own headers
    replace a pool's in urllib3)."""

    def urlopen(self, method: str, url: str, *args: Any, **kw: Any) -> Any:
        kw["headers"] = {**self.headers, **(kw.get("headers") or {})}
        return super().urlopen(method, url, *args, **kw)


def _pool(url: str, maxsize: int = 1) -> urllib3.HTTPConnectionPool:
    if url in _TLS:
        ca, token = _TLS[url]
        host, port = url.removeprefix("https://").split(":")
        return _TokenPool(
            host,
            int(port),
            maxsize=maxsize,
            retries=False,
            timeout=urllib3.Timeout(connect=5, read=60),
            headers={"Authorization": f"Bearer {token}"},
            cert_reqs="CERT_REQUIRED",
            ca_certs=ca,
        )
    host, port = url.removeprefix("http://").split(":")
    return urllib3.HTTPConnectionPool(
        host,
        int(port),
        maxsize=maxsize,
        retries=False,
        timeout=urllib3.Timeout(connect=5, read=60),
        headers={"Authorization": "Bearer bench"},
    )


def _stream_lines(resp: Any) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(65536):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line


class PodWatch(threading.Thread):
    """Watches the bench namespace; receipt times of ADDED, allocated and routed per pod."""

    def __init__(
        self, url: str, expected: int, on_added: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(name="bench-watch", daemon=True)
        self.url = url
        self.expected = expected
        self.on_added = on_added
        self.added: dict[str, float] = {}
        self.allocated: dict[str, float] = {}
        self.routed: dict[str, float] = {}
        self.done = threading.Event()
        self.opened = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            pool = _pool(self.url)
            listed = json.loads(pool.request("GET", f"/api/v1/namespaces/{NS}/pods?limit=1").data)
            rv = listed["metadata"]["resourceVersion"]
            resp = pool.request(
                "GET",
                f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}",
                preload_content=False,
                timeout=urllib3.Timeout(connect=5, read=None),
            )
            self.opened.set()
            for line in _stream_lines(resp):
                self._event(json.loads(line), time.monotonic())
                if len(self.routed) >= self.expected:
                    self.done.set()
        except BaseException as exc:  # reported by the waiter, never lost in a thread
            if not self.done.is_set():
                self.error = exc
        finally:
            self.opened.set()
            self.done.set()

    def _event(self, event: dict[str, Any], now: float) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if event.get("type") == "ADDED" and name not in self.added:
            self.added[name] = now
            if self.on_added is not None:
                self.on_added(name)
        annotations = meta.get("annotations") or {}
        if annotations.get(ALLOCATED_ANNOTATION) == "true":
            self.allocated.setdefault(name, now)
        if annotations.get(ROUTED_ANNOTATION) == "true":
            self.routed.setdefault(name, now)

    def close(self) -> None:
        # NOTE: closing the response from here blocks on the reader's buffer lock; the stream
        # ends (and the thread with it) when the emulator stops.
        self.done.set()

    def wait(self, timeout: float = DEADLINE) -> None:
        if not self.done.wait(timeout):
            raise RuntimeError(f"only {len(self.routed)}/{self.expected} pods routed in {timeout}s")
        if self.error is not None:
            raise RuntimeError(f"pod watch failed: {self.error!r}")
        if len(self.routed) < self.expected:
            raise RuntimeError(f"pod watch ended after {len(self.routed)}/{self.expected} routed")


class RawWatch(threading.Thread):
    """An informer-like watch that reads and discards (the fan-out cost on the server)."""

    def __init__(self, url: str, path: str) -> None:
        super().__init__(name=f"raw-watch{path}", daemon=True)
        self.url, self.path = url, path
        self.stop = threading.Event()

    def run(self) -> None:
        pool = _pool(self.url)
        try:
            resp = pool.request(
                "GET",
                f"{self.path}?watch=true&resourceVersion=0",
                preload_content=False,
                timeout=urllib3.Timeout(connect=5, read=2),
            )
            while not self.stop.is_set():
                try:
                    if not resp.read(65536):
                        return
                except urllib3.exceptions.ReadTimeoutError:
                    continue
        except urllib3.exceptions.HTTPError:
            return


def create_pods(
    url: str, names: list[str], sent: dict[str, float], rate: float | None = None
) -> None:
    """POST the pods from CREATORS threads; `sent[name]` = monotonic time just before the POST.

    With `rate` (pods/s) pod i is POSTed at start + i / rate, not earlier (a steady arrival
    rate, as a deployment scaling up would make): the latency then is the controller's own, not
    the time a pod waited behind a burst."""
    work: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
    for item in enumerate(names):
        work.put(item)
    errors: list[str] = []
    start = time.monotonic() + 0.1

    def creator() -> None:
        pool = _pool(url)
        while True:
            try:
                i, name = work.get_nowait()
            except queue.Empty:
                return
            body = json.dumps(pod_obj(name, NS, node_name=f"node-{i % NODES}")).encode()
            if rate is not None:
                # pacing a load generator is what this wait is for (not synchronisation)
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
            sent[name] = time.monotonic()
            resp = pool.request(
                "POST",
                f"/api/v1/namespaces/{NS}/pods",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            if resp.status != 201:
                errors.append(f"{name}: {resp.status} {resp.data[:200]!r}")

    threads = [threading.Thread(target=creator, daemon=True) for _ in range(CREATORS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} pod creates failed, first: {errors[0]}")


# --- results -------------------------------------------------------------------------------------


@dataclass
class Throughput:
    n: int
    to_allocated: float  # pods/s
    to_routed: float
    p50_allocated: float  # seconds
    p99_allocated: float
    p50_routed: float
    p99_routed: float
    wall: float  # first POST to last routed
    extra: dict[str, float] = field(default_factory=dict)


def throughput(sent: dict[str, float], watch: PodWatch) -> Throughput:
    start = min(sent.values())
    alloc = [watch.allocated[n] - sent[n] for n in sent]
    routed = [watch.routed[n] - sent[n] for n in sent]
    t_alloc = max(watch.allocated[n] for n in sent) - start
    t_routed = max(watch.routed[n] for n in sent) - start
    n = len(sent)
    return Throughput(
        n,
        n / t_alloc,
        n / t_routed,
        harness.percentile(alloc, 0.5),
        harness.percentile(alloc, 0.99),
        harness.percentile(routed, 0.5),
        harness.percentile(routed, 0.99),
        t_routed,
    )


# --- 1. the controller ---------------------------------------------------------------------------


@dataclass
class ControllerRun:
    result: Throughput
    per_pod: dict[str, float]  # API requests per pod, by "METHOD resource[/sub] code"
    ready_seconds: float
    ready_rss: float
    ip_template: dict[str, Any]
    alloc_patch: dict[str, Any]


def run_controller(
    n: int,
    workdir: Path,
    worker_num: int,
    profile: Path | None = None,
    plane: Callable[[Path, list[dict[str, Any]]], ApiPlane] = Emulator,
    rate: float | None = None,
) -> ControllerRun:
    """The controller's run for `n` pods, POSTed in a burst or at `rate` pods/s."""
    nb = NbServer(workdir / "nb").start()
    try:
        emulator = plane(workdir / "api", base_seed())
    except BaseException:
        nb.stop()
        raise
    controller = ControllerProcess(workdir, emulator.kubeconfig, nb.remote, worker_num)
    try:
        ready = controller.wait_ready()
        ready_rss = memory_mib(controller.pid)[0]
        names = [f"pod-{i:06d}" for i in range(n)]
        watch = PodWatch(emulator.url, n)
        watch.start()
        watch.opened.wait(30)
        emulator.reset()
        spy = _py_spy(controller.pid, profile)
        (user0, sys0), emu0 = cpu_times(controller.pid), emulator.cpu_seconds()
        sent: dict[str, float] = {}
        create_pods(emulator.url, names, sent, rate)
        watch.wait()
        _py_spy_stop(spy)
        user1, sys1 = cpu_times(controller.pid)
        cpu = user1 + sys1 - user0 - sys0
        emu_cpu = emulator.cpu_seconds() - emu0
        rss, hwm = memory_mib(controller.pid)
        counts = emulator.counts()
        watch.close()
        result = throughput(sent, watch)
        result.extra.update(
            {
                "controller CPU s": cpu,
                "controller CPU ms/pod": 1000 * cpu / n,
                "  of which system (kernel) ms/pod": 1000 * (sys1 - sys0) / n,
                "controller CPU % of wall": 100 * cpu / result.wall,
                "controller RSS MiB": rss,
                "controller peak RSS MiB": hwm,
                f"{emulator.name} CPU ms/pod": 1000 * emu_cpu / n,
            }
        )
        # The bench's own requests are not the controller's: its POSTs and its watch.
        counts["POST pods 201"] = counts.get("POST pods 201", 0) - n
        per_pod = {k: v / n for k, v in sorted(counts.items()) if v > 0}
        pool = _pool(emulator.url)
        sample = json.loads(pool.request("GET", f"/api/v1/namespaces/{NS}/pods/{names[0]}").data)
        alloc_patch = {
            k: v for k, v in sample["metadata"]["annotations"].items() if k != ROUTED_ANNOTATION
        }
        ips = json.loads(pool.request("GET", "/apis/kubeovn.io/v1/ips?limit=1").data)
        return ControllerRun(
            result,
            per_pod,
            ready,
            ready_rss,
            ips["items"][0],
            {"metadata": {"annotations": alloc_patch}},
        )
    finally:
        controller.stop()
        emulator.stop()
        nb.stop()


# --- 2. the emulator limit -----------------------------------------------------------------------

REPLAYED = (
    "GET ips 404",
    "GET ips 200",
    "POST ips 201",
    "PUT ips 200",
    "PATCH pods 200",
    "POST events 201",
    "PATCH events 200",
)


def _spread(rate: float, i: int) -> int:
    """How many of a call with `rate` per pod pod i makes, so that N pods make N * rate."""
    return int((i + 1) * rate) - int(i * rate)


def replay_ip(ctl: ControllerRun, name: str) -> dict[str, Any]:
    """The IP CR the controller wrote (its run's sample), for pod `name`."""
    body: dict[str, Any] = json.loads(json.dumps(ctl.ip_template))
    body["metadata"] = {"name": f"{name}.{NS}", "labels": body["metadata"].get("labels", {})}
    body["spec"]["podName"] = name
    return body


def run_emulator_limit(
    n: int,
    workdir: Path,
    worker_num: int,
    ctl: ControllerRun,
    plane: Callable[[Path, list[dict[str, Any]]], ApiPlane] = Emulator,
) -> Throughput:
    emulator = plane(workdir / "api-limit", base_seed())
    rates = {k: v for k, v in ctl.per_pod.items() if k in REPLAYED}
    pod_patches = rates.pop("PATCH pods 200", 2.0)
    index: dict[str, int] = {}
    add_q: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    update_q: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    errors: list[str] = []

    def on_added(name: str) -> None:
        add_q.put(name)

    def call(
        pool: urllib3.HTTPConnectionPool,
        method: str,
        path: str,
        body: Any,
        ctype: str = "application/json",
    ) -> None:
        data = None if body is None else json.dumps(body).encode()
        resp = pool.request(method, path, body=data, headers={"Content-Type": ctype})
        if resp.status >= 500:
            errors.append(f"{method} {path}: {resp.status}")

    def event_body(name: str) -> dict[str, Any]:
        return {
            "metadata": {"generateName": f"{name}."},
            "reason": "Bench",
            "message": "replay",
            "type": "Normal",
            "involvedObject": {"kind": "Pod", "namespace": NS, "name": name},
        }

    # the replaying threads' own CPU: what the same requests cost a client through urllib3
    # alone (no watch decoding, no logic), the floor under the controller's API side
    client_cpu: dict[int, float] = {}

    def add_worker() -> None:
        pool = _pool(emulator.url)
        pods_path = f"/api/v1/namespaces/{NS}/pods"
        cpu0 = time.thread_time()
        while (name := add_q.get()) is not None:
            i = index.setdefault(name, len(index))
            ip_path = f"/apis/kubeovn.io/v1/ips/{name}.{NS}"
            for key, rate in rates.items():
                for _ in range(_spread(rate, i)):
                    method, resource, _code = key.split()
                    if resource == "ips" and method == "GET":
                        call(pool, "GET", ip_path, None)
                    elif resource == "ips" and method == "POST":
                        call(pool, "POST", "/apis/kubeovn.io/v1/ips", replay_ip(ctl, name))
                    elif resource == "ips":
                        call(pool, "PUT", ip_path, replay_ip(ctl, name))
                    elif method == "POST":
                        call(pool, "POST", f"/api/v1/namespaces/{NS}/events", event_body(name))
            # all pod PATCHes but the last carry the allocation; the last one is `routed`
            for _ in range(max(1, _spread(pod_patches, i) - 1)):
                call(
                    pool,
                    "PATCH",
                    f"{pods_path}/{name}",
                    ctl.alloc_patch,
                    "application/merge-patch+json",
                )
            update_q.put(name)
            client_cpu[threading.get_ident()] = time.thread_time() - cpu0

    def update_worker() -> None:
        pool = _pool(emulator.url)
        body = {"metadata": {"annotations": {ROUTED_ANNOTATION: "true"}}}
        cpu0 = time.thread_time()
        while (name := update_q.get()) is not None:
            call(
                pool,
                "PATCH",
                f"/api/v1/namespaces/{NS}/pods/{name}",
                body,
                "application/merge-patch+json",
            )
            client_cpu[threading.get_ident()] = time.thread_time() - cpu0

    informers = [
        RawWatch(emulator.url, "/api/v1/pods"),
        RawWatch(emulator.url, "/apis/kubeovn.io/v1/ips"),
    ]
    for w in informers:
        w.start()
    workers = [threading.Thread(target=add_worker, daemon=True) for _ in range(worker_num)]
    workers += [threading.Thread(target=update_worker, daemon=True) for _ in range(worker_num)]
    try:
        for worker in workers:
            worker.start()
        names = [f"pod-{i:06d}" for i in range(n)]
        watch = PodWatch(emulator.url, n, on_added)
        watch.start()
        watch.opened.wait(30)
        emu0 = emulator.cpu_seconds()
        sent: dict[str, float] = {}
        create_pods(emulator.url, names, sent)
        watch.wait()
        emu_cpu = emulator.cpu_seconds() - emu0
        watch.close()
        if errors:
            raise RuntimeError(f"{len(errors)} replayed calls failed, first: {errors[0]}")
        result = throughput(sent, watch)
        result.extra[f"{emulator.name} CPU ms/pod"] = 1000 * emu_cpu / n
        result.extra[CLIENT_CPU] = 1000 * sum(client_cpu.values()) / n
        return result
    finally:
        for _ in range(worker_num):
            add_q.put(None)
            update_q.put(None)
        for w in informers:
            w.stop.set()
        emulator.stop()


# --- 3. the OVN limit ----------------------------------------------------------------------------


def _ensure_topology(client: OvsdbappNbClient) -> None:
    client.ensure_logical_router(ROUTER)
    client.ensure_logical_switch(JOIN, ROUTER, JOIN_CIDR, JOIN_GATEWAY, {"vpc": ROUTER})
    client.ensure_logical_switch(SWITCH, ROUTER, CIDR, GATEWAY, {"vpc": ROUTER})


def run_ovn_limit(n: int, workdir: Path, worker_num: int) -> Throughput:
    nb = NbServer(workdir / "nb-limit").start()
    client = OvsdbappNbClient.from_addr(nb.remote, timeout=60.0)
    try:
        _ensure_topology(client)
        route_q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        add_q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        sent: dict[str, float] = {}
        watch = PodWatch("http://unused:0", n)  # only its result maps are used
        lock = threading.Lock()

        def add_worker() -> None:
            while (i := add_q.get()) is not None:
                client.create_port(port_spec(f"pod-{i:06d}", i))
                with lock:
                    watch.allocated[f"pod-{i:06d}"] = time.monotonic()
                route_q.put(i)

        def update_worker() -> None:
            while (i := route_q.get()) is not None:
                name, ip = f"pod-{i:06d}", pod_ip(i)
                node = f"node-{i % NODES}"
                aset = rp.set_name(SWITCH, node, 4)
                ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=SWITCH, node=node)
                for cidr, subnet in ((CIDR, SWITCH), (JOIN_CIDR, JOIN)):
                    client.add_router_policy(
                        ROUTER,
                        rp.SUBNET_PRIORITY,
                        rp.dst_match(cidr),
                        "allow",
                        (),
                        rp.ids(rp.KIND_SUBNET, 4, subnet=subnet),
                    )
                client.add_router_policy(
                    ROUTER,
                    rp.GATEWAY_PRIORITY,
                    rp.src_set_match(aset, 4),
                    "reroute",
                    [f"100.64.0.{i % NODES + 2}"],
                    ids,
                )
                client.add_address_set_addresses(aset, [ip], ids)
                client.update_nat_rule(
                    NAT_TYPE_DNAT_AND_SNAT, ip, "", ROUTER, pod_mac(i), f"{name}.{NS}"
                )
                client.update_nat_rule(NAT_TYPE_SNAT, ip, "", ROUTER)
                client.delete_static_route(ip, ROUTER, POLICY_SRC_IP)
                with lock:
                    watch.routed[name] = time.monotonic()

        threads = [threading.Thread(target=add_worker, daemon=True) for _ in range(worker_num)]
        threads += [threading.Thread(target=update_worker, daemon=True) for _ in range(worker_num)]
        for t in threads:
            t.start()
        for i in range(n):
            sent[f"pod-{i:06d}"] = time.monotonic()
            add_q.put(i)
        cpu0 = time.process_time()  # nothing else runs in this process meanwhile
        deadline = time.monotonic() + DEADLINE
        while len(watch.routed) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"OVN limit: {len(watch.routed)}/{n} routed in {DEADLINE}s")
            time.sleep(0.05)
        for _ in range(worker_num):
            add_q.put(None)
            route_q.put(None)
        result = throughput(sent, watch)
        result.extra[CLIENT_CPU] = 1000 * (time.process_time() - cpu0) / n
        # every pod is "created" at once here: the latency is queueing, not meaningful
        result.p50_allocated = result.p99_allocated = result.p50_routed = 0.0
        result.p99_routed = 0.0
        return result
    finally:
        client.close()
        nb.stop()


# --- 3b. the libraries' own floor -------------------------------------------------------------


@dataclass
class Floor:
    """CPU per pod of the bare libraries doing the controller's per-pod writes from one thread,
    nothing else in the process: what no controller built on them can go below."""

    n: int
    api_ms: float  # urllib3 (the kubernetes client's transport): POST ip, PATCH pod
    ovn_ms: float  # ovsdbapp's own NB API: one transaction of lsp_add, addresses, address set


def run_floor(n: int, workdir: Path, ctl: ControllerRun) -> Floor:
    n = min(n, FLOOR_PODS)
    names = [f"pod-{i:06d}" for i in range(n)]
    emulator = Emulator(workdir / "api", base_seed())
    try:
        create_pods(emulator.url, names, {})  # not timed: the pods the PATCHes need
        pool = _pool(emulator.url)
        patch = json.dumps(ctl.alloc_patch).encode()
        cpu0 = time.thread_time()
        for name in names:
            ip = json.dumps(replay_ip(ctl, name)).encode()
            for method, path, data, ctype in (
                ("POST", "/apis/kubeovn.io/v1/ips", ip, "application/json"),
                (
                    "PATCH",
                    f"/api/v1/namespaces/{NS}/pods/{name}",
                    patch,
                    "application/merge-patch+json",
                ),
            ):
                resp = pool.request(method, path, body=data, headers={"Content-Type": ctype})
                if resp.status >= 300:
                    raise RuntimeError(f"floor: {method} {path}: {resp.status}")
        api_ms = 1000 * (time.thread_time() - cpu0) / n
    finally:
        emulator.stop()

    nb = NbServer(workdir / "nb").start()
    conn = None
    try:
        idl = ovsdbapp_connection.OvsdbIdl.from_server(nb.remote, "OVN_Northbound")
        conn = ovsdbapp_connection.Connection(idl, timeout=60)
        api = OvnNbApiIdlImpl(conn)
        aset = rp.set_name(SWITCH, "node-0", 4)
        with api.transaction(check_error=True) as txn:
            txn.add(api.ls_add(SWITCH))
            txn.add(api.address_set_add(aset))
        # the process's CPU, not the thread's: ovsdbapp commits on its own connection thread
        cpu0 = time.process_time()
        for i, name in enumerate(names):
            port = f"{name}.{NS}"
            with api.transaction(check_error=True) as txn:
                txn.add(api.lsp_add(SWITCH, port))
                txn.add(api.lsp_set_addresses(port, [f"{pod_mac(i)} {pod_ip(i)}"]))
                txn.add(api.address_set_add_addresses(aset, [pod_ip(i)]))
        ovn_ms = 1000 * (time.process_time() - cpu0) / n
    finally:
        if conn is not None:
            conn.stop()
        nb.stop()
    return Floor(n, api_ms, ovn_ms)


# --- 4. start-up with existing pods --------------------------------------------------------------


@dataclass
class Startup:
    existing: int
    seed_seconds: float
    ready_seconds: float
    rss_at_ready: float
    peak_rss: float
    cpu_seconds: float
    phases: dict[str, float]
    # with --existing-routes=v18: from /readyz until the last src-ip route is gone, and CPU then
    migration_seconds: float = 0.0
    migration_cpu_seconds: float = 0.0
    migrated_pods: int = 0  # the most pods one migration scan queued (the rest: gc)


def _log_time(line: str) -> float | None:
    m = LOG_TS.match(line)
    if m is None:
        return None
    return datetime.fromisoformat(m.group(1) + "+00:00").timestamp()


def startup_phases(lines: list[str], spawned: float, ready_at: float) -> dict[str, float]:
    """Phases of the start-up from the controller's log (timestamps at ms resolution)."""
    marks: dict[str, float] = {}
    ipam_seconds = 0.0
    for line in lines:
        t = _log_time(line)
        if t is None:
            continue
        if "leading: starting informers" in line:
            marks.setdefault("leading", t)
        elif "seconds to initialize IPAM" in line:
            marks.setdefault("ipam_done", t)
            m = re.search(r"take ([\d.]+) seconds", line)
            ipam_seconds = float(m.group(1)) if m else 0.0
        elif "ms to collect garbage" in line and "started" not in marks:
            marks["gc_done"] = t  # the start-up gc is two passes (orphaned twice to delete)
        elif "controller started:" in line:
            marks.setdefault("started", t)
    phases: dict[str, float] = {}
    if "leading" in marks:
        phases["spawn to leading (imports, NB schema)"] = marks["leading"] - spawned
    if "leading" in marks and "ipam_done" in marks:
        # the NB's initial dump comes in on its own thread from before the election on
        phases["informer lists, NB dump, bootstrap"] = (
            marks["ipam_done"] - ipam_seconds - marks["leading"]
        )
        phases["IPAM rebuild (its log)"] = ipam_seconds
    if "ipam_done" in marks and "gc_done" in marks:
        phases["start-up gc (two passes)"] = marks["gc_done"] - marks["ipam_done"]
    last = marks.get("gc_done", marks.get("ipam_done"))
    if last is not None and "started" in marks:
        phases["subnet/namespace/node workers to started"] = marks["started"] - last
    if "started" in marks:
        phases["started to /readyz 200 seen"] = ready_at - marks["started"]
    return phases


def _seed_policies(client: OvsdbappNbClient, existing: int) -> None:
    for cidr, subnet in ((CIDR, SWITCH), (JOIN_CIDR, JOIN)):
        ids = rp.ids(rp.KIND_SUBNET, 4, subnet=subnet)
        client.add_router_policy(ROUTER, rp.SUBNET_PRIORITY, rp.dst_match(cidr), "allow", (), ids)
    for k in range(NODES):
        node = f"node-{k}"
        aset = rp.set_name(SWITCH, node, 4)
        ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=SWITCH, node=node)
        client.add_address_set_addresses(aset, [pod_ip(i) for i in range(k, existing, NODES)], ids)
        client.add_router_policy(
            ROUTER,
            rp.GATEWAY_PRIORITY,
            rp.src_set_match(aset, 4),
            "reroute",
            [f"100.64.0.{k + 2}"],
            ids,
        )


def run_startup(
    existing: int,
    workdir: Path,
    worker_num: int,
    profile: Path | None = None,
    routes: str = "none",
) -> Startup:
    t0 = time.monotonic()
    seed = base_seed()
    specs: list[PortSpec] = []
    for i in range(existing):
        pod, ip_cr = existing_pod(i)
        seed += [pod, ip_cr]
        specs.append(port_spec(pod["metadata"]["name"], i))
    nb = NbServer(workdir / "nb-startup").start()
    emulator: Emulator | None = None
    controller: ControllerProcess | None = None
    try:
        with OvsdbappNbClient.from_addr(nb.remote, timeout=120.0) as client:
            _ensure_topology(client)
            for k in range(0, len(specs), 1000):
                client.create_ports(specs[k : k + 1000])
        if routes == "policies":
            # the routing rows of a migrated cluster: one address set and policy per node
            with OvsdbappNbClient.from_addr(nb.remote, timeout=120.0) as client:
                _seed_policies(client, existing)
        if routes == "v18":
            # every existing pod carries kube-ovn v1.8's src-ip route: the start-up migrates them
            seed_routes(nb.remote, range(existing), pod_ip, lambda i: f"100.64.0.{i % NODES + 2}")
        emulator = Emulator(workdir / "api-startup", seed)
        seed_seconds = time.monotonic() - t0
        controller = ControllerProcess(workdir, emulator.kubeconfig, nb.remote, worker_num)
        spy = _py_spy(controller.pid, profile)
        ready = controller.wait_ready()
        ready_at = time.time()
        _py_spy_stop(spy)
        rss, hwm = memory_mib(controller.pid)
        cpu = cpu_seconds(controller.pid)
        phases = startup_phases(controller.log_lines(), controller.started, ready_at)
        result = Startup(existing, seed_seconds, ready, rss, hwm, cpu, phases)
        if routes == "v18":
            with OvsdbappNbClient.from_addr(nb.remote, timeout=120.0) as reader:
                deadline = time.monotonic() + DEADLINE
                while any(r.policy == POLICY_SRC_IP for r in reader.list_static_routes(ROUTER)):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"src-ip routes still there after {DEADLINE}s")
                    time.sleep(0.2)
            result.migration_seconds = time.time() - ready_at
            result.migration_cpu_seconds = cpu_seconds(controller.pid) - cpu
            queued = [
                int(m.group(1))
                for line in controller.log_lines()
                if (m := re.search(r"static routes of (\d+) pods", line))
            ]
            result.migrated_pods = max(queued, default=0)
        return result
    finally:
        if controller is not None:
            controller.stop()
        if emulator is not None:
            emulator.stop()
        nb.stop()


# --- report --------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def print_throughput(
    n: int,
    ctl: ControllerRun,
    emu: Throughput,
    ovn: Throughput,
    plane: str = "emulator",
    floor: Floor | None = None,
) -> None:
    """One N's table; `plane` names the API side ("emulator", or "real" for kube-apiserver)."""
    c = ctl.result
    where = "" if plane == "emulator" else ", on the real control plane"
    print(
        f"\n== {n} pods (controller: startup to ready {ctl.ready_seconds:.2f}s, "
        f"RSS then {ctl.ready_rss:.0f} MiB{where})"
    )
    limit, short = (
        ("emulator limit", "ctl/emu") if plane == "emulator" else ("API limit", "ctl/api")
    )
    print(f"{'':34}{'controller':>12}{limit:>16}{'OVN limit':>12}{short:>9}{'ctl/ovn':>9}")
    rows = [
        ("pods/s to allocated", c.to_allocated, emu.to_allocated, ovn.to_allocated),
        ("pods/s to routed", c.to_routed, emu.to_routed, ovn.to_routed),
    ]
    for label, a, b, d in rows:
        print(f"{label:34}{a:12.1f}{b:16.1f}{d:12.1f}{_ratio(a, b):>9}{_ratio(a, d):>9}")
    lat = [
        ("p50 POST->allocated ms", c.p50_allocated, emu.p50_allocated),
        ("p99 POST->allocated ms", c.p99_allocated, emu.p99_allocated),
        ("p50 POST->routed ms", c.p50_routed, emu.p50_routed),
        ("p99 POST->routed ms", c.p99_routed, emu.p99_routed),
    ]
    for label, a, b in lat:
        print(f"{label:34}{a * 1000:12.0f}{b * 1000:16.0f}{'-':>12}{_ratio(a, b):>9}{'-':>9}")
    print(
        f"{'wall s (first POST to last routed)':34}{c.wall:12.2f}{emu.wall:16.2f}{ovn.wall:12.2f}"
    )
    for key, value in c.extra.items():
        other = emu.extra.get(key)
        tail = f"{other:16.2f}" if other is not None else ""
        print(f"{key:34}{value:12.2f}{tail}")
    own = c.extra["controller CPU ms/pod"]
    server = c.extra.get(f"{'emulator' if plane == 'emulator' else REAL_NAME} CPU ms/pod")
    if server:
        # The server does the same work per pod in every run, so this ratio moves far less with
        # the machine's speed than either figure: the one to compare across runs.
        print(f"{'controller CPU / server CPU':34}{own / server:12.2f}")
    api_replay, ovn_replay = emu.extra.get(CLIENT_CPU), ovn.extra.get(CLIENT_CPU)
    if api_replay is not None and ovn_replay is not None:
        print(f"{CLIENT_CPU:34}{'-':>12}{api_replay:16.2f}{ovn_replay:12.2f}")
        both = api_replay + ovn_replay
        print(
            f"{'  both replay clients ms/pod':34}{both:12.2f}"
            f"  (controller / that: {_ratio(own, both)})"
        )
    if floor is not None:
        bare = floor.api_ms + floor.ovn_ms
        print(
            f"bare libraries, one thread, {floor.n} pods: urllib3 POST ip + PATCH pod "
            f"{floor.api_ms:.2f} ms/pod, ovsdbapp one transaction {floor.ovn_ms:.2f} ms/pod, "
            f"sum {bare:.2f} (controller / that: {_ratio(own, bare)})"
        )
    print(f"controller API requests per pod (replayed in the {limit} unless marked):")
    for key, rate in ctl.per_pod.items():
        mark = "" if key in REPLAYED else "  (not replayed)"
        print(f"    {key:40}{rate:8.3f}{mark}")


def print_paced(runs: list[tuple[str, float, ControllerRun]]) -> None:
    """The paced runs: (plane, rate, run) each, the latency a pod sees when not queued."""
    print("\n== paced at half the controller's own maximum (pods/s to routed above)")
    print(
        f"{'':12}{'pods/s':>8}{'p50 alloc':>11}{'p99 alloc':>11}{'p50 routed':>12}"
        f"{'p99 routed':>12}{'CPU ms/pod':>12}"
    )
    for plane, rate, run in runs:
        c = run.result
        print(
            f"{plane:12}{rate:8.1f}{c.p50_allocated * 1000:9.0f}ms{c.p99_allocated * 1000:9.0f}ms"
            f"{c.p50_routed * 1000:10.0f}ms{c.p99_routed * 1000:10.0f}ms"
            f"{c.extra['controller CPU ms/pod']:12.2f}"
        )


def print_planes(
    n: int, emu: tuple[ControllerRun, Throughput], real: tuple[ControllerRun, Throughput]
) -> None:
    """The same burst on both API planes side by side, each with its own API limit."""
    (ectl, elim), (rctl, rlim) = emu, real
    e, r = ectl.result, rctl.result
    print(f"\n== {n} pods, both control planes (each limit measured on its own plane)")
    print(f"{'':40}{'emulator':>12}{'real plane':>12}{'real/emu':>10}")
    rows = [
        ("controller pods/s to allocated", e.to_allocated, r.to_allocated),
        ("controller pods/s to routed", e.to_routed, r.to_routed),
        ("API limit pods/s to allocated", elim.to_allocated, rlim.to_allocated),
        ("API limit pods/s to routed", elim.to_routed, rlim.to_routed),
        ("controller / API limit (routed)", e.to_routed / elim.to_routed,
         r.to_routed / rlim.to_routed),
        ("p50 POST->routed ms", e.p50_routed * 1000, r.p50_routed * 1000),
        ("p99 POST->routed ms", e.p99_routed * 1000, r.p99_routed * 1000),
        ("controller CPU ms/pod", e.extra["controller CPU ms/pod"],
         r.extra["controller CPU ms/pod"]),
        ("API server CPU ms/pod (controller run)", e.extra["emulator CPU ms/pod"],
         r.extra[f"{REAL_NAME} CPU ms/pod"]),
        ("controller startup to ready s", ectl.ready_seconds, rctl.ready_seconds),
    ]  # fmt: skip
    for label, a, b in rows:
        print(f"{label:40}{a:12.2f}{b:12.2f}{_ratio(b, a):>10}")
    print(f"(API server CPU on the real plane: {REAL_NAME})")


def print_startup(s: Startup, baseline: float | None) -> None:
    print(f"\n== start-up with {s.existing} existing pods (seeding took {s.seed_seconds:.1f}s)")
    base = (
        f" (empty cluster: {baseline:.2f}s, ratio {_ratio(s.ready_seconds, baseline)})"
        if baseline
        else ""
    )
    print(f"spawn to /readyz 200: {s.ready_seconds:.2f}s{base}")
    print(
        f"controller RSS at ready {s.rss_at_ready:.0f} MiB, peak {s.peak_rss:.0f} MiB, "
        f"CPU {s.cpu_seconds:.2f}s"
    )
    for label, secs in s.phases.items():
        print(f"    {label:48}{secs:8.2f}s")
    if s.migration_seconds:
        print(
            f"v1.8 src-ip routes of the {s.existing} pods replaced by router policies "
            f"{s.migration_seconds:.2f}s after /readyz (controller CPU meanwhile "
            f"{s.migration_cpu_seconds:.2f}s; {s.migrated_pods} pods queued for it)"
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve-emulator":
        p = argparse.ArgumentParser(prog="e2e.py serve-emulator")
        p.add_argument("--seed", type=Path)
        p.add_argument("--kubeconfig", type=Path, required=True)
        a = p.parse_args(argv[1:])
        return serve_emulator(a.seed, a.kubeconfig)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 pods, 2,000 existing")
    parser.add_argument("--pods", default="1000,5000", help="comma list of N")
    parser.add_argument("--existing", type=int, default=20_000)
    parser.add_argument(
        "--existing-routes",
        choices=("none", "v18", "policies"),
        default="none",
        help="v18: the existing pods also carry kube-ovn v1.8's src-ip routes (time the "
        "migration); policies: they carry the router policies and address-set entries",
    )
    parser.add_argument(
        "--control-plane",
        choices=("emulator", "real", "both"),
        default="emulator",
        help="the API side of the throughput runs: the emulator, the real Kubernetes control "
        "plane (needs its binaries: bash .ci/build-control-plane), or both side by side; the "
        "start-up with existing pods runs on the emulator only",
    )
    parser.add_argument("--worker-num", type=int, default=3)
    parser.add_argument(
        "--no-paced",
        dest="paced",
        action="store_false",
        help="skip the paced runs (pods at half the controller's measured maximum)",
    )
    parser.add_argument("--workdir", type=Path, help="keep logs here (default: a temp dir)")
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="profile the controller during each N run with py-spy (installed "
        "separately); collapsed stacks written to DIR/controller-N.txt",
    )
    args = parser.parse_args(argv)
    try:
        sizes = [int(x) for x in args.pods.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--pods: not a comma list of integers: {args.pods!r}")
    if args.quick:
        sizes, args.existing = [200], 2_000
    if any(n <= 0 for n in sizes) or args.existing < 0 or args.worker_num <= 0:
        parser.error("sizes and --worker-num must be positive")
    # the bench's own NB client warns about its big preload batches; that is expected here
    logging.getLogger("controller.ovn").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-e2e") as tmp:
        root = args.workdir or Path(tmp)
        print(
            f"bench/e2e.py: sizes {sizes}, existing {args.existing}, worker-num "
            f"{args.worker_num}, cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}; "
            f"workdir {root}",
            flush=True,
        )
        baseline = None
        emulated = args.control_plane in ("emulator", "both")
        real = args.control_plane in ("real", "both")
        for n in sizes:
            profile = args.py_spy / f"controller-{n}.txt" if args.py_spy else None
            ovn = run_ovn_limit(n, root / f"ovn-{n}", args.worker_num) if real else None
            planes: dict[str, tuple[ControllerRun, Throughput]] = {}
            if emulated:
                ctl = run_controller(n, root / f"ctl-{n}", args.worker_num, profile)
                baseline = baseline or ctl.ready_seconds
                emu = run_emulator_limit(n, root / f"emu-{n}", args.worker_num, ctl)
                ovn = ovn or run_ovn_limit(n, root / f"ovn-{n}", args.worker_num)
                floor = run_floor(n, root / f"floor-{n}", ctl)
                print_throughput(n, ctl, emu, ovn, floor=floor)
                planes["emulator"] = ctl, emu
                sys.stdout.flush()
            if real:
                assert ovn is not None
                rprofile = args.py_spy / f"controller-real-{n}.txt" if args.py_spy else None
                try:
                    ctl = run_controller(
                        n, root / f"real-ctl-{n}", args.worker_num, rprofile, real_plane
                    )
                    lim = run_emulator_limit(
                        n, root / f"real-api-{n}", args.worker_num, ctl, real_plane
                    )
                except SandboxError as e:
                    print(f"bench/e2e.py: real control plane: {e}", file=sys.stderr)
                    return 1
                print_throughput(n, ctl, lim, ovn, plane="real")
                planes["real"] = ctl, lim
            if len(planes) == 2:
                print_planes(n, planes["emulator"], planes["real"])
            if args.paced:
                paced = []
                for name, (run, _) in planes.items():
                    rate = run.result.to_routed / 2
                    where = real_plane if name == "real" else Emulator
                    try:
                        got = run_controller(
                            n, root / f"paced-{name}-{n}", args.worker_num, None, where, rate
                        )
                    except SandboxError as e:
                        print(f"bench/e2e.py: real control plane: {e}", file=sys.stderr)
                        return 1
                    paced.append((name, rate, got))
                print_paced(paced)
            sys.stdout.flush()
        if args.existing and emulated:
            profile = args.py_spy / "controller-startup.txt" if args.py_spy else None
            print_startup(
                run_startup(
                    args.existing,
                    root / "startup",
                    args.worker_num,
                    profile,
                    routes=args.existing_routes,
                ),
                baseline,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
