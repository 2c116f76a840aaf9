"""Terminating pods end to end (kube-ovn pod.go enqueueUpdatePod): a pod that got its
`deletionTimestamp` but is never removed (its node is lost, no kubelet confirms) is cleaned up
once its `terminationGracePeriodSeconds` have passed, through the delaying queue (no thread per
pod); a pod the kubelet removes earlier is cleaned up at once.

The exact deadline (deletionTimestamp, not a moment earlier) is checked on a fake clock in
tests/pod/test_delete.py; here the real controller must hand each cleanup to its delaying queue
with the rest of the grace period as the delay, which `scheduled_delays` records."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION
from tests.e2e.conftest import Cluster, RealServer, StartController
from tests.e2e.helpers import HANDMADE_STS, get_or_none, node, running, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    gone,
    graceful,
    lsp,
    pod,
    quiet,
    settled,
    start_graceful,
    statefulset,
)

pytestmark = pytest.mark.e2e

SUBNET = "ovn-default"
# Long enough that the controller sees each delete well within it, even on a loaded machine.
GRACE = 4
LOST_NODE = "node-lost"


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    return start_graceful(cluster, start_controller)


@pytest.fixture
def containers_ignore_sigterm(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[None]:
    """On the real plane the sandbox kubelet deletes a pod as soon as its containers exit on
    SIGTERM, at once by default, so the controller may never see it terminating; here they
    ignore it, as `sleep` running as PID 1 does, and the test confirms the delete itself."""
    if not isinstance(cluster.server, RealServer):
        yield  # the emulator has no kubelet: nothing confirms a delete but the test
        return
    kubelet = request.getfixturevalue("real_bed").kubelet
    before = kubelet.sigterm_exit
    kubelet.sigterm_exit = None
    try:
        yield
    finally:
        kubelet.sigterm_exit = before


def scheduled_delays(monkeypatch: pytest.MonkeyPatch, ctl: Controller) -> dict[str, float]:
    """The first delay the controller gives each key on its delete queue, from now on."""
    delays: dict[str, float] = {}
    queue = ctl.pod_queues.delete
    add_after = queue.add_after

    def recording(item: str, seconds: float) -> None:
        delays.setdefault(item, seconds)
        add_after(item, seconds)

    monkeypatch.setattr(queue, "add_after", recording)
    return delays


def released(ctl: Controller, cluster: Cluster, name: str, ip: str) -> None:
    wait_for(lambda: cluster.nb.get_port(f"{name}.{NS}") is None, message=f"{name} LSP deleted")
    gone(cluster, "ips", f"{name}.{NS}")
    wait_for(lambda: not ctl.ipam.get_ip_owner(ip, SUBNET), message=f"{ip} released")


@pytest.mark.emulator_only(
    "a node that never confirms the delete: on the real plane the sandbox kubelet does"
)
def test_pods_on_a_lost_node_are_cleaned_up_after_their_grace_period(
    ctl: Controller, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cluster.server.store
    names = [f"lost-{i}" for i in range(3)]
    for name in names:
        store.create("pods", pod(name, grace=GRACE))
    ips = {name: allocated(cluster, name)[IP_ADDRESS_ANNOTATION] for name in names}
    quiet(ctl)

    delays = scheduled_delays(monkeypatch, ctl)
    keys = {f"{NS}/{n}" for n in names}
    for name in names:
        store.delete("pods", NS, name)  # deletionTimestamp set; nobody ever confirms
    pods = ctl.pod_controller
    assert pods is not None
    wait_for(lambda: set(pods.pending_deletes()) == keys, message="the terminating pods pending")
    for name in names:
        released(ctl, cluster, name, ips[name])
    # each cleanup waited in the delaying queue (not in a sleeping thread each) for the rest of
    # its grace period, not run at once
    assert set(delays) == keys
    assert all(0 < delay <= GRACE for delay in delays.values()), delays
    for name in names:
        assert get_or_none(cluster.server, "pods", NS, name) is not None  # still terminating
    quiet(ctl)
    settled(cluster)

    for name in names:
        store.finalize_delete("pods", NS, name)  # the node comes back; nothing is left to do
        gone(cluster, "pods", name, NS)
    quiet(ctl)
    settled(cluster)


@pytest.mark.usefixtures("containers_ignore_sigterm")
def test_a_pod_removed_within_its_grace_period_is_cleaned_up_at_once(
    ctl: Controller, cluster: Cluster
) -> None:
    store = cluster.server.store
    store.create("pods", pod("quick", grace=300))
    ip = allocated(cluster, "quick")[IP_ADDRESS_ANNOTATION]
    store.delete("pods", NS, "quick")
    pods = ctl.pod_controller
    assert pods is not None
    wait_for(lambda: f"{NS}/quick" in pods.pending_deletes(), message="pending")
    lsp(cluster, f"quick.{NS}")  # 300 s of grace left: the port stays
    store.finalize_delete("pods", NS, "quick")  # the kubelet confirms: no need to wait
    released(ctl, cluster, "quick", ip)  # well within wait_for's deadline, far below 300 s
    quiet(ctl)
    settled(cluster)


@pytest.mark.emulator_only(HANDMADE_STS)
def test_a_statefulset_pod_beyond_the_replicas_is_cleaned_up_after_its_grace(
    ctl: Controller, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cluster.server.store
    owner = statefulset(cluster, "ss", 2)
    store.create("pods", pod("ss-0", owner=owner, grace=GRACE))
    store.create("pods", pod("ss-1", owner=owner, grace=GRACE))
    ip0 = allocated(cluster, "ss-0")[IP_ADDRESS_ANNOTATION]
    ip1 = allocated(cluster, "ss-1")[IP_ADDRESS_ANNOTATION]
    store.patch("statefulsets", NS, "ss", {"spec": {"replicas": 1}})
    wait_for(
        lambda: (
            (ctl.informers["statefulsets"].get_indexer().get_by_key(f"{NS}/ss") or {})["spec"][
                "replicas"
            ]
            == 1
        ),
        message="scale-down seen",
    )
    delays = scheduled_delays(monkeypatch, ctl)
    store.delete("pods", NS, "ss-1")  # terminating on a lost node
    store.delete("pods", NS, "ss-0")  # ordinal 0 is still wanted: kept whatever happens
    released(ctl, cluster, "ss-1", ip1)
    assert 0 < delays[f"{NS}/ss-1"] <= GRACE, delays  # waited for its grace period
    quiet(ctl)
    port = cluster.nb.get_port(f"ss-0.{NS}")
    assert port is not None and ip0 in port.addresses[0].split()
    assert ctl.ipam.get_ip_owner(ip0, SUBNET) == f"{NS}/ss-0"
    settled(cluster)


def test_a_pod_terminating_across_a_restart_is_still_cleaned_up_after_its_grace(
    cluster: Cluster, start_controller: StartController
) -> None:
    # the new controller sees the terminating pod only in its initial list (an add): no update
    # event will ever come for a pod on a lost node, so the add must schedule the cleanup
    graceful(cluster)
    store = cluster.server.store
    # a node no kubelet runs: on the real plane the sandbox kubelet would otherwise finish the
    # delete when the grace period ends, racing the second controller's start-up
    store.create("nodes", node(LOST_NODE, "172.18.0.99"))
    first = running(start_controller(identity="controller-a"), "first controller started")
    store.create("pods", pod("stuck", grace=GRACE, node_name=LOST_NODE))
    ip = allocated(cluster, "stuck")[IP_ADDRESS_ANNOTATION]
    first.stop()
    assert first.wait(15) == 0

    store.delete("pods", NS, "stuck")  # deletionTimestamp set while no controller runs
    second = running(start_controller(identity="controller-b"), "second controller started")
    released(second, cluster, "stuck", ip)
    assert get_or_none(cluster.server, "pods", NS, "stuck") is not None
    quiet(second)
    settled(cluster)
