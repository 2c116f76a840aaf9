"""Fault injection on the API side: watches dropped, 410 storms and bursts of
5xx answers in the middle of a burst of pod creates and deletes. The verdict is the consistency
audit, settled: nothing held twice, nothing left behind, every alive pod allocated and routed."""

from __future__ import annotations

import pytest

from controller.app import Controller
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import running, wait_for
from tests.faults.conftest import EMULATOR_FAULTS, FAULT_FLAGS
from tests.faults.helpers import (
    Auditor,
    assert_burst_converged,
    assert_ipam_released,
    run_burst,
    wait_lease_renewed,
    wait_settled,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(90),
    pytest.mark.emulator_only(EMULATOR_FAULTS),
]


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    controller = running(start_controller(*FAULT_FLAGS))
    return controller


def test_watches_dropped_and_410_storm_mid_burst(
    cluster: Cluster, ctl: Controller, auditor: Auditor
) -> None:
    store = cluster.emulator.store
    faults = cluster.emulator.faults

    def outage() -> None:
        # the pod watch ends and cannot come back for a while: the second half of the burst
        # (deletes included) is only seen by a relist, deletes as tombstones
        faults.fail_next(3, 500, verb="list", resource="pods")
        faults.fail_next(3, 500, verb="watch", resource="pods")
        assert faults.drop_watches("pods") >= 1

    def storm() -> None:
        for round_ in range(4):
            # every informer must be back on its watch before the next hit: a storm, not an outage
            wait_for(lambda: store.watcher_count() >= 9, message="watches re-opened")
            if round_ % 2:
                faults.drop_watches()
            else:
                store.compact()  # the informers' resourceVersion is gone: they must relist
                faults.expire_watches()
            faults.force_gone_next_watch("pods", n=2)

    burst = run_burst(store, fault=outage, after=storm)
    wait_settled(auditor)
    assert_burst_converged(store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)
    assert ctl.pod_controller is not None and ctl.pod_controller.pending_deletes() == {}


def test_bursts_of_api_errors_mid_burst(
    cluster: Cluster, ctl: Controller, auditor: Auditor
) -> None:
    store = cluster.server.store
    faults = cluster.emulator.faults

    def errors() -> None:
        faults.fail_next(20, 500, verb="patch", resource="pods")
        faults.fail_next(10, 500, verb="create", resource="ips")
        faults.fail_next(10, 503, verb="update", resource="ips")
        faults.fail_next(10, 500, verb="delete", resource="ips")
        faults.fail_next(6, 500, verb="list")
        faults.drop_connections(6, verb="get")

    burst = run_burst(store, fault=errors)
    wait_settled(auditor)
    assert_burst_converged(store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)


def test_500s_on_ip_cr_writes_alone_mid_burst(
    cluster: Cluster, ctl: Controller, auditor: Auditor
) -> None:
    # The annotation patch succeeds: nothing but the add handler's own retry can repair an IP CR
    # write that failed (kube-ovn v1.8 only logged it, leaving the pod without its IP CR).
    store = cluster.server.store
    faults = cluster.emulator.faults

    def errors() -> None:
        faults.fail_next(10, 500, verb="create", resource="ips")

    burst = run_burst(store, fault=errors)
    wait_settled(auditor)
    assert faults.pending == 0  # every injected 500 was served
    assert_burst_converged(store, burst)


def test_answers_lost_after_the_server_applied_them_mid_burst(
    cluster: Cluster, ctl: Controller, auditor: Auditor
) -> None:
    # Served, and the connection closed instead of the answer: each retry meets the result of
    # the attempt it never heard back from (an IP CR already there, a patch already applied,
    # a Lease already renewed).
    store = cluster.server.store
    faults = cluster.emulator.faults

    def lose() -> None:
        faults.lose_answers(6, verb="create", resource="ips")
        faults.lose_answers(8, verb="patch", resource="pods")
        faults.lose_answers(4, verb="delete", resource="ips")
        faults.lose_answers(3, verb="update", resource="leases")

    burst = run_burst(store, fault=lose)
    wait_settled(auditor)
    assert faults.pending == 0  # every answer meant to be lost was
    assert_burst_converged(store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)
    assert ctl.is_leader()
    wait_lease_renewed(store, "controller-a")  # its renewals go on past the lost answers
