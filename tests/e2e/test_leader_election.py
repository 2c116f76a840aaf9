"""Leader election end to end: one leader acts, a follower enqueues nothing and takes over;
losing the lease ends the process. The leader here is the real `python -m cmd.controller`
subprocess.

How long a hand-over took is read from the Lease the electors wrote (renew and acquire times),
never from a stopwatch in the test; a hand-over that must not wait out the lease runs with a
lease far longer than the test's deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.runtime.leaderelection import lock_record_time
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import annotations_of, get_or_none, pod, rewrite, running, wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
LEASE = ("kube-system", "kube-ovn-controller")
LEASE_DURATION = 3.0  # tests/e2e/conftest.py LEASE_FLAGS
#: A lease no hand-over within a test's deadlines can have waited out.
LONG_LEASE_FLAGS = ("--leader-elect-lease-duration=60",)


def holder(cluster: Cluster) -> str:
    lease = get_or_none(cluster.server, "leases", *LEASE)
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")


def lease_spec(cluster: Cluster) -> dict[str, object]:
    lease = get_or_none(cluster.server, "leases", *LEASE)
    return dict((lease or {}).get("spec") or {})


def renewed(cluster: Cluster, times: int) -> Callable[[], bool]:
    """A condition: the Lease was written `times` times more from now (renewals by its holder,
    each a retry period apart)."""
    first = str(
        (get_or_none(cluster.server, "leases", *LEASE) or {})["metadata"]["resourceVersion"]
    )
    seen = {first}

    def check() -> bool:
        lease = get_or_none(cluster.server, "leases", *LEASE) or {}
        seen.add(str(lease["metadata"]["resourceVersion"]))
        return len(seen) > times

    return check


def adds(controller: Controller, queue: str = "AddPod") -> float:
    value = controller.registry.get_sample_value("workqueue_adds_total", {"name": queue})
    return value or 0.0


SpawnLeader = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def spawn_leader(cluster: Cluster, tmp_path: Path) -> Iterator[SpawnLeader]:
    """Start the controller as a subprocess (extra flags appended); killed at teardown."""
    env = {**os.environ, "POD_NAME": "proc-leader", "KUBE_NAMESPACE": "kube-system"}
    log = (tmp_path / "leader.log").open("wb")
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(*extra: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cmd.controller", *cluster.argv(*extra)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        return proc

    try:
        yield spawn
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        log.close()


def test_subprocess_leader_follower_and_handover(
    cluster: Cluster, start_controller: StartController, spawn_leader: SpawnLeader
) -> None:
    leader_process = spawn_leader()
    server = cluster.server
    wait_for(lambda: holder(cluster) == "proc-leader", timeout=30, message="subprocess leads")
    # the subprocess is the real controller: it annotates namespaces
    wait_for(
        lambda: annotations_of(server, "namespaces", None, "default").get(
            LOGICAL_SWITCH_ANNOTATION
        ),
        timeout=30,
        message="leader annotated the default namespace",
    )
    follower = start_controller(identity="controller-b")
    wait_for(lambda: follower.ready()[0], message="follower ready (standing by)")
    server.store.create("pods", pod("p-follow"))
    wait_for(
        lambda: annotations_of(server, "pods", "default", "p-follow").get(ALLOCATED_ANNOTATION),
        timeout=20,
        message="the leader allocated the pod",
    )
    # give the follower every chance to (wrongly) act: the leader renews the lease twice more
    # while the follower polls it on the same retry period
    wait_for(renewed(cluster, 2), message="two more renewals by the leader")
    assert not follower.leading.is_set()
    assert adds(follower) == 0
    assert not follower.is_leader()

    # kill the leader without letting it release the lease: the follower waits the lease out
    leader_process.send_signal(signal.SIGKILL)
    leader_process.wait(10)
    last = lease_spec(cluster)
    assert last["holderIdentity"] == "proc-leader"
    wait_for(follower.workers_started.is_set, timeout=15, message="follower took over")
    taken = lease_spec(cluster)
    assert taken["holderIdentity"] == "controller-b"
    # it waited the lease out from the dead leader's last renewal, as the Lease records them
    renew, acquire = lock_record_time(last["renewTime"]), lock_record_time(taken["acquireTime"])
    assert renew is not None and acquire is not None
    assert (acquire - renew).total_seconds() >= LEASE_DURATION, (last, taken)
    server.store.create("pods", pod("p-after"))
    wait_for(
        lambda: annotations_of(server, "pods", "default", "p-after").get(ALLOCATED_ANNOTATION),
        message="the new leader allocated a new pod",
    )
    assert adds(follower) >= 1
    ip_before = annotations_of(server, "pods", "default", "p-follow")[IP_ADDRESS_ANNOTATION]
    ip_after = annotations_of(server, "pods", "default", "p-after")[IP_ADDRESS_ANNOTATION]
    assert ip_before != ip_after  # IPAM was rebuilt from the old leader's annotations


def test_sigterm_releases_the_lease_and_exits_0(
    cluster: Cluster, start_controller: StartController, spawn_leader: SpawnLeader
) -> None:
    leader_process = spawn_leader(*LONG_LEASE_FLAGS)
    wait_for(lambda: holder(cluster) == "proc-leader", timeout=30, message="subprocess leads")
    follower = start_controller(*LONG_LEASE_FLAGS, identity="controller-b")
    wait_for(lambda: follower.ready()[0], message="follower standing by")
    leader_process.send_signal(signal.SIGTERM)
    assert leader_process.wait(20) == 0
    # released on the way out: the follower leads within the deadline, far short of the 60 s
    # lease it would otherwise have waited out
    wait_for(follower.leading.is_set, timeout=10, message="follower leads")


def test_losing_the_lease_stops_the_controller_with_exit_1(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller(), "leading")

    def intrude(lease: dict[str, Any]) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease["spec"].update(
            holderIdentity="intruder", leaseDurationSeconds=60, renewTime=now, acquireTime=now
        )

    # the leader renews every retry period: a renewal between the read and the write is a
    # Conflict, after which the intruder reads the Lease again
    rewrite(cluster.server, "leases", *LEASE, intrude)
    assert ctl.wait(15) == 1
    assert not ctl.is_leader()
    assert holder(cluster) == "intruder"  # a replica that lost the lease does not release it
