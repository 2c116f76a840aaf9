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

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from controller.ovn.api import OvnError
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode
from controller.sandbox.cluster.scheduler import PodScheduler
from controller.sandbox.cluster.workloads import StatefulSetController
from controller.sandbox.demo import realnodes
from controller.sandbox.demo.objects import (
    CONTROLLER_NAMESPACE,
    DEMO_NAMESPACE,
    NODES,
    node_labels,
)
from controller.sandbox.demo.options import DemoOptions, parse_args
from controller.sandbox.demo.real import RealDemoServer
from controller.sandbox.demo.session import DemoApi, Session
from controller.sandbox.demo.show import show_matrix, show_pods
from controller.sandbox.demo.steps import create_demo, seed_cluster, start_dataplane
from controller.sandbox.demo.supervision import (
    ControllerProcess,
    DemoError,
    Interrupted,
    StopFlag,
    free_port,
    metrics_port_is_free,
)
from controller.sandbox.ovn.cni import CniWiring
from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.processes import SandboxError

LOG = logging.getLogger(__name__)


class _KeepWired:
    """The data plane wiring for the sandbox kubelet, leaving alone the pods the demo wired."""

    def __init__(self, wiring: CniWiring) -> None:
        self.wiring = wiring

    def wire(self, pod: Mapping[str, Any]) -> None:
        if self.wiring.wired_plans(pod) is None:
            self.wiring.wire(pod)

    def unwire(self, pod: Mapping[str, Any]) -> None:
        self.wiring.unwire(pod)


class Demo:
    """One sandbox run; `run()` returns the exit code. Everything started is pushed on an
    ExitStack, so whatever the point of failure or interruption, it is stopped in reverse."""

    def __init__(self, options: DemoOptions, flag: StopFlag, out: TextIO) -> None:
        self.options = options
        self.flag = flag
        self.session = Session(options, flag, out)
        self.metrics_port = options.metrics_port
        self.kept: Path | None = None  # a given --workdir, left in place at exit

    def say(self, text: str) -> None:
        self.session.say(text)

    def check_stop(self) -> None:
        self.session.check_stop()

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
            self.metrics_port = free_port()
        elif not metrics_port_is_free(self.metrics_port):
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
        stack.callback(self.session.stop_step, "NB ovsdb-server", nb_server.stop)
        try:
            nb_server.start()
        except SandboxError as exc:
            raise DemoError(f"NB ovsdb-server: {exc} (run `bash .ci/setup` first)") from exc
        self.say(f"NB ovsdb-server ready at {nb_server.remote} (pid {nb_server.pid})")
        self.check_stop()

        server, kubeconfig, admin = self._start_api(stack, workdir)
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
        self.session.wait_ready(controller, self.metrics_port)
        self.say(f"controller ready: http://127.0.0.1:{self.metrics_port}/readyz")

        try:
            nb = self._nb_reader(nb_server.remote)
        except OvnError as exc:
            raise DemoError(f"cannot read the NB database: {exc}") from exc
        try:
            wiring = start_dataplane(
                self.session, stack, workdir, nb_server.remote, server, controller
            )
            pods = create_demo(self.session, server, controller)
            up = show_pods(self.session, server, nb, controller, pods, wiring)
        finally:
            nb.close()
        if not up:
            return 1
        if wiring is not None:
            show_matrix(self.session, server, wiring, pods, controller)
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
            self.session.check_alive(controller)
        self.say("stopping")
        return 0

    def _start_api(self, stack: contextlib.ExitStack, workdir: Path) -> tuple[DemoApi, Path, Path]:
        """The emulator or the real control plane, seeded; (server, kubeconfig, admin's)."""
        server: DemoApi
        if self.options.control_plane == "real":
            server = RealDemoServer(workdir)
            try:
                server.start()
            except SandboxError as exc:
                server.stop()  # whatever part of it did start
                raise DemoError(f"real control plane: {exc}") from exc
            stack.callback(self.session.stop_step, "the real control plane", server.stop)
            kubeconfig = server.write_kubeconfig(workdir / "kubeconfig")
            admin = server.write_admin_kubeconfig(workdir / "admin.kubeconfig")
            seed_cluster(server)
            self.say(
                f"real control plane at {server.url} (controller kubeconfig {kubeconfig}, "
                f"admin {admin}, logs in {server.plane.workdir})"
            )
        else:
            server = ApiServer(bookmark_interval=5.0)
            stack.callback(self.session.stop_step, "API server emulator", server.stop)
            server.start()
            kubeconfig = admin = server.write_kubeconfig(workdir / "kubeconfig")
            seed_cluster(server)
            self.say(f"API server emulator at {server.url} (kubeconfig {kubeconfig})")
        return server, kubeconfig, admin

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

    def _stop_controller(self, controller: ControllerProcess) -> None:
        if controller.pid is None:
            return
        pid = controller.pid
        code = controller.stop(self.flag)
        self.say(f"stopped the controller (pid {pid}, exit code {code})")

    def _nb_reader(self, remote: str) -> OvsdbappNbClient:
        return OvsdbappNbClient.from_addr(remote, timeout=10.0)


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
