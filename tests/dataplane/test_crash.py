"""The controller SIGKILLed in the middle of a burst of pod creates and deletes, then restarted:
every surviving pod is reachable and answers for its own address only.

The controller is the real `python -m cmd.controller` process (so it can be SIGKILLed); this
module has its own cluster, data plane and sandbox kubelet, which wires pods as they get routed,
during the burst too. A TCP listener in every pod answers with the pod's name, so a probe learns
*who* answers at each address, not just that someone does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.core.constants import ALLOCATED_ANNOTATION, IP_ADDRESS_ANNOTATION
from controller.sandbox.processes import die_with_parent, stop_process
from tests.dataplane.helpers import DUAL_STACK, NS, Net, WiredPod, open_net
from tests.e2e.conftest import Cluster, open_cluster
from tests.e2e.helpers import get_or_none, wait_for

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ("--gc-interval=2", "--inspect-interval=1", "--ovn-timeout=5", *DUAL_STACK)
PORT = 7000
SPEC = {"containers": [{"name": "app", "image": "busybox"}], "nodeName": "node1"}


class Proc:
    """`python -m cmd.controller` against `cluster` (PDEATHSIG: it dies with the test run)."""

    def __init__(self, cluster: Cluster, log: Path) -> None:
        env = {**os.environ, "POD_NAME": "proc", "KUBE_NAMESPACE": "kube-system"}
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cmd.controller", *cluster.argv(*FLAGS)],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - one foreign call, no locks
            )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(10) == -signal.SIGKILL

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture(scope="module")
def crash_net() -> Iterator[tuple[Net, list[Proc], Path]]:
    with open_cluster() as cluster, tempfile.TemporaryDirectory(prefix="dpc") as d:
        workdir = Path(d)
        procs = [Proc(cluster, workdir / "controller.log")]
        try:
            with open_net(cluster, None, workdir / "dp") as net:
                yield net, procs, workdir
        finally:
            for p in procs:
                p.stop()


def _allocated(net: Net, names: list[str]) -> list[str]:
    out = []
    for name in names:
        obj = get_or_none(net.cluster.server, "pods", NS, name)
        ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        if ann.get(ALLOCATED_ANNOTATION) == "true":
            out.append(name)
    return out


def _diagnose(net: Net, pod: WiredPod) -> str:
    """What the API, the NB, OVS and the pod's namespace say about `pod` (for a failure)."""
    obj = net.cluster.server.store.get("pods", NS, pod.name)
    nb = subprocess.run(
        [
            "ovn-nbctl",
            f"--db={net.cluster.nb_server.remote}",
            "list",
            "logical_switch_port",
            pod.eth0.port,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    addr = net.dp.exec_in(pod.netns, ["ip", "addr", "show", "dev", "eth0"])
    binding = net.dp.sbctl(
        "--bare", "--columns=chassis,up", "find", "port_binding", f"logical_port={pod.eth0.port}"
    )
    return (
        f"pod {pod.name} uid {obj['metadata']['uid']} (wired uid {pod.obj['metadata']['uid']})\n"
        f"annotations: {obj['metadata'].get('annotations')}\n"
        f"NB: {nb.stdout}{nb.stderr}\nSB binding: {binding}\nnetns eth0: {addr}"
    )


def _create(net: Net, name: str) -> None:
    spec = {**SPEC, "terminationGracePeriodSeconds": 0}
    net.cluster.server.store.create(
        "pods", {"metadata": {"name": name, "namespace": NS}, "spec": spec}
    )


def test_after_a_sigkill_mid_burst_and_a_restart_every_survivor_answers_for_its_own_address(
    crash_net: tuple[Net, list[Proc], Path],
) -> None:
    net, procs, workdir = crash_net
    store = net.cluster.server.store
    wired: dict[str, WiredPod] = {}
    listeners: list[subprocess.Popen[bytes]] = []

    def started(name: str) -> None:
        pod = net.started(name, timeout=60)
        wired[name] = pod
        listeners.append(net.dp.tcp_listen(pod.netns, "::", PORT, reply=name.encode()))

    try:
        probe = net.create("probe")
        for i in range(6):
            _create(net, f"keep-{i}")
        for i in range(6):
            started(f"keep-{i}")
        before = {n: p.ip() for n, p in wired.items()}

        # the burst: creates while the controller's pod patches are slow, deletes of wired pods
        net.cluster.emulator.faults.add_latency(0.2, verb="patch", resource="pods")
        burst = [f"burst-{i}" for i in range(24)]
        for name in burst:
            _create(net, name)
        for name in ("keep-0", "keep-1"):
            net.delete(wired.pop(name))
        wait_for(
            lambda: 3 <= len(_allocated(net, burst)) < len(burst),
            timeout=30,
            interval=0.01,
            message="the burst half allocated",
        )
        procs[0].kill()
        net.cluster.emulator.faults.clear()

        # while no controller runs: more deletes (allocated or not) and creates
        for name in ("burst-0", "burst-23", "keep-2"):
            if name in wired:
                net.delete(wired.pop(name))
            else:
                store.delete("pods", NS, name)
                if get_or_none(net.cluster.server, "pods", NS, name) is not None:
                    store.finalize_delete("pods", NS, name)
        for name in ("late-0", "late-1"):
            _create(net, name)
        procs.append(Proc(net.cluster, workdir / "controller.log"))

        survivors = sorted(o["metadata"]["name"] for o in store.list("pods", NS))
        assert len(survivors) == 1 + 3 + 22 + 2  # probe, keep-3..5, burst-1..22, late-0..1
        for name in survivors:
            if name not in wired and name != "probe":
                started(name)

        # no two pods were given one address, and every pod still has the one it was wired with
        ips = {
            n: store.get("pods", NS, n)["metadata"]["annotations"][IP_ADDRESS_ANNOTATION]
            for n in survivors
        }
        for version in (0, 1):
            family = [ip.split(",")[version] for ip in ips.values()]
            assert len(set(family)) == len(family), f"an address given twice: {sorted(family)}"
        for name, pod in wired.items():
            wired_ips = ",".join(a.split("/")[0] for a in pod.eth0.addresses)
            assert ips[name] == wired_ips, (
                f"{name} was wired with {wired_ips}, its annotations now say {ips[name]}\n"
                f"{_diagnose(net, pod)}"
            )
        # every survivor answers at its address, and it is that pod which answers
        for name, pod in sorted(wired.items()):
            for version in (4, 6):
                try:
                    net.reaches(probe.netns, pod.ip(version))
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{_diagnose(net, pod)}") from None
                answer = net.dp.tcp_request(probe.netns, pod.ip(version), PORT)
                assert answer == name.encode(), f"{pod.ip(version)} answered {answer!r}, not {name}"
        # the deleted wired pods' addresses answer nothing (unless a survivor took one over)
        taken = {p.ip() for p in wired.values()}
        for name in ("keep-0", "keep-1", "keep-2"):
            if before[name] not in taken:
                net.silent(probe.netns, before[name])
    finally:
        for proc in listeners:
            stop_process(proc)
