"""`python -m controller.sandbox.demo`: the controller at work in a local sandbox, nothing else.

Contract:

* Starts, in a work directory (a fresh temporary one unless `--workdir` is given): a throwaway
  OVN Northbound ovsdb-server (`NbServer`), the API server emulator in this process
  (`ApiServer`, with a kubeconfig beside it) and the real controller as a subprocess,
  `python -m cmd.controller --kubeconfig ... --ovn-nb-addr unix:... --metrics-port ...`, run from
  the repository root with its output in `<workdir>/controller.log`.
* Seeds what a cluster would have (two nodes with InternalIP addresses, `kube-system`, the
  `ovn-external-gw-config` ConfigMap), waits for the controller's `/readyz`, then creates the
  namespace `demo`, the subnet `demo-subnet` (10.100.0.0/24, bound to `demo` by spec.namespaces),
  the dual-stack subnet `demo-dual` (10.101.0.0/24,fd00:101::/120) and the pods: a Deployment-like
  set `demo-app-<hash>-<suffix>` (`--pods`, owned by a ReplicaSet), the StatefulSet `web` (the
  apps/v1 object, replicas 2) with its pods `web-0` and `web-1`, and the pod `dual` that selects
  `demo-dual` through `ovn.kubernetes.io/logical_switch`. Every pod is "scheduled" (spec.nodeName
  set) when created; once the controller allocated it, the demo plays the kubelet and writes
  status.hostIP / podIP(s) / phase Running from the annotations.
* Prints one table row per pod as it comes up: addresses, MAC, the logical switch port and its
  switch *as read back from the NB database*, the node, whether it is routed and how long it
  took. A pod is up when it is allocated and routed and its port exists in the NB. The join
  subnet (the nodes' addresses) is IPv4 only, so `dual` is routed by its IPv4 set entry alone,
  as kube-ovn routes a pod address only via a node address of its family; `check` expects the
  same and reports the demo's cluster clean.
* With the data plane (the default when run as root with Debian's OVN/OVS packages; off with
  `--no-dataplane`, and with a one-line reason when it cannot run): a `DataPlane` (SB,
  ovn-northd, OVS, ovn-controller) on the same NB, each node's `ovn0` and every pod wired into it
  by `CniWiring` as kube-ovn's CNI would (a pod is marked Running only once wired and bound), and
  after the table a connectivity matrix: every pod and node (its join address on ovn0) pings
  every other pod and node, and each pod its gateway; a node reaches a subnet's pods once the
  controller reports the subnet Ready (the CNI daemon's rule).
* Then prints where `/metrics` is served and waits for SIGINT/SIGTERM (`--once`: exits 0 as soon
  as every pod is up; 1 when they are not up within `--timeout`).
* Ctrl-C (or SIGTERM) at any point, start-up included, stops everything it started: the
  controller (SIGTERM, SIGKILL after a deadline; a second Ctrl-C kills at once), the emulator, the
  ovsdb-server; then it removes the temporary work directory (a given `--workdir` is kept). Exit
  code 0, no traceback. Signal handlers only set a flag, so no step is ever interrupted halfway;
  every wait is bounded and checks the flag. Children get PDEATHSIG=SIGKILL, so even a SIGKILLed
  demo leaves no process behind.

* `--control-plane real` puts the real Kubernetes control plane (cluster/controlplane.py, built by
  `.ci/build-control-plane`) in the emulator's place (real.py): the controller runs as its
  chart ServiceAccount under RBAC, the Deployment and the StatefulSet are real objects whose pods
  kube-controller-manager creates and kube-scheduler binds to the (Ready) demo nodes; the demo
  still plays the kubelet's status writes. `<workdir>/admin.kubeconfig` is for kubectl.

Exit codes: 0 (stopped by a signal, or `--once` succeeded), 1 (something failed: the message
says what, with the tail of the controller's log when it was the controller), 2 (bad flags).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    ROUTED_ANNOTATION,
)
from controller.core.naming import pod_name_to_port_name
from controller.core.subnet_conditions import is_ready
from controller.ovn.api import NbClient, OvnError
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.runtime.metrics import port_is_free
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.selectors import build_selector
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode, running_status
from controller.sandbox.cluster.scheduler import PodScheduler
from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.cluster.workloads import StatefulSetController
from controller.sandbox.demo import matrix, realnodes
from controller.sandbox.demo.matrix import MatrixPod
from controller.sandbox.demo.real import RealDemoServer, create_workloads, deployment_object
from controller.sandbox.ovn.cni import CniWiring, plan_node, plan_pod
from controller.sandbox.ovn.dataplane import DataPlane, missing_requirements
from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.processes import SandboxError, die_with_parent

LOG = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
DEMO_NAMESPACE = "demo"
CONTROLLER_NAMESPACE = "kube-system"
DEMO_SUBNET = "demo-subnet"
DEMO_CIDR = "10.100.0.0/24"
DUAL_SUBNET = "demo-dual"
DUAL_CIDR = "10.101.0.0/24,fd00:101::/120"
DEPLOYMENT = "demo-app"
STATEFULSET = "web"
STATEFULSET_REPLICAS = 2
DUAL_POD = "dual"
NODES: tuple[tuple[str, str], ...] = (("demo-node-1", "172.18.0.2"), ("demo-node-2", "172.18.0.3"))
NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110"}
EXTERNAL_GW_CONFIGMAP = "ovn-external-gw-config"
MAX_DEPLOYMENT_PODS = 200  # demo-subnet is a /24
DEFAULT_METRICS_PORT = 10660
CONTROLLER_STOP_TIMEOUT = 15.0
_POLL = 0.25  # seconds a wait may take before it looks at the stop flag again


class DemoError(RuntimeError):
    """The sandbox could not be brought up; the message says what to do about it."""


# ---------------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class DemoOptions:
    pods: int = 3
    metrics_port: int = DEFAULT_METRICS_PORT
    workdir: Path | None = None
    once: bool = False
    timeout: float = 90.0
    log_level: str = "info"
    dataplane: bool = True
    control_plane: str = "emulator"
    node: str = "sandbox"


#: The API side of a demo run: the in-process emulator, or the real control plane.
DemoApi = ApiServer | RealDemoServer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m controller.sandbox.demo",
        description="Run the kube-ovn pod controller against a local sandbox (an NB "
        "ovsdb-server and the API server emulator), create demo pods and show their addresses.",
    )
    p.add_argument(
        "--pods",
        type=int,
        default=3,
        help=f"replicas of the Deployment-like set (0..{MAX_DEPLOYMENT_PODS}; "
        "the StatefulSet and the dual-stack pod come on top)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="controller /metrics port on 127.0.0.1 (0: any free port)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the sandbox files (NB database, kubeconfig, controller log) here "
        "instead of a temporary directory removed at exit",
    )
    p.add_argument(
        "--once", action="store_true", help="exit 0 once every demo pod is up (for tests and CI)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=90.0,
        help="seconds for the controller to get ready and for the pods to come up",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="the controller's log level (its log goes to <workdir>/controller.log)",
    )
    p.add_argument(
        "--no-dataplane",
        dest="dataplane",
        action="store_false",
        help="do not start the OVN data plane nor wire the pods (no connectivity "
        "matrix); without root or the OVN/OVS packages it is skipped anyway",
    )
    p.add_argument(
        "--control-plane",
        default="emulator",
        choices=("emulator", "real"),
        help="the API server emulator (instant), or the real Kubernetes control "
        "plane built by .ci/build-control-plane",
    )
    p.add_argument(
        "--node",
        default="sandbox",
        choices=("sandbox", "real"),
        help="who runs the pods: the sandbox kubelet (default), or real nodes (containerd "
        "and the kubelet built by .ci/build-control-plane; needs --control-plane real, root)",
    )
    return p


def parse_args(argv: Sequence[str]) -> DemoOptions:
    """Flags -> options; argparse exits 2 with a message on anything invalid."""
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    if not 0 <= ns.pods <= MAX_DEPLOYMENT_PODS:
        parser.error(f"--pods must be between 0 and {MAX_DEPLOYMENT_PODS}, got {ns.pods}")
    if not 0 <= ns.metrics_port <= 65535:
        parser.error(f"--metrics-port must be a TCP port (0..65535), got {ns.metrics_port}")
    if not ns.timeout > 0:
        parser.error(f"--timeout must be positive, got {ns.timeout}")
    if ns.node == "real" and (ns.control_plane != "real" or not ns.dataplane):
        parser.error("--node real needs --control-plane real and the data plane")
    return DemoOptions(
        pods=ns.pods,
        metrics_port=ns.metrics_port,
        workdir=ns.workdir,
        once=ns.once,
        timeout=ns.timeout,
        log_level=ns.log_level,
        dataplane=ns.dataplane,
        control_plane=ns.control_plane,
        node=ns.node,
    )


# ---------------------------------------------------------------------- demo objects (pure)


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **extra}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def node_objects() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": _meta(name, labels=node_labels(name)),
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": name},
                ],
                # What a kubelet reports; a scheduler binds only to such nodes.
                "capacity": dict(NODE_CAPACITY),
                "allocatable": dict(NODE_CAPACITY),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "sandbox",
                    "containerRuntimeVersion": "sandbox://0",
                    "osImage": "sandbox",
                    "kubeProxyVersion": "",
                    "kernelVersion": "",
                    "bootID": "",
                    "machineID": "",
                    "systemUUID": "",
                },
            },
        }
        for name, ip in NODES
    ]


def node_labels(name: str) -> dict[str, str]:
    """The labels a kubelet puts on its Node (the chart's pods select kubernetes.io/os)."""
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }


