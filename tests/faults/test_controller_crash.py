"""Controller crashes in the middle of a burst of pod creates and deletes:
the only controller SIGKILLed and restarted, and the leader of two replicas SIGKILLed so the
follower takes over with the leader's work half done. The killed controller is the real
`python -m cmd.controller` process; the verdict is the consistency audit, settled."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable

import pytest

from controller.sandbox.apiserver.faults import FaultInjector
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import HasStore, allocated_pods, get_or_none, pod, running, wait_for
from tests.faults.conftest import EMULATOR_FAULTS, FAULT_FLAGS, ControllerProcess
from tests.faults.helpers import (
    LEASE,
    NS,
    Auditor,
    assert_burst_converged,
    assert_ipam_released,
    run_burst,
    wait_settled,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(90),
    pytest.mark.emulator_only(EMULATOR_FAULTS),
]


def holder(server: HasStore) -> str:
    lease = get_or_none(server, "leases", *LEASE)
    return str((lease or {}).get("spec", {}).get("holderIdentity") or "")


def ports_ahead_of_annotations(cluster: Cluster) -> set[str]:
    """Pods whose port exists while their allocation is not annotated yet (an add in flight)."""
    allocated = set(allocated_pods(cluster.server.store))
    pods = {o["metadata"]["name"] for o in cluster.server.store.list("pods", NS)}
    ported = {
        p.external_ids.get("pod", "").partition("/")[2]
        for p in cluster.nb.list_ports()
        if p.external_ids.get("pod", "").startswith(f"{NS}/")
    }
    return (ported & pods) - allocated


def start_leader_process(cluster: Cluster, controller_process: ControllerProcess) -> None:
    """The subprocess leads and has allocated a first pod (its workers run)."""
    controller_process(*FAULT_FLAGS, identity="proc-a")
    cluster.server.store.create("pods", pod("warm"))
    wait_for(
        lambda: "warm" in allocated_pods(cluster.server.store),
        timeout=30,
        message="the controller process allocated a first pod",
    )
    assert holder(cluster.server) == "proc-a"


def kill_with_adds_in_flight(cluster: Cluster, proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL `proc` while at least one pod has its port but not yet its annotations."""
    wait_for(
        lambda: ports_ahead_of_annotations(cluster),
        timeout=15,
        message="an add between its port and its patch",
        interval=0.01,
    )
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    cluster.emulator.faults.clear()


def slow_patches(faults: FaultInjector) -> None:
    # the dead controller's patch is still in flight and lands after the restart
    faults.add_latency(0.3, verb="patch", resource="pods")


def failing_patches(faults: FaultInjector) -> None:
    # the annotation write is lost for good: the port and IP CR are all that is left
    faults.fail_next(None, 500, verb="patch", resource="pods")


def slow_deletes(faults: FaultInjector) -> None:
    # deletes in flight too: the port is gone, the IP CR delete and the IPAM release are not done
    faults.add_latency(0.3, verb="patch", resource="pods")
    faults.add_latency(0.3, verb="delete", resource="ips")


@pytest.mark.parametrize("window", [slow_patches, failing_patches, slow_deletes])
def test_sigkill_mid_burst_then_restart(
    cluster: Cluster,
    controller_process: ControllerProcess,
    start_controller: StartController,
    auditor: Auditor,
    window: Callable[[FaultInjector], None],
) -> None:
    start_leader_process(cluster, controller_process)
    proc = controller_process.started[-1]
    window(cluster.emulator.faults)  # widen the window between a pod's port write and its patch
    store = cluster.server.store
    burst = run_burst(store, fault=lambda: kill_with_adds_in_flight(cluster, proc))
    burst.alive.add("warm")

    # the same replica restarted (same identity: it takes its own lease back at once)
    ctl = running(
        start_controller(*FAULT_FLAGS, identity="proc-a"),
        "restarted controller running",
        timeout=20,
    )
    wait_settled(auditor)
    assert_burst_converged(store, burst)
    assert_ipam_released(ctl.ipam.get_pod_address, burst)


def test_two_replicas_leader_killed_mid_burst(
    cluster: Cluster,
    controller_process: ControllerProcess,
    start_controller: StartController,
    auditor: Auditor,
) -> None:
    start_leader_process(cluster, controller_process)
    proc = controller_process.started[-1]
    follower = start_controller(*FAULT_FLAGS, identity="controller-b")
    wait_for(lambda: follower.ready()[0], message="follower standing by")
    assert not follower.leading.is_set()
    cluster.emulator.faults.add_latency(0.3, verb="patch", resource="pods")
    store = cluster.server.store
    burst = run_burst(store, fault=lambda: kill_with_adds_in_flight(cluster, proc))
    burst.alive.add("warm")

    # the follower waits the lease out (3 s), then does what the leader left half done
    wait_for(follower.workers_started.is_set, timeout=20, message="the follower took over")
    assert holder(cluster.server) == "controller-b"
    wait_settled(auditor)
    assert_burst_converged(store, burst)
    assert_ipam_released(follower.ipam.get_pod_address, burst)
