"""End-to-end fixtures: an API server, a real NB ovsdb-server, controllers in-process.

The `cluster` fixture runs each test on two planes:

* `emulator`: its own API server emulator (one node, `node1`) and its own NB database;
* `real` (marked `realcp`): the session's real control plane (tests/fixtures/realbed.py), reset
  to the same starting point (one node `node1`, run by the sandbox kubelet), and its own NB
  database. The controller authenticates as the chart's ServiceAccount, so a missing RBAC grant
  fails the test; `cluster.server` is a `RealServer`, whose `store` has the emulator store's
  surface over REST (controller.sandbox.apiserver.remotestore).

A test that needs what only the emulator has (deterministic fault injection, its request log,
stopping and starting it, seeding objects with a status the real server manages) carries
`@pytest.mark.emulator_only("why")` and runs on the emulator alone. Module-scoped fixtures that
enter `open_cluster()` themselves stay on the emulator.

`start_controller` builds the real `controller.app.Controller` from command-line flags, with
short lease timings so leader-election scenarios finish in seconds; every controller it started
is stopped at teardown.

Routing gc is a backstop (tests/e2e/backstop.py): at teardown every controller a test ran must
have had nothing for its routing gc passes to remove, checked with one more pass while it still
leads. A test that corrupts routing rows on purpose is marked
`@pytest.mark.routing_drift_expected("why")`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.app import Controller
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.process import run_controller
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.ovn.ovsdb import NbServer
from tests.e2e import backstop
from tests.e2e.helpers import NODE, node, running
from tests.fixtures.realbed import RealBed

LEASE_FLAGS = (
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
)


class RealServer:
    """The real plane in the place of an `ApiServer`: its `store`, kubeconfig and client."""

    def __init__(self, bed: RealBed) -> None:
        self.bed = bed
        self.store = bed.new_store()
        self.plane = bed.plane

    @property
    def url(self) -> str:
        return str(self.plane.url)

    def write_kubeconfig(self, path: str | Path, **_: Any) -> Path:
        """An admin kubeconfig (the controller's own is `Cluster.kubeconfig`)."""
        return Path(self.plane.write_admin_kubeconfig(path))

    def api_client(self) -> Any:
        return self.plane.api_client()


@dataclass
class Cluster:
    server: ApiServer | RealServer
    nb_server: NbServer
    kubeconfig: Path
    nb: OvsdbappNbClient  # a reader for assertions (the controller has its own connection)

    @property
    def emulator(self) -> ApiServer:
        """The API server emulator, for what only it has (fault injection, its request log); a
        test using it is marked `emulator_only`, so the real plane never gets here."""
        assert isinstance(self.server, ApiServer), "an emulator-only test ran on the real plane"
        return self.server

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
    controller = run_controller(cluster.argv(*extra), env, startup_wait=10.0, status_delay=0.1)
    return backstop.record(controller)


@contextmanager
def open_real_cluster(bed: RealBed) -> Iterator[Cluster]:
    """The real plane reset for one test, with a fresh NB database of its own."""
    with tempfile.TemporaryDirectory(prefix="e2e") as d:
        bed.reset()
        nb_server = NbServer(Path(d) / "nb").start()
        server = RealServer(bed)
        reader = OvsdbappNbClient.from_addr(nb_server.remote, timeout=10.0)
        try:
            with bed.run_window():
                yield Cluster(server, nb_server, bed.controller_kubeconfig, reader)
        finally:
            reader.close()
            nb_server.stop()
            bed.reset(server.store.created)


PLANES = ("emulator", pytest.param("real", marks=pytest.mark.realcp))


@pytest.fixture(params=PLANES)
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if request.param == "real":
        bed: RealBed = request.getfixturevalue("real_bed")
        with open_real_cluster(bed) as c:
            yield c
        return
    with open_cluster() as c:
        yield c


StartController = Callable[..., Controller]


@pytest.fixture(autouse=True)
def routing_backstop(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the test, routing gc of every controller it ran (and of a module-scoped one) has
    found nothing (the controllers `start_controller` runs are judged before it stops them)."""
    yield
    backstop.check_launched(request)


@pytest.fixture
def start_controller(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[StartController]:
    started: list[Controller] = []

    def start(*extra: str, identity: str = "controller-a") -> Controller:
        controller = launch_controller(cluster, *extra, identity=identity)
        started.append(controller)
        return controller

    yield start
    try:
        backstop.check_controllers(request, started)
    finally:
        for controller in started:
            controller.stop()


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    """One controller with the default flags, its workers running (a module may override)."""
    controller = running(start_controller())
    return controller