def subnet_objects() -> list[dict[str, Any]]:
    def subnet(name: str, cidr: str, protocol: str, namespaces: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Subnet",
            "metadata": _meta(name),
            "spec": {
                "cidrBlock": cidr,
                "protocol": protocol,
                "namespaces": namespaces,
                "gatewayType": "distributed",
                "natOutgoing": False,
            },
        }

    return [
        subnet(DEMO_SUBNET, DEMO_CIDR, "IPv4", [DEMO_NAMESPACE]),
        subnet(DUAL_SUBNET, DUAL_CIDR, "Dual", []),
    ]


def statefulset_object() -> dict[str, Any]:
    labels = {"app": STATEFULSET}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(STATEFULSET, DEMO_NAMESPACE, labels=labels),
        "spec": {
            "replicas": STATEFULSET_REPLICAS,
            "serviceName": STATEFULSET,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec("")},
        },
    }


def _pod_spec(node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    if node:
        spec["nodeName"] = node
    return spec


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _name_suffix(rng: random.Random, length: int) -> str:
    # The alphabet Kubernetes uses for generated names (no vowels, no look-alike characters).
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(length))


def pod_objects(replicas: int, statefulset_uid: str, *, seed: int) -> list[dict[str, Any]]:
    """The demo pods, spread over the nodes. The Deployment-like pods are named as a Deployment
    names them (`<deployment>-<replicaset hash>-<suffix>`), from `seed` (deterministic)."""
    rng = random.Random(seed)
    rs_name = f"{DEPLOYMENT}-{_name_suffix(rng, 10)}"
    rs_uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    rs_labels = {"app": DEPLOYMENT, "pod-template-hash": rs_name.rsplit("-", 1)[1]}
    names: set[str] = set()
    while len(names) < replicas:
        names.add(f"{rs_name}-{_name_suffix(rng, 5)}")
    pods: list[dict[str, Any]] = []
    for i, name in enumerate(sorted(names)):
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": _meta(
                    name,
                    DEMO_NAMESPACE,
                    labels=dict(rs_labels),
                    ownerReferences=[_owner("ReplicaSet", rs_name, rs_uid)],
                ),
                "spec": _pod_spec(NODES[i % len(NODES)][0]),
            }
        )
    for i in range(STATEFULSET_REPLICAS):
        name = f"{STATEFULSET}-{i}"
        labels = {"app": STATEFULSET, "statefulset.kubernetes.io/pod-name": name}
        spec = _pod_spec(NODES[i % len(NODES)][0])
        spec.update(hostname=name, subdomain=STATEFULSET)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": _meta(
                    name,
                    DEMO_NAMESPACE,
                    labels=labels,
                    ownerReferences=[_owner("StatefulSet", STATEFULSET, statefulset_uid)],
                ),
                "spec": spec,
            }
        )
    pods.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": _meta(
                DUAL_POD,
                DEMO_NAMESPACE,
                labels={"app": DUAL_POD},
                annotations={LOGICAL_SWITCH_ANNOTATION: DUAL_SUBNET},
            ),
            "spec": _pod_spec(NODES[-1][0]),
        }
    )
    return pods


