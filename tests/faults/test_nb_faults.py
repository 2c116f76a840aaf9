"""Fault injection on the OVN Northbound side: the standalone ovsdb-server
killed and restarted, hung (it reads, answers nothing, then carries on), and a Raft NB cluster
losing its leader, each in the middle of a burst of pod creates and deletes. The verdict is the
consistency audit, settled."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.app import Controller
from controller.sandbox.ovn.ovsdb import NbCluster
from tests.e2e.conftest import Cluster, StartController, launch_controller
from tests.e2e.helpers import running, wait_for
from tests.faults.conftest import FAULT_FLAGS, NB_FAULTS
from tests.faults.helpers import (
    Auditor,
    assert_burst_converged,
    assert_ipam_released,
    nb_failures,
    run_burst,
    wait_settled,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(90),
    pytest.mark.emulator_only(NB_FAULTS),
]


def once_handlers_failed(
    ctl: Controller, state: str, end_fault: Callable[[], object]
) -> Callable[[], None]:
    """The end of an NB fault, once at least two NB verbs have failed on it (so the burst's
    second half really met the fault)."""

    def after() -> None:
        wait_for(
            lambda: nb_failures(ctl.registry) >= 2,
            timeout=20,
            message=f"handlers failing on the {state} NB",
            interval=0.01,
        )
        end_fault()

    return after


def test_nb_server_killed_and_restarted_mid_burst(
    cluster: Cluster, start_controller: StartController, auditor: Auditor
) -> None:
    ctl = running(start_controller(*FAULT_FLAGS))
    # killed without a goodbye (transactions in flight are lost or never answered) and down from
    # the middle of the burst until handlers have failed on it
    restart = once_handlers_failed(ctl, "dead", cluster.nb_server.start)
    burst = run_burst(cluster.server.store, fault=cluster.nb_server.kill, after=restart)
    wait_settled(auditor)
    assert_burst_converged(cluster.server.store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)


def test_nb_server_hung_mid_burst_then_carrying_on(
    cluster: Cluster, start_controller: StartController, auditor: Auditor
) -> None:
    ctl = running(start_controller(*FAULT_FLAGS))
    nb = cluster.nb_server
    # Resumed, it applies what it read while hung: writes the controller gave up on as "may or
    # may not have been applied" land after their retries may have started.
    resume = once_handlers_failed(ctl, "hung", nb.resume)
    try:
        burst = run_burst(cluster.server.store, fault=nb.pause, after=resume)
    finally:
        if nb.running:
            nb.resume()  # harmless when it already runs; a failed test must not leave it hung
    wait_settled(auditor)
    assert_burst_converged(cluster.server.store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)


def test_raft_nb_cluster_loses_its_leader_mid_burst(raft_cluster: Cluster) -> None:
    nb = raft_cluster.nb_server
    assert isinstance(nb, NbCluster)
    ctl = launch_controller(raft_cluster, *FAULT_FLAGS)
    auditor = Auditor(raft_cluster)
    try:
        wait_for(ctl.workers_started.is_set, timeout=20, message="workers started")
        store = raft_cluster.server.store
        killed: list[int] = []

        def kill_leader() -> None:
            leader = nb.wait_for_leader(10)
            nb.kill(leader)
            killed.append(leader)
            nb.wait_for_leader(15)  # the two others elect a new one

        burst = run_burst(store, fault=kill_leader)
        assert killed and nb.leader() not in (None, killed[0])
        wait_settled(auditor)
        assert_burst_converged(store, burst)
        assert_ipam_released(ctl.ipam.get_pod_address, burst)
    finally:
        auditor.close()
        ctl.stop()
