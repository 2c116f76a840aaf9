"""Fault injection on the OVN Northbound side: the standalone ovsdb-server
killed and restarted, hung (it reads, answers nothing, then carries on), and a Raft NB cluster
losing its leader, each in the middle of a burst of pod creates and deletes. The verdict is the
consistency audit, settled."""

from __future__ import annotations

import pytest

from controller.sandbox.ovsdb import NbCluster
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


def test_nb_server_killed_and_restarted_mid_burst(
    cluster: Cluster, start_controller: StartController, auditor: Auditor
) -> None:
    ctl = running(start_controller(*FAULT_FLAGS))
    store = cluster.server.store

    def restart_nb() -> None:
        wait_for(
            lambda: nb_failures(ctl.registry) >= 2,
            timeout=20,
            message="handlers failing on the dead NB",
            interval=0.01,
        )
        cluster.nb_server.start()

    # killed without a goodbye (transactions in flight are lost or never answered) and down from
    # the middle of the burst until handlers have failed on it
    burst = run_burst(store, fault=cluster.nb_server.kill, after=restart_nb)
    wait_settled(auditor)
    assert_burst_converged(store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)


def test_nb_server_hung_mid_burst_then_carrying_on(
    cluster: Cluster, start_controller: StartController, auditor: Auditor
) -> None:
    ctl = running(start_controller(*FAULT_FLAGS))
    store = cluster.server.store
    nb = cluster.nb_server
    assert not isinstance(nb, NbCluster)

    def resume_nb() -> None:
        wait_for(
            lambda: nb_failures(ctl.registry) >= 2,
            timeout=20,
            message="handlers failing on the hung NB",
            interval=0.01,
        )
        # it then applies what it read while hung: writes the controller gave up on as
        # "may or may not have been applied" land after their retries may have started
        nb.resume()

    try:
        burst = run_burst(store, fault=nb.pause, after=resume_nb)
    finally:
        if nb.running:
            nb.resume()  # harmless when it already runs; a failed test must not leave it hung
    wait_settled(auditor)
    assert_burst_converged(store, burst)
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