def kubelet_status(pod: Mapping[str, Any], node_ips: Mapping[str, str]) -> dict[str, Any] | None:
    """The status a kubelet would report once the CNI used the pod's allocated addresses, or
    None while the pod is not allocated or not scheduled."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    node = (pod.get("spec") or {}).get("nodeName", "")
    ips = [ip for ip in annotations.get(IP_ADDRESS_ANNOTATION, "").split(",") if ip]
    if annotations.get(ALLOCATED_ANNOTATION) != "true" or not ips or node not in node_ips:
        return None
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return running_status(pod, [ip.split("/", 1)[0] for ip in ips], node_ips[node], now)


# -------------------------------------------------------------------------- the table (pure)


@dataclass(frozen=True, slots=True)
class PodRow:
    """One line of the table: a pod that is up, as the API and the NB database show it."""

    pod: str  # namespace/name
    ips: tuple[str, ...]
    mac: str
    lsp: str
    switch: str
    node: str
    routed: bool
    seconds: float


COLUMNS = ("POD", "IPS", "MAC", "LSP", "SWITCH", "NODE", "ROUTED", "UP AFTER")


def pod_row(pod: Mapping[str, Any], port_switch: str | None, seconds: float) -> PodRow | None:
    """The row of a pod that is up (allocated, routed, its port `port_switch` found in the NB),
    else None. `port_switch` is the switch of the pod's LSP as read from the NB (None: no port)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if (
        port_switch is None
        or annotations.get(ALLOCATED_ANNOTATION) != "true"
        or annotations.get(ROUTED_ANNOTATION) != "true"
    ):
        return None
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    return PodRow(
        pod=f"{namespace}/{name}",
        ips=tuple(ip for ip in annotations.get(IP_ADDRESS_ANNOTATION, "").split(",") if ip),
        mac=annotations.get(MAC_ADDRESS_ANNOTATION, ""),
        lsp=pod_name_to_port_name(name, namespace),
        switch=port_switch,
        node=(pod.get("spec") or {}).get("nodeName", ""),
        routed=True,
        seconds=seconds,
    )


