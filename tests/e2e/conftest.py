"""End-to-end fixtures: the API server emulator, a real NB ovsdb-server, controllers in-process.

Every test gets its own emulator (one node, `node1`) and its own NB database. `start_controller`
builds the real `controller.app.Controller` from command-line flags, with short lease timings so
leader-election scenarios finish in seconds; every controller it started is stopped at teardown.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.app import Controller, run_controller
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox import ApiServer
from controller.sandbox.ovsdb import NbServer
from tests.e2e.helpers import NODE, node, running

LEASE_FLAGS = (
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
)


@dataclass
class Cluster:
    server: ApiServer
    nb_server: NbServer
    kubeconfig: Path
    nb: OvsdbappNbClient  # a reader for assertions (the controller has its own connection)

    def argv(self, *extra: str) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--ovn-nb-addr={self.nb_server.remote}",
            "--ovn-timeout=10",
            "--metrics-addr=127.0.0.1",
            "--metrics-port=0",
            "--inspect-interval=1",
            "--worker-num=2",
            *LEASE_FLAGS,
            *extra,
        ]


@contextmanager
def open_cluster() -> Iterator[Cluster]:
    """A fresh emulator (one node) and NB database; what the `cluster` fixture yields. Module-
    scoped fixtures (one controller run shared by a table of tests) enter it themselves."""
    with tempfile.TemporaryDirectory(prefix="e2e") as d:
        workdir = Path(d)
        nb_server = NbServer(workdir / "nb").start()
        server = ApiServer(bookmark_interval=0.5).start()
        server.store.create("nodes", node())
        kubeconfig = server.write_kubeconfig(workdir / "kubeconfig")
        reader = OvsdbappNbClient.from_addr(nb_server.remote, timeout=10.0)
        try:
            yield Cluster(server, nb_server, kubeconfig, reader)
        finally:
            reader.close()
            server.stop()
            nb_server.stop()


def launch_controller(cluster: Cluster, *extra: str, identity: str = "controller-a") -> Controller:
    """Start the real controller in-process against `cluster` (the caller stops it)."""
    env = {"POD_NAME": identity, "KUBE_NAMESPACE": "kube-system", "KUBE_NODE_NAME": NODE}
    return run_controller(cluster.argv(*extra), env, startup_wait=10.0, status_delay=0.1)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with open_cluster() as c:
        yield c


StartController = Callable[..., Controller]


@pytest.fixture
def start_controller(cluster: Cluster) -> Iterator[StartController]:
    started: list[Controller] = []

    def start(*extra: str, identity: str = "controller-a") -> Controller:
        controller = launch_controller(cluster, *extra, identity=identity)
        started.append(controller)
        return controller

    yield start
    for controller in started:
        controller.stop()


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    """One controller with the default flags, its workers running (a module may override)."""
    controller = running(start_controller())
    return controller
