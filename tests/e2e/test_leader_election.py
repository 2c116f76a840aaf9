"""Checklist item 13: one leader acts, a follower enqueues nothing and takes over; losing the
lease ends the process. The leader here is the real `python -m cmd.controller` subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.app import Controller
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import annotations_of, get_or_none, pod, running, wait_for

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
LEASE = ("kube-system", "kube-ovn-controller")
LEASE_DURATION = 3.0


def holder(cluster: Cluster) -> str:
    lease = get_or_none(cluster.server, "leases", *LEASE)
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")


def adds(controller: Controller, queue: str = "AddPod") -> float:
    value = controller.registry.get_sample_value("workqueue_adds_total", {"name": queue})
    return value or 0.0


@pytest.fixture
def leader_process(cluster: Cluster, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "POD_NAME": "proc-leader", "KUBE_NAMESPACE": "kube-system"}
    log = (tmp_path / "leader.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmd.controller", *cluster.argv()],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        log.close()


def test_subprocess_leader_follower_and_handover(
    cluster: Cluster,
    start_controller: StartController,
    leader_process: subprocess.Popen[bytes],
) -> None:
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
    # give the follower every chance to (wrongly) act: it observes the lease a few times
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        assert not follower.leading.is_set()
        assert adds(follower) == 0
        time.sleep(0.1)
    assert not follower.is_leader()

    # kill the leader without letting it release the lease: the follower waits the lease out
    leader_process.send_signal(signal.SIGKILL)
    leader_process.wait(10)
    killed = time.monotonic()
    wait_for(follower.workers_started.is_set, timeout=15, message="follower took over")
    took = time.monotonic() - killed
    assert took < LEASE_DURATION + 3.0, took
    assert holder(cluster) == "controller-b"
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
    cluster: Cluster,
    start_controller: StartController,
    leader_process: subprocess.Popen[bytes],
) -> None:
    wait_for(lambda: holder(cluster) == "proc-leader", timeout=30, message="subprocess leads")
    follower = start_controller(identity="controller-b")
    wait_for(lambda: follower.ready()[0], message="follower standing by")
    leader_process.send_signal(signal.SIGTERM)
    assert leader_process.wait(20) == 0
    # released on the way out, so the follower does not wait out the lease
    released = time.monotonic()
    wait_for(follower.leading.is_set, timeout=10, message="follower leads")
    assert time.monotonic() - released < LEASE_DURATION


def test_losing_the_lease_stops_the_controller_with_exit_1(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller(), "leading")
    store = cluster.server.store
    lease = store.get("leases", *LEASE)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease["spec"].update(
        holderIdentity="intruder", leaseDurationSeconds=60, renewTime=now, acquireTime=now
    )
    store.update("leases", lease, "kube-system")
    assert ctl.wait(15) == 1
    assert not ctl.is_leader()
    assert holder(cluster) == "intruder"  # a replica that lost the lease does not release it
