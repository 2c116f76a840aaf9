"""Real nodes under the controller: everything real but kube-ovn-cni, whose stand-in serves the
real `kube-ovn` CNI plugin (`python -m controller.sandbox.demo --control-plane real --node real`,
and the tests/realnode tier).

Contract:

* `open_real_node_bed(plane, kubelet, workdir, ...)` starts, against a started
  `RealControlPlane`: the chart's CRDs, a throwaway NB ovsdb-server and the OVN data plane on it
  (`DataPlane`), the controller as a subprocess (`python -m cmd.controller`) authenticated as the
  chart's ServiceAccount, one `CniDaemon` per node on a socket of its own with the `kube-ovn`
  plugin installed and a conflist naming that socket, then `RealNodes` (containerd + kubelet
  per node) whose containerd execs the plugin. It yields a `RealNodeBed` once the controller is
  ready, the nodes are Ready and each node's join address is wired as its `ovn0`; leaving it
  stops everything in reverse order.
* `RealNodeBed.kill_controller()` SIGKILLs the controller; `start_controller()` starts a new one
  (same flags, a fresh metrics port unless one is given) and waits for `/readyz`.
* `workload_pod_spec(targets)`: the busybox pod of the demo and the tier, Ready while it pings
  every address of `targets` (the nodes' ovn0 addresses: the reply comes back by the node's route
  to the pod's subnet, so Ready means node <-> pod reachability both ways).
* `wait_rollout(bed, namespace, selector, replicas, timeout)`: exactly `replicas` pods, all
  Running and Ready; `SandboxError` with their states, the namespace's events and the
  controller's log tail at the deadline.
* `run_demo(host, stack, workdir)`: the demo's flow on real nodes (see its docstring).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from controller.core.constants import IP_ADDRESS_ANNOTATION
from controller.sandbox.cluster.controlplane import RealControlPlane, render_chart
from controller.sandbox.cluster.images import BUSYBOX_IMAGE
from controller.sandbox.cluster.realnode import RealNodes, find_kubelet
from controller.sandbox.ovn.cni_daemon import CniDaemon
from controller.sandbox.ovn.cni_install import conflist, install_plugin
from controller.sandbox.ovn.dataplane import DataPlane
from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.processes import SandboxError, die_with_parent, free_tcp_ports
from controller.testing.wait import WaitTimeout, wait_for

REPO_ROOT = Path(__file__).resolve().parents[3]
NODES = ("rn1", "rn2")
CONTROLLER_NAMESPACE = "kube-system"
LEASE_FLAGS = (
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
)


def _wait(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """`wait_for`, failing as the sandbox fails: a `SandboxError` saying what did not come."""
    try:
        return wait_for(cond, timeout, what, interval=interval)
    except WaitTimeout:
        raise SandboxError(f"{what}: not within {timeout:.0f}s") from None


@dataclass
class RealNodeBed:
    """What `open_real_node_bed` started (module docstring)."""

    plane: RealControlPlane
    nb_server: NbServer
    dp: DataPlane
    nodes: RealNodes
    daemons: dict[str, CniDaemon]
    api: Any
    workdir: Path
    controller_kubeconfig: Path
    admin_kubeconfig: Path
    controller_args: Sequence[str] = ()
    metrics_port: int = 0
    controller: subprocess.Popen[bytes] | None = None
    controller_starts: int = 0
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def core(self) -> Any:
        from kubernetes import client  # noqa: PLC0415

        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        from kubernetes import client  # noqa: PLC0415

        return client.AppsV1Api(self.api)

    @property
    def controller_log(self) -> Path:
        return self.workdir / "controller.log"

    # ------------------------------------------------------------------ the controller

    def start_controller(self, metrics_port: int = 0, timeout: float = 60.0) -> None:
        self.metrics_port = metrics_port or free_tcp_ports(1)[0]
        self.controller_starts += 1
        argv = [
            sys.executable, "-m", "cmd.controller",
            f"--kubeconfig={self.controller_kubeconfig}",
            f"--ovn-nb-addr={self.nb_server.remote}",
            "--metrics-addr=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            *LEASE_FLAGS,
            *self.controller_args,
        ]  # fmt: skip
        env = {
            **os.environ,
            "POD_NAME": f"kube-ovn-controller-{self.controller_starts}",
            "KUBE_NAMESPACE": CONTROLLER_NAMESPACE,
        }
        self._log = self.controller_log.open("ab")
        self.controller = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, preexec_fn=die_with_parent(),  # noqa: PLW1509
        )  # fmt: skip
        url = f"http://127.0.0.1:{self.metrics_port}/readyz"

        def ready() -> bool:
            if self.controller is None or self.controller.poll() is not None:
                raise SandboxError(f"the controller exited:\n{self.controller_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=2) as resp,
            ):
                return bool(resp.status == 200)
            return False

        _wait(ready, timeout, f"the controller ready at {url}")

    def kill_controller(self) -> None:
        """SIGKILL, as an OOM kill or a node failure would."""
        proc, self.controller = self.controller, None
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        self._close_log()

    def stop_controller(self) -> None:
        proc, self.controller = self.controller, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._close_log()

    def _close_log(self) -> None:
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

    def exec_ping(self, namespace: str, pod: str, target: str) -> bool:
        out = self.kubectl("exec", "-n", namespace, pod, "--", "ping", "-c1", "-W2", target)
        return out.returncode == 0


@contextmanager
def open_real_node_bed(
    plane: RealControlPlane,
    workdir: Path,
    *,
    kubelet: Path | None = None,
    nodes: Sequence[str] = NODES,
    controller_args: Sequence[str] = ("--worker-num=2",),
    metrics_port: int = 0,
) -> Iterator[RealNodeBed]:
    """See the module docstring."""
    workdir.mkdir(parents=True, exist_ok=True)
    kubelet = kubelet or find_kubelet()
    chart = render_chart()
    plane.install_crds(chart)
    controller_kubeconfig = plane.write_controller_kubeconfig(
        workdir / "controller.kubeconfig", chart
    )
    admin_kubeconfig = plane.write_admin_kubeconfig(workdir / "admin.kubeconfig")
    with contextlib.ExitStack() as stack:
        nb_server = NbServer(workdir / "nb").start()
        stack.callback(nb_server.stop)
        dp = DataPlane(workdir / "dp", nb_server.remote).start()
        stack.callback(dp.stop)
        api = plane.api_client()
        stack.callback(api.close)
        plugin_dir = install_plugin(workdir / "cni-bin").parent
        sockets = {n: workdir / f"cni-{n}.sock" for n in nodes}
        daemons: dict[str, CniDaemon] = {}
        for name in nodes:
            daemon = CniDaemon.for_cluster(api, dp, name, sockets[name])
            daemons[name] = daemon.start()
            stack.callback(daemon.stop)
        real_nodes = RealNodes(
            plane,
            workdir / "nodes",
            list(nodes),
            kubelet=kubelet,
            cni_bin_dirs=[plugin_dir],
            cni_conflist=lambda n: conflist(str(sockets[n])),
        )
        bed = RealNodeBed(
            plane, nb_server, dp, real_nodes, daemons, api, workdir,
            controller_kubeconfig, admin_kubeconfig, controller_args,
        )  # fmt: skip
        stack.callback(bed.stop_controller)
        bed.start_controller(metrics_port)
        real_nodes.start()
        stack.callback(real_nodes.stop)
        for name in nodes:
            daemon = daemons[name]
            _wait(
                lambda d=daemon, n=name: d.wiring.ensure_node(n),  # type: ignore[misc]
                60,
                f"node {name}'s join address wired as ovn0",
            )
        yield bed


def workload_pod_spec(probe_targets: Sequence[str], node: str | None = None) -> dict[str, Any]:
    """busybox that runs until told to stop, Ready while it pings every `probe_targets`."""
    probe = " && ".join(f"ping -c1 -W1 {ip} >/dev/null" for ip in probe_targets) or "true"
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 5,
        "containers": [
            {
                "name": "busybox",
                "image": BUSYBOX_IMAGE,
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


def pod_ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def wait_rollout(
    bed: RealNodeBed,
    namespace: str,
    selector: str,
    replicas: int,
    timeout: float,
    *,
    stop: Callable[[], None] = lambda: None,
) -> list[Any]:
    """Exactly `replicas` pods of `selector`, all Running and Ready (module docstring)."""

    def done() -> list[Any] | None:
        stop()
        pods = bed.pods(namespace, selector)
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        if len(live) == replicas == len(pods) and all(pod_ready(p) for p in live):
            return live
        return None

    try:
        result: list[Any] = _wait(done, timeout, f"{replicas} Ready pods of {selector}", 0.5)
    except SandboxError:
        states = [
            (p.metadata.name, p.status.phase, pod_ready(p), p.spec.node_name)
            for p in bed.pods(namespace, selector)
        ]
        events = bed.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp")
        raise SandboxError(
            f"pods of {selector} not all Ready within {timeout:.0f}s: {states}\n"
            f"events:\n{events.stdout[-3000:]}\ncontroller log:\n{bed.controller_tail()}"
        ) from None
    return result


# --------------------------------------------------------------------------- the demo


class DemoHost(Protocol):
    """What the demo's runner offers this flow (controller.sandbox.demo.app.Demo)."""

    def say(self, text: str) -> None: ...

    def check_stop(self) -> None: ...


