"""The real-node bed: everything real but the CNI daemon, which is kube-ovn-cni's stand-in.

`open_bed(plane, kubelet, workdir)` starts, against a started `RealControlPlane`:

* a throwaway NB ovsdb-server and the OVN data plane on it (`DataPlane`);
* the controller as a subprocess (`python -m cmd.controller`), authenticated as the chart's
  ServiceAccount, so it can be SIGKILLed and started again (`bed.kill_controller()`,
  `bed.start_controller()`);
* per node a `CniDaemon` on a socket of its own, the `kube-ovn` plugin installed into a CNI bin
  dir and a conflist naming the node's socket;
* `RealNodes` (rn1, rn2): containerd + kubelet each, whose containerd execs the plugin.

It returns once the controller is ready and both nodes have their join address wired as `ovn0`.
Helpers: `kubectl(...)`, `join_ip(node)`, `pods(namespace)`, `audit()` (`check --strict`
against the bed, exit code and report) and `held_twice()` (addresses that two live pods hold).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from controller.core.constants import ALLOCATED_ANNOTATION, IP_ADDRESS_ANNOTATION
from controller.sandbox.cluster.controlplane import RealControlPlane, render_chart
from controller.sandbox.cluster.realnode import RealNodes
from controller.sandbox.ovn.cni_daemon import CniDaemon
from controller.sandbox.ovn.cni_install import conflist, install_plugin
from controller.sandbox.ovn.dataplane import DataPlane
from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.processes import die_with_parent, free_tcp_ports
from controller.testing.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODES = ("rn1", "rn2")
CONTROLLER_NAMESPACE = "kube-system"
LEASE_FLAGS = (
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
)


@dataclass
class Bed:
    plane: RealControlPlane
    nb_server: NbServer
    dp: DataPlane
    nodes: RealNodes
    daemons: dict[str, CniDaemon]
    api: Any
    workdir: Path
    controller_kubeconfig: Path
    admin_kubeconfig: Path
    controller: subprocess.Popen[bytes] | None = None
    metrics_port: int = 0
    controller_starts: int = 0
    _log: Any = field(default=None, repr=False)

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return client.AppsV1Api(self.api)

    @property
    def controller_log(self) -> Path:
        return self.workdir / "controller.log"

    # ------------------------------------------------------------------ the controller

    def start_controller(self) -> None:
        (self.metrics_port,) = free_tcp_ports(1)
        self.controller_starts += 1
        argv = [
            sys.executable, "-m", "cmd.controller",
            f"--kubeconfig={self.controller_kubeconfig}",
            f"--ovn-nb-addr={self.nb_server.remote}",
            "--metrics-addr=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            "--worker-num=2",
            *LEASE_FLAGS,
        ]  # fmt: skip
        env = {
            **os.environ,
            "POD_NAME": f"kube-ovn-controller-{self.controller_starts}",
            "KUBE_NAMESPACE": CONTROLLER_NAMESPACE,
        }
        self._log = self.controller_log.open("ab")
        self.controller = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, preexec_fn=die_with_parent(),  # noqa: PLW1509
        )  # fmt: skip
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"

        def ready() -> bool:
            if self.controller is None or self.controller.poll() is not None:
                raise AssertionError(f"the controller exited:\n{self.controller_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=2) as resp,
            ):
                return bool(resp.status == 200)
            return False

        wait_for(ready, timeout=60, message="the controller ready")

    def kill_controller(self) -> None:
        """SIGKILL, as an OOM kill or a node failure would."""
        proc, self.controller = self.controller, None
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop_controller(self) -> None:
        proc, self.controller = self.controller, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def controller_tail(self, lines: int = 40) -> str:
        try:
            text = self.controller_log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ reading the cluster

    def kubectl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.admin_kubeconfig}", *args],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def join_ip(self, node: str) -> str:
        ann = self.core.read_node(node).metadata.annotations or {}
        return str(ann[IP_ADDRESS_ANNOTATION])

    def pods(self, namespace: str, selector: str = "") -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def held_twice(self) -> dict[str, list[str]]:
        """Addresses that more than one live pod holds (annotation or status.podIP)."""
        holders: dict[str, list[str]] = {}
        for pod in self.core.list_pod_for_all_namespaces().items:
            if pod.spec.host_network:
                continue
            ann = pod.metadata.annotations or {}
            name = f"{pod.metadata.namespace}/{pod.metadata.name}"
            ips = set()
            if ann.get(ALLOCATED_ANNOTATION) == "true":
                ips.update(a for a in ann.get(IP_ADDRESS_ANNOTATION, "").split(",") if a)
            if pod.status and pod.status.pod_ip:
                ips.add(pod.status.pod_ip)
            for ip in ips:
                holders.setdefault(ip, []).append(name)
        counts = Counter({ip: len(h) for ip, h in holders.items()})
        return {ip: holders[ip] for ip, n in counts.items() if n > 1}

    def audit(self) -> tuple[int, str]:
        """`check --strict` (controller.audit.check) against this bed: exit code and report."""
        from controller.audit.check import run_check
        from controller.config import parse_args

        out = io.StringIO()
        argv = [
            "check",
            f"--kubeconfig={self.admin_kubeconfig}",
            f"--ovn-nb-addr={self.nb_server.remote}",
        ]
        code = run_check(
            parse_args(argv, {"KUBE_NAMESPACE": CONTROLLER_NAMESPACE}), out=out, strict=True
        )
        return code, out.getvalue()


@contextmanager
def open_bed(plane: RealControlPlane, kubelet: Path, workdir: Path) -> Iterator[Bed]:
    chart = render_chart()
    plane.install_crds(chart)
    controller_kubeconfig = plane.write_controller_kubeconfig(workdir / "controller.kubeconfig")
    admin_kubeconfig = plane.write_admin_kubeconfig(workdir / "admin.kubeconfig")
    with contextlib.ExitStack() as stack:
        nb_server = NbServer(workdir / "nb").start()
        stack.callback(nb_server.stop)
        dp = DataPlane(workdir / "dp", nb_server.remote).start()
        stack.callback(dp.stop)
        api = plane.api_client()
        stack.callback(api.close)
        plugin_dir = install_plugin(workdir / "cni-bin").parent
        sockets = {n: workdir / f"cni-{n}.sock" for n in NODES}
        daemons: dict[str, CniDaemon] = {}
        for name in NODES:
            daemon = CniDaemon.for_cluster(api, dp, name, sockets[name])
            daemons[name] = daemon.start()
            stack.callback(daemon.stop)
        nodes = RealNodes(
            plane,
            workdir / "nodes",
            list(NODES),
            kubelet=kubelet,
            cni_bin_dirs=[plugin_dir],
            cni_conflist=lambda n: conflist(str(sockets[n])),
        )
        bed = Bed(
            plane, nb_server, dp, nodes, daemons, api, workdir,
            controller_kubeconfig, admin_kubeconfig,
        )  # fmt: skip
        stack.callback(bed.stop_controller)
        bed.start_controller()
        nodes.start()
        stack.callback(nodes.stop)
        for name in NODES:
            daemon = daemons[name]
            wait_for(
                lambda d=daemon, n=name: d.wiring.ensure_node(n),  # type: ignore[misc]
                timeout=60,
                message=f"node {name}'s join address wired as ovn0",
            )
        yield bed


def workload_pod_spec(probe_targets: list[str], node: str | None = None) -> dict[str, Any]:
    """busybox that runs until told to stop; Ready while it reaches every `probe_targets` (the
    nodes' ovn0 addresses: the reply comes back by the node's route to the pod's subnet)."""
    probe = " && ".join(f"ping -c1 -W1 {ip} >/dev/null" for ip in probe_targets) or "true"
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 5,
        "containers": [
            {
                "name": "busybox",
                "image": "localhost/kube-ovn-sandbox/busybox:1",
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                "readinessProbe": {
                    "exec": {"command": ["/bin/sh", "-c", probe]},
                    "periodSeconds": 2,
                    "timeoutSeconds": 5,
                },
            }
        ],
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return spec


def ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def wait_rollout(
    bed: Bed, namespace: str, selector: str, replicas: int, timeout: float
) -> list[Any]:
    """Wait until exactly `replicas` live pods match and all are Running and Ready."""

    def done() -> list[Any] | None:
        pods = [p for p in bed.pods(namespace, selector) if p.metadata.deletion_timestamp is None]
        all_pods = bed.pods(namespace, selector)
        if len(pods) == replicas == len(all_pods) and all(ready(p) for p in pods):
            return pods
        return None

    try:
        return wait_for(done, timeout=timeout, message=f"{replicas} Ready pods of {selector}")
    except Exception:
        states = [
            (p.metadata.name, p.status.phase, ready(p), p.spec.node_name)
            for p in bed.pods(namespace, selector)
        ]
        events = bed.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp")
        raise AssertionError(
            f"pods of {selector}: {states}\nevents:\n{events.stdout[-3000:]}\n"
            f"controller log:\n{bed.controller_tail()}"
        ) from None