def column_widths(pod_names: Sequence[str]) -> tuple[int, ...]:
    """Fixed widths known before the first row, so rows can stream as pods come up."""
    longest = max((len(n) for n in pod_names), default=10)
    node = max(len(n) for n, _ in NODES)
    return (
        len(DEMO_NAMESPACE) + 1 + longest,
        25,
        17,
        longest + 1 + len(DEMO_NAMESPACE),
        max(len(DEMO_SUBNET), len(DUAL_SUBNET)),
        node,
        6,
        8,
    )


def format_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def format_row(row: PodRow, widths: Sequence[int]) -> str:
    return format_line(
        (
            row.pod,
            ",".join(row.ips),
            row.mac,
            row.lsp,
            row.switch,
            row.node,
            "yes" if row.routed else "no",
            f"{row.seconds:.2f}s",
        ),
        widths,
    )


# ----------------------------------------------------------------------------- signals


class _KeepWired:
    """The data plane wiring for the sandbox kubelet, leaving alone the pods the demo wired."""

    def __init__(self, wiring: CniWiring) -> None:
        self.wiring = wiring

    def wire(self, pod: Mapping[str, Any]) -> None:
        if self.wiring.wired_plans(pod) is None:
            self.wiring.wire(pod)

    def unwire(self, pod: Mapping[str, Any]) -> None:
        self.wiring.unwire(pod)


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


# -------------------------------------------------------------------------- the sandbox


def _port_is_free(port: int) -> bool:
    # As the controller's metrics server will bind it: TIME-WAIT leftovers of a previous run
    # (its scrapes and readiness probes) do not make the port busy.
    return port_is_free("127.0.0.1", port)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Loopback only: an http_proxy in the environment must not swallow our readiness probe.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_status(url: str, timeout: float = 1.0) -> int | None:
    try:
        with _DIRECT.open(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _subnet_ready(subnet: Any) -> bool:
    return is_ready((subnet or {}).get("status"))


def _has_join_address(node: Any) -> bool:
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(IP_ADDRESS_ANNOTATION))


def _create_if_absent(server: DemoApi, resource: str, obj: dict[str, Any]) -> None:
    try:
        server.store.create(resource, obj)
    except ApiError as exc:
        if exc.code != 409:
            raise


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
                    proc.wait(_POLL)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode


