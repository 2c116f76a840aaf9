"""Fixtures of the fault-injection suite, on top of the end-to-end ones (tests/e2e/conftest.py).

* `cluster` / `start_controller`: re-exported from the e2e suite (emulator + standalone NB);
* `raft_cluster`: the same `Cluster`, but its NB database is a 3-member Raft cluster
  (`NbCluster`; `cluster.nb_server` is then the `NbCluster`);
* `controller_process`: starts the real `python -m cmd.controller` as a child process (so a test
  can SIGKILL it), each with a metrics port of its own; every child still running has its
  routing gc counters judged (tests/e2e/backstop.py) and is killed at teardown;
* `routing_backstop`: the e2e suite's check that routing gc found nothing, after every test;
* `auditor`: the verdict's reader (`helpers.Auditor`) over the standalone cluster.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.ovn.ovsdb import NbCluster
from tests.e2e import backstop
from tests.e2e.conftest import Cluster, cluster, routing_backstop, start_controller
from tests.e2e.helpers import node
from tests.faults.helpers import Auditor

__all__ = ["cluster", "routing_backstop", "start_controller"]

ROOT = Path(__file__).resolve().parents[2]
# Faults leave orphans only the periodic gc can collect: run it (and inspection) often.
FAULT_FLAGS = ("--gc-interval=1", "--inspect-interval=1", "--ovn-timeout=3")
#: Why a scenario runs on the emulator alone (test_real_faults.py has the real plane's faults).
EMULATOR_FAULTS = (
    "deterministic API fault injection (per verb and resource, latency) by the emulator; "
    "test_real_faults.py injects faults on the real plane"
)
NB_FAULTS = "an NB fault: the API plane adds nothing, it runs on the emulator"


class ControllerProcess(Protocol):
    """Starts `python -m cmd.controller` with the cluster's flags plus `extra`."""

    started: list[subprocess.Popen[bytes]]

    def __call__(self, *extra: str, identity: str = ...) -> subprocess.Popen[bytes]: ...


@pytest.fixture
def raft_cluster() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="faults") as d:
        workdir = Path(d)
        nb_cluster = NbCluster(workdir / "nb", size=3).start()
        server = ApiServer(bookmark_interval=0.5).start()
        server.store.create("nodes", node())
        kubeconfig = server.write_kubeconfig(workdir / "kubeconfig")
        reader = None
        try:
            reader = OvsdbappNbClient.from_addr(nb_cluster.remote, timeout=10.0)
            # the Raft cluster in the single server's place: what the controller and the audit
            # use of it is `remote`; its test narrows it to NbCluster (hence the ignore)
            yield Cluster(server, nb_cluster, kubeconfig, reader)  # type: ignore[arg-type]
        finally:
            if reader is not None:
                reader.close()
            server.stop()
            nb_cluster.stop()


@pytest.fixture
def auditor(cluster: Cluster) -> Iterator[Auditor]:
    reader = Auditor(cluster)
    try:
        yield reader
    finally:
        reader.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def controller_process(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ControllerProcess]:
    procs: list[subprocess.Popen[bytes]] = []
    metrics: dict[int, tuple[str, str]] = {}  # pid -> (identity, metrics URL)

    def start(*extra: str, identity: str = "proc-a") -> subprocess.Popen[bytes]:
        env = {**os.environ, "POD_NAME": identity, "KUBE_NAMESPACE": "kube-system"}
        log = (tmp_path / f"{identity}-{len(procs)}.log").open("wb")
        port = _free_port()  # the last --metrics-port wins: the backstop check reads it
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    *("-m", "cmd.controller"),
                    *cluster.argv(*extra, f"--metrics-port={port}"),
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()  # the child holds its own descriptor
        procs.append(proc)
        metrics[proc.pid] = (identity, f"http://127.0.0.1:{port}/metrics")
        return proc

    launcher: Any = start
    launcher.started = procs
    yield launcher
    problems: list[str] = []
    judge = backstop.judged(request)
    for proc in procs:
        if proc.poll() is None:
            problems += backstop.check_process(*metrics[proc.pid], judge=judge)
            proc.kill()
        proc.wait(10)
    backstop.fail_on(problems)