DEMO_NAMESPACE = "demo"
DEMO_SUBNET = "demo-subnet"
DEMO_CIDR = "10.100.0.0/24"


def _subnet(name: str, cidr: str, namespaces: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": name},
        "spec": {"cidrBlock": cidr, "protocol": "IPv4", "namespaces": namespaces},
    }


def _workload(kind: str, name: str, replicas: int, spec: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": DEMO_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }
    if kind == "StatefulSet":
        body["spec"]["serviceName"] = name
    return body


def run_demo(
    host: DemoHost,
    stack: contextlib.ExitStack,
    workdir: Path,
    *,
    deployment_pods: int,
    timeout: float,
    metrics_port: int,
    wait_forever: Callable[[], None] | None,
) -> int:
    """The demo on real nodes: two nodes (containerd + kubelet each), the controller, the CNI
    daemons; a Deployment `demo-app` (`deployment_pods`) in `default` (ovn-default) and a
    StatefulSet `web` (2) in `demo` on `demo-subnet`, all busybox with the ovn0-ping readiness
    probe; a table of the pods once Ready, then a matrix of `kubectl exec` pings between them.
    With `wait_forever` it serves until that returns (Ctrl-C), else it returns at once."""
    from controller.sandbox.cluster.controlplane import RealControlPlane  # noqa: PLC0415

    plane = RealControlPlane(workdir / "control-plane")
    stack.callback(plane.stop)
    plane.start()
    host.say(f"real control plane at {plane.url} (logs in {plane.workdir})")
    host.check_stop()
    bed_cm = open_real_node_bed(plane, workdir / "bed", metrics_port=metrics_port)
    bed = stack.enter_context(bed_cm)
    host.say(
        "real nodes "
        + ", ".join(f"{n} ({bed.nodes.node(n).ip}, ovn0 {bed.join_ip(n)})" for n in NODES)
        + f"; controller pid {bed.controller.pid if bed.controller else '?'}, "
        f"log {bed.controller_log}"
    )
    host.check_stop()
    targets = [bed.join_ip(n) for n in NODES]
    bed.core.create_namespace({"metadata": {"name": DEMO_NAMESPACE}})
    plane.apply([_subnet(DEMO_SUBNET, DEMO_CIDR, [DEMO_NAMESPACE])])
    spread = workload_pod_spec(targets)
    spread["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "demo-app"}},
        }
    ]
    t0 = time.monotonic()
    app = _workload("Deployment", "demo-app", deployment_pods, spread)
    app["metadata"]["namespace"] = "default"
    bed.apps.create_namespaced_deployment("default", app)
    bed.apps.create_namespaced_stateful_set(
        DEMO_NAMESPACE, _workload("StatefulSet", "web", 2, workload_pod_spec(targets))
    )
    host.say(
        f"created Deployment default/demo-app ({deployment_pods}) and StatefulSet {DEMO_NAMESPACE}"
        f"/web (2) on {DEMO_SUBNET} ({DEMO_CIDR}); image {BUSYBOX_IMAGE}, readiness: ping "
        f"{' and '.join(targets)}"
    )
    pods = [
        *wait_rollout(bed, "default", "app=demo-app", deployment_pods, timeout,
                      stop=host.check_stop),
        *wait_rollout(bed, DEMO_NAMESPACE, "app=web", 2, timeout, stop=host.check_stop),
    ]  # fmt: skip
    host.say(f"every pod Running and Ready after {time.monotonic() - t0:.1f}s:")
    host.say(f"  {'POD':<36} {'IP':<15} {'NODE':<5} SWITCH")
    for p in pods:
        ann = p.metadata.annotations or {}
        host.say(
            f"  {p.metadata.namespace + '/' + p.metadata.name:<36} {p.status.pod_ip:<15} "
            f"{p.spec.node_name:<5} {ann.get('ovn.kubernetes.io/logical_switch', '')}"
        )
    host.say("kubectl exec ping (row -> column):")
    names = [p.metadata.name for p in pods]
    host.say("  " + " " * 36 + " ".join(f"{i:>3}" for i in range(len(pods))))
    failures = 0
    for i, source in enumerate(pods):
        host.check_stop()
        cells = []
        for j, target in enumerate(pods):
            if i == j:
                cells.append("  -")
                continue
            ok = bed.exec_ping(
                source.metadata.namespace, source.metadata.name, target.status.pod_ip
            )
            failures += 0 if ok else 1
            cells.append(" ok" if ok else "  X")
        host.say(f"  {i:>2} {names[i]:<33} " + " ".join(cells))
    if failures:
        host.say(f"{failures} pings got no answer")
        return 1
    host.say(f"metrics: http://127.0.0.1:{bed.metrics_port}/metrics")
    if wait_forever is None:
        host.say("--once: every pod is up and reaches every other; stopping")
        return 0
    host.say(f"try: kubectl --kubeconfig {bed.admin_kubeconfig} get pods -A -o wide")
    host.say("serving until Ctrl-C")
    wait_forever()
    return 0