class Demo:
    """One sandbox run; `run()` returns the exit code. Everything started is pushed on an
    ExitStack, so whatever the point of failure or interruption, it is stopped in reverse."""

    def __init__(self, options: DemoOptions, flag: StopFlag, out: TextIO) -> None:
        self.options = options
        self.flag = flag
        self.out = out
        self.metrics_port = options.metrics_port
        self.kept: Path | None = None  # a given --workdir, left in place at exit

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def check_stop(self) -> None:
        if self.flag.requested:
            raise Interrupted

    # -- run ---------------------------------------------------------------------------

    def run(self) -> int:
        with contextlib.ExitStack() as stack:
            try:
                code = self._run(stack)
            except Interrupted:
                self.say("interrupted: stopping")
                code = 0
            except DemoError as exc:
                self.say(f"error: {exc}")
                code = 1
            except (ApiError, OvnError, SandboxError) as exc:
                self.say(f"error: {type(exc).__name__}: {exc}")
                code = 1
        if self.kept is None:
            self.say("stopped; nothing left behind")
        else:
            self.say(f"stopped; the work directory {self.kept} is kept")
        return code

    def _workdir(self, stack: contextlib.ExitStack) -> Path:
        if self.options.workdir is None:
            path = Path(tempfile.mkdtemp(prefix="kube-ovn-demo-"))
            stack.callback(self._remove_workdir, path)
            return path
        path = self.options.workdir.resolve()
        path.mkdir(parents=True, exist_ok=True)
        self.kept = path
        # A fresh database each run: a stale one would hold ports of pods this emulator never saw.
        for stale in (
            "nb/nb.db",
            "nb/.nb.db.~lock~",
            "kubeconfig",
            "controller.log",
            "admin.kubeconfig",
        ):
            with contextlib.suppress(FileNotFoundError):
                (path / stale).unlink()
        # The data plane's databases too: ovn-controller never gets ready on an old chassis.
        shutil.rmtree(path / "dp", ignore_errors=True)
        return path

    def _remove_workdir(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        self.say(f"removed {path}")

    def _run(self, stack: contextlib.ExitStack) -> int:
        opts = self.options
        if self.metrics_port == 0:
            self.metrics_port = _free_port()
        elif not _port_is_free(self.metrics_port):
            raise DemoError(
                f"port {self.metrics_port} on 127.0.0.1 is in use; pass "
                "--metrics-port 0 to use any free port"
            )
        workdir = self._workdir(stack)
        self.say(f"kube-ovn pod controller sandbox, workdir {workdir}")
        self.check_stop()
        if opts.node == "real":
            return realnodes.run_demo(
                self, stack, workdir, deployment_pods=opts.pods, timeout=opts.timeout,
                metrics_port=self.metrics_port,
                wait_forever=None if opts.once else self._serve_until_stopped,
            )  # fmt: skip

        nb_server = NbServer(workdir / "nb")
        stack.callback(self._stop_step, "NB ovsdb-server", nb_server.stop)
        try:
            nb_server.start()
        except SandboxError as exc:
            raise DemoError(f"NB ovsdb-server: {exc} (run `bash .ci/setup` first)") from exc
        self.say(f"NB ovsdb-server ready at {nb_server.remote} (pid {nb_server.pid})")
        self.check_stop()

        server: DemoApi
        if opts.control_plane == "real":
            server = RealDemoServer(workdir)
            try:
                server.start()
            except SandboxError as exc:
                server.stop()  # whatever part of it did start
                raise DemoError(f"real control plane: {exc}") from exc
            stack.callback(self._stop_step, "the real control plane", server.stop)
            kubeconfig = server.write_kubeconfig(workdir / "kubeconfig")
            admin = server.write_admin_kubeconfig(workdir / "admin.kubeconfig")
            self.seed_cluster(server)
            self.say(
                f"real control plane at {server.url} (controller kubeconfig {kubeconfig}, "
                f"admin {admin}, logs in {server.plane.workdir})"
            )
        else:
            server = ApiServer(bookmark_interval=5.0)
            stack.callback(self._stop_step, "API server emulator", server.stop)
            server.start()
            kubeconfig = admin = server.write_kubeconfig(workdir / "kubeconfig")
            self.seed_cluster(server)
            self.say(f"API server emulator at {server.url} (kubeconfig {kubeconfig})")
        self.check_stop()

        controller = ControllerProcess(
            [
                f"--kubeconfig={kubeconfig}",
                f"--ovn-nb-addr={nb_server.remote}",
                "--metrics-addr=127.0.0.1",
                f"--metrics-port={self.metrics_port}",
                f"--log-level={opts.log_level}",
            ],
            workdir / "controller.log",
            {
                **os.environ,
                "POD_NAME": "kube-ovn-controller-demo",
                "KUBE_NAMESPACE": CONTROLLER_NAMESPACE,
            },
        )
        stack.callback(self._stop_controller, controller)
        controller.start()
        self.say(f"controller started (pid {controller.pid}, log {controller.log_path})")
        self.wait_ready(controller)
        self.say(f"controller ready: http://127.0.0.1:{self.metrics_port}/readyz")

        try:
            nb = self._nb_reader(nb_server.remote)
        except OvnError as exc:
            raise DemoError(f"cannot read the NB database: {exc}") from exc
        try:
            wiring = self.start_dataplane(stack, workdir, nb_server.remote, server, controller)
            pods = self.create_demo(server, controller)
            up = self.show_pods(server, nb, controller, pods, wiring)
        finally:
            nb.close()
        if not up:
            return 1
        if wiring is not None:
            self.show_matrix(server, wiring, pods, controller)
        self.say(f"metrics: http://127.0.0.1:{self.metrics_port}/metrics")
        if opts.once:
            self.say("--once: every pod is up; stopping")
            return 0
        if isinstance(server, ApiServer):
            self.serve_new_pods(stack, server, wiring)
        self.say(f"try: kubectl --kubeconfig {admin} get pods -n {DEMO_NAMESPACE} -o wide")
        self.say(f"     ovn-nbctl --db={nb_server.remote} show")
        if wiring is not None and len(pods) >= 2:
            (ns_a, a), (ns_b, b) = sorted(pods)[:2]
            source = server.store.get("pods", ns_a, a)
            target = (server.store.get("pods", ns_b, b).get("status") or {}).get("podIP")
            self.say(
                f"     ip netns exec {wiring.pod_netns(source)} ping -c1 {target}"
                f"   (from {ns_a}/{a} to {ns_b}/{b})"
            )
        self.say("serving until Ctrl-C")
        while not self.flag.wait(1.0):
            self.check_alive(controller)
        self.say("stopping")
        return 0

    def _serve_until_stopped(self) -> None:
        while not self.flag.wait(1.0):
            pass

    def serve_new_pods(
        self, stack: contextlib.ExitStack, server: ApiServer, wiring: CniWiring | None
    ) -> None:
        """From here on a scheduler binds new pods to the demo's nodes and the sandbox kubelet
        runs them (wired into the data plane, status written, graceful deletion honoured), and
        stateful sets keep their pods, so `kubectl run`, `kubectl scale statefulset` and
        `kubectl delete` behave as on a cluster."""
        scheduler = PodScheduler(server.store, [name for name, _ in NODES]).start()
        stack.callback(scheduler.stop)
        statefulsets = StatefulSetController(server.store).start()
        stack.callback(statefulsets.stop)
        api = server.api_client()
        stack.callback(api.close)
        kubelet = SandboxKubelet(
            api,
            [SimNode(name, ip, labels=node_labels(name)) for name, ip in NODES],
            wiring=_KeepWired(wiring) if wiring is not None else None,
        )
        kubelet.start()
        stack.callback(kubelet.stop)
        self.say("new pods are scheduled to the demo's nodes and run by its sandbox kubelet")

    def _stop_step(self, what: str, stop: Callable[[], None]) -> None:
        stop()
        self.say(f"stopped {what}")

    def _stop_controller(self, controller: ControllerProcess) -> None:
        if controller.pid is None:
            return
        pid = controller.pid
        code = controller.stop(self.flag)
        self.say(f"stopped the controller (pid {pid}, exit code {code})")

    def _nb_reader(self, remote: str) -> OvsdbappNbClient:
        return OvsdbappNbClient.from_addr(remote, timeout=10.0)

    # -- steps -------------------------------------------------------------------------

    def seed_cluster(self, server: DemoApi) -> None:
        store = server.store
        for namespace in (CONTROLLER_NAMESPACE, "default"):
            _create_if_absent(server, "namespaces", {"metadata": _meta(namespace)})
        for node in node_objects():
            store.create("nodes", node)
        store.create(
            "configmaps",
            {
                "metadata": _meta(EXTERNAL_GW_CONFIGMAP, CONTROLLER_NAMESPACE),
                "data": {"enable-external-gw": "false", "external-gw-addr": "172.18.0.1/16"},
            },
        )

    def wait_ready(self, controller: ControllerProcess) -> None:
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"
        deadline = time.monotonic() + self.options.timeout
        while _http_status(url) != 200:
            code = controller.exited()
            if code is not None:
                raise DemoError(
                    f"the controller exited with code {code} during start-up:\n"
                    f"{_tail(controller.log_path)}"
                )
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the controller was not ready after {self.options.timeout}s "
                    f"({url}):\n{_tail(controller.log_path)}"
                )
            if self.flag.wait(_POLL):
                raise Interrupted

    def wait_store(
        self,
        server: DemoApi,
        controller: ControllerProcess,
        resource: str,
        namespace: str | None,
        name: str,
        predicate: Callable[[Any], bool],
        what: str,
    ) -> None:
        """Wait, bounded by --timeout, for the controller to bring an object to `predicate`."""
        deadline = time.monotonic() + self.options.timeout
        while True:
            try:
                server.store.wait_for(resource, namespace, name, predicate, timeout=_POLL)
                return
            except TimeoutError:
                pass
            self.check_stop()
            self.check_alive(controller)
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the controller did not set {what} on {resource} {name} within "
                    f"{self.options.timeout}s:\n{_tail(controller.log_path)}"
                )

    def check_alive(self, controller: ControllerProcess) -> None:
        code = controller.exited()
        if code is not None:
            raise DemoError(
                f"the controller exited with code {code}:\n{_tail(controller.log_path)}"
            )

    def create_demo(self, server: DemoApi, controller: ControllerProcess) -> list[tuple[str, str]]:
        store = server.store
        store.create("namespaces", {"metadata": _meta(DEMO_NAMESPACE, labels={"purpose": "demo"})})
        for subnet in subnet_objects():
            store.create("subnets", subnet)
        # Pods created before their subnet and namespace are wired would only be retried (and
        # log errors); a scheduler would not be faster than this anyway.
        for subnet in subnet_objects():
            self.wait_store(
                server,
                controller,
                "subnets",
                None,
                subnet["metadata"]["name"],
                lambda obj: bool(((obj or {}).get("spec") or {}).get("gateway")),
                "its gateway",
            )
        self.wait_store(
            server,
            controller,
            "namespaces",
            None,
            DEMO_NAMESPACE,
            lambda obj: (
                (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(
                    LOGICAL_SWITCH_ANNOTATION
                )
                == DEMO_SUBNET
            ),
            f"its {LOGICAL_SWITCH_ANNOTATION} annotation",
        )
        if isinstance(server, RealDemoServer):
            # Real workloads: kube-controller-manager creates their pods, the scheduler binds.
            dual = pod_objects(0, "", seed=0)[-1]
            server.store.create("pods", dual)
            names = create_workloads(
                server.store,
                DEMO_NAMESPACE,
                deployment_object(DEPLOYMENT, DEMO_NAMESPACE, self.options.pods, _pod_spec("")),
                statefulset_object(),
                self.options.timeout,
            )
            pods = [
                {"metadata": {"namespace": DEMO_NAMESPACE, "name": n}} for n in [*names, DUAL_POD]
            ]
        else:
            sts = store.create("statefulsets", statefulset_object())
            seed = random.SystemRandom().getrandbits(64)
            pods = pod_objects(self.options.pods, sts["metadata"]["uid"], seed=seed)
            for pod in pods:
                store.create("pods", pod)
        self.say(
            f"created namespace {DEMO_NAMESPACE}, subnets {DEMO_SUBNET} ({DEMO_CIDR}) and "
            f"{DUAL_SUBNET} ({DUAL_CIDR})"
        )
        self.say(
            f"created {len(pods)} pods: Deployment-like {DEPLOYMENT} "
            f"({self.options.pods}), StatefulSet {STATEFULSET} ({STATEFULSET_REPLICAS}), "
            f"dual-stack {DUAL_POD} (1)"
        )
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]

    def start_dataplane(
        self,
        stack: contextlib.ExitStack,
        workdir: Path,
        nb_remote: str,
        server: DemoApi,
        controller: ControllerProcess,
    ) -> CniWiring | None:
        """The data plane with every node's ovn0 wired, or None (with the reason said)."""
        if not self.options.dataplane:
            self.say("data plane: off (--no-dataplane)")
            return None
        why = missing_requirements()
        if why:
            self.say(f"data plane: off ({why}); pods are not wired")
            return None
        dp = DataPlane(workdir / "dp", nb_remote)
        stack.callback(self._stop_step, "data plane", dp.stop)
        dp.start()
        wiring = CniWiring(dp)
        for name, _ in NODES:
            self.wait_store(
                server, controller, "nodes", None, name, _has_join_address, "its join address"
            )
            try:
                wiring.wire_node(server.store.get("nodes", None, name))
            except WiringError as exc:
                raise DemoError(f"data plane: {exc}") from exc
        self.say(
            f"data plane up in {dp.startup_seconds:.2f}s (SB, ovn-northd, OVS netdev, "
            f"ovn-controller as chassis {dp.chassis}; nodes' ovn0 wired)"
        )
        return wiring

    def show_matrix(
        self,
        server: DemoApi,
        wiring: CniWiring,
        pods: Sequence[tuple[str, str]],
        controller: ControllerProcess | None = None,
    ) -> None:
        rows = []
        switches: set[str] = set()
        for ns, name in sorted(pods):
            pod = server.store.get("pods", ns, name)
            plan = plan_pod(pod)[0]
            annotations = pod["metadata"].get("annotations") or {}
            switches.add(str(annotations.get(LOGICAL_SWITCH_ANNOTATION) or ""))
            rows.append(
                MatrixPod(
                    f"{ns}/{name}",
                    wiring.pod_netns(pod),
                    plan.ips.split(",")[0],
                    next((g for g in plan.gateways if g), ""),
                )
            )
        # The nodes route a subnet on ovn0 once it is Ready, as kube-ovn's CNI daemon does.
        for switch in sorted(s for s in switches if s):
            if controller is not None:
                self.wait_store(server, controller, "subnets", None, switch, _subnet_ready, "Ready")
        wiring.set_subnets(server.store.list("subnets", None))
        for node_name, _ in NODES:
            node = server.store.get("nodes", None, node_name)
            rows.append(
                MatrixPod(
                    f"node/{node_name}",
                    wiring.node_netns(node_name),
                    plan_node(node).ips.split(",")[0],
                    "",
                )
            )
        results = matrix.measure(lambda netns, ip: wiring.dp.ping(netns, ip, wait=1.0), rows)
        self.say(
            "\nconnectivity: one ping from each pod or node (row) to each pod and node (column) "
            "and to its gateway; ✓ round-trip ms, ✗ no answer within 1 s"
        )
        for line in matrix.format_matrix(rows, results):
            self.say(line)
        self.say(matrix.summary(results))

    def show_pods(
        self,
        server: DemoApi,
        nb: NbClient,
        controller: ControllerProcess,
        pods: Sequence[tuple[str, str]],
        wiring: CniWiring | None = None,
    ) -> bool:
        """Print a row per pod as it comes up; True when all are up in time."""
        store = server.store
        node_ips = dict(NODES)
        widths = column_widths([name for _, name in pods])
        pending = {f"{ns}/{name}" for ns, name in pods}
        created = time.monotonic()
        self.say("")
        self.say(format_line(COLUMNS, widths))
        watcher = store.watch("pods", build_selector(DEMO_NAMESPACE, None, None, ()), None)
        deadline = created + self.options.timeout
        try:
            while pending:
                for ns, name in pods:
                    key = f"{ns}/{name}"
                    if key not in pending:
                        continue
                    try:
                        pod = store.get("pods", ns, name)
                    except ApiError:
                        continue
                    status = kubelet_status(pod, node_ips)
                    if status is not None and (pod.get("status") or {}).get("podIP") is None:
                        if wiring is not None:
                            # as kube-ovn's CNI: wired once routed, Running once bound
                            if (pod["metadata"].get("annotations") or {}).get(
                                ROUTED_ANNOTATION
                            ) != "true":
                                continue
                            try:
                                wiring.wire(pod)
                            except WiringError as exc:
                                raise DemoError(f"data plane: {exc}") from exc
                        store.patch("pods", ns, name, {"status": status}, subresource="status")
                    port = nb.get_port(pod_name_to_port_name(name, ns))
                    row = pod_row(
                        pod, None if port is None else port.switch, time.monotonic() - created
                    )
                    if row is not None:
                        pending.discard(key)
                        self.say(format_row(row, widths))
                if not pending:
                    break
                self.check_alive(controller)
                if time.monotonic() > deadline:
                    self.say(
                        f"not up after {self.options.timeout}s: {', '.join(sorted(pending))}"
                        f"\n{_tail(controller.log_path)}"
                    )
                    return False
                # Woken by any pod write; the timeout bounds how late we see a signal or an NB
                # port that lands without a pod write after it.
                watcher.next(_POLL)
                self.check_stop()
        finally:
            watcher.close()
        self.say(f"\nall {len(pods)} pods are up")
        return True


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The NB reader's reconnect chatter is not for the demo's audience.
    for noisy in ("ovsdbapp", "ovs"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    flag = StopFlag()
    flag.install()
    try:
        return Demo(options, flag, sys.stdout).run()
    finally:
        flag.restore()
