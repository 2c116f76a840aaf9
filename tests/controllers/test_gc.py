"""GarbageCollector against FakeNbClient, FakeKubeApi, a real IPAM and real Indexers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from controller.apiclient.errors import KubeApiError
from controller.ovn.api import OvnTimeoutError
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock
from tests.controllers.helpers import LR, STS_OWNER, World, allocated, raw_pod

pytestmark = pytest.mark.timeout(30)

A_IP, A_MAC = "10.16.0.10", "00:00:00:00:00:0a"
B_IP, B_MAC = "10.16.0.11", "00:00:00:00:00:0b"


def live_pod(w: World, name: str, ip: str, mac: str, **kw: Any) -> str:
    port = w.network(name, ip, mac)
    w.kube.add_pod(raw_pod(name, annotations=allocated(ip, mac), **kw))
    return port


# -- logical switch ports -----------------------------------------------------------------


def test_orphan_lsp_survives_first_pass_and_goes_on_second() -> None:
    w = World()
    port = w.network("gone", A_IP, A_MAC, nat=True)  # pod deleted while we were down
    live = live_pod(w, "alive", B_IP, B_MAC)
    w.sync()

    assert w.gc.mark_and_clean_lsp() == []
    assert port in w.ports()
    assert "gone.default" in w.kube.ips
    assert w.held("default/gone") == [A_IP]
    assert A_IP in w.routes() and A_IP in w.nats()

    assert w.gc.mark_and_clean_lsp() == [port]
    assert w.ports() & {port, live} == {live}
    assert "gone.default" not in w.kube.ips
    assert w.held("default/gone") == []
    assert w.routes() == {B_IP}
    assert A_IP not in w.nats()
    # the live pod is untouched
    assert w.held("default/alive") == [B_IP]
    assert "alive.default" in w.kube.ips
    assert w.deleted_metric("lsp") == 1
    assert w.deleted_metric("ip") == 1
    assert w.deleted_metric("static_route") == 1
    assert w.deleted_metric("nat") == 1


def test_router_ports_and_live_pods_are_never_touched() -> None:
    w = World()
    live_pod(w, "alive", A_IP, A_MAC)
    w.sync()
    before = w.ports()
    assert "ovn-default-ovn-cluster" in before  # router port, vendor kube-ovn
    for _ in range(3):
        assert w.gc.mark_and_clean_lsp() == []
    assert w.ports() == before
    assert w.deleted_metric("lsp") == 0


def test_pod_recreated_between_passes_keeps_its_lsp() -> None:
    w = World()
    port = w.network("web", A_IP, A_MAC)
    w.sync()
    assert w.gc.mark_and_clean_lsp() == []  # marked

    w.kube.add_pod(raw_pod("web", annotations=allocated(A_IP, A_MAC)))
    w.sync()
    assert w.gc.mark_and_clean_lsp() == []  # kept, and the mark is reset
    assert port in w.ports()

    w.kube.delete_pod("default", "web")
    w.sync()
    assert w.gc.mark_and_clean_lsp() == []  # first sighting again, not the second
    assert port in w.ports()
    assert w.gc.mark_and_clean_lsp() == [port]


def test_pod_whose_add_is_in_flight_keeps_its_lsp() -> None:
    # LSP created, annotations not patched yet: the pod is in the cache without `allocated`.
    w = World()
    port = w.network("new", A_IP, A_MAC)
    w.kube.add_pod(raw_pod("new", annotations={}))
    w.sync()
    for _ in range(3):
        assert w.gc.mark_and_clean_lsp() == []
    assert port in w.ports()
    assert w.held("default/new") == [A_IP]


def test_dead_pod_in_cache_loses_its_lsp_but_its_delete_handler_owns_the_release() -> None:
    w = World()
    port = w.network("job", A_IP, A_MAC)
    w.kube.add_pod(
        raw_pod("job", annotations=allocated(A_IP, A_MAC), phase="Succeeded")
        | {"spec": {"restartPolicy": "Never"}}
    )
    w.sync()
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == [port]
    assert w.held("default/job") == [A_IP]  # a pod with that key exists: not released here


def test_routes_of_an_address_now_held_by_another_pod_are_kept() -> None:
    w = World()
    port = w.network("old", A_IP, A_MAC, route=False)
    w.sync()
    w.gc.mark_and_clean_lsp()
    # Between the passes the old key lost the address and a new pod got it, with its route.
    w.ipam.release_address_by_pod("default/old")
    w.ipam.get_static_address("default/new", A_IP, B_MAC, "ovn-default")
    w.nb.add_static_route("src-ip", A_IP, "100.64.0.3", LR)
    assert w.gc.mark_and_clean_lsp() == [port]
    assert A_IP in w.routes()
    assert w.held("default/new") == [A_IP]


def test_node_ports_are_kept_and_ports_of_deleted_nodes_go() -> None:
    w = World()
    kept = w.node("n1", "100.64.0.2", "00:00:00:00:01:01")
    gone = w.node("n9", "100.64.0.9", "00:00:00:00:01:09", api=False)
    w.sync()
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == [gone]
    assert kept in w.ports() and gone not in w.ports()
    assert "node-n1" in w.kube.ips and "node-n9" not in w.kube.ips
    assert w.held("node-n1") == ["100.64.0.2"]
    assert w.held("node-n9") == []


def test_lost_lsp_is_logged_for_the_inspection(caplog: pytest.LogCaptureFixture) -> None:
    w = World()
    w.network("p", A_IP, A_MAC, lsp=False)
    w.kube.add_pod(raw_pod("p", annotations=allocated(A_IP, A_MAC)))
    w.sync()
    with caplog.at_level(logging.WARNING, logger="controller.controllers.gc"):
        w.gc.mark_and_clean_lsp()
    assert any("lsp lost for pod default/p" in r.getMessage() for r in caplog.records)


def test_pod_on_a_switch_that_does_not_exist_is_not_a_lost_lsp(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # its port was never made: the pod controller's inspection gives it a Warning Event
    w = World()
    w.kube.add_pod(raw_pod("ghost", annotations=allocated(A_IP, A_MAC, subnet="nowhere")))
    w.sync()
    with caplog.at_level(logging.WARNING, logger="controller.controllers.gc"):
        for _ in range(3):
            w.gc.mark_and_clean_lsp()
    assert not [r for r in caplog.records if "lsp lost" in r.getMessage()]


def test_malformed_pod_in_cache_keeps_its_resources() -> None:
    w = World()
    port = w.network("odd", A_IP, A_MAC)
    w.sync()
    bad = raw_pod("odd")
    bad["spec"]["hostNetwork"] = "yes"  # wrong type: Pod.from_dict refuses it
    w.pods.add(bad)
    for _ in range(3):
        assert w.gc.mark_and_clean_lsp() == []
    assert port in w.ports()


# -- StatefulSets and VMs -------------------------------------------------------------------


@pytest.mark.parametrize("owner_caches", [True, False], ids=["cache", "api-get"])
def test_terminating_sts_pod_still_needed_is_kept(owner_caches: bool) -> None:
    w = World(owner_caches=owner_caches)
    w.statefulset("web", replicas=3)
    port = w.network("web-1", A_IP, A_MAC, pod_type="StatefulSet")
    # past its grace period, so not alive: only the StatefulSet keeps it
    w.kube.add_pod(
        raw_pod("web-1", annotations=allocated(A_IP, A_MAC), owner=STS_OWNER, deleted_ago=120)
    )
    absent = w.network("web-2", B_IP, B_MAC, pod_type="StatefulSet")  # pod being re-created
    w.sync()
    for _ in range(3):
        assert w.gc.mark_and_clean_lsp() == []
        assert w.gc.gc_ip_crs() == []
    assert {port, absent} <= w.ports()
    assert {"web-1.default", "web-2.default"} <= set(w.kube.ips)
    assert w.held("default/web-1") == [A_IP] and w.held("default/web-2") == [B_IP]


@pytest.mark.parametrize("owner_caches", [True, False], ids=["cache", "api-get"])
def test_sts_scaled_down_loses_its_ports(owner_caches: bool) -> None:
    w = World(owner_caches=owner_caches)
    w.statefulset("web", replicas=1)
    port = w.network("web-1", A_IP, A_MAC, pod_type="StatefulSet")
    w.kube.add_pod(
        raw_pod("web-1", annotations=allocated(A_IP, A_MAC), owner=STS_OWNER, deleted_ago=5)
    )
    absent = w.network("web-2", B_IP, B_MAC, pod_type="StatefulSet")
    w.sync()
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == [port, absent]
    assert not {"web-1.default", "web-2.default"} & set(w.kube.ips)
    assert w.held("default/web-2") == []
    assert w.held("default/web-1") == [A_IP]  # the terminating pod's delete releases it


@pytest.mark.parametrize("cached_replicas", [None, 1], ids=["not-cached-yet", "stale-replicas"])
def test_a_lagging_statefulset_cache_is_confirmed_before_ports_go(
    cached_replicas: int | None,
) -> None:
    # The informer says "release" (no StatefulSet yet, or an older replica count) while the API
    # says web-1 and web-2 are still wanted: the gc asks the API before it deletes anything,
    # as the pod delete path does.
    w = World(owner_caches=True)
    port = w.network("web-1", A_IP, A_MAC, pod_type="StatefulSet")
    w.kube.add_pod(
        raw_pod("web-1", annotations=allocated(A_IP, A_MAC), owner=STS_OWNER, deleted_ago=120)
    )
    absent = w.network("web-2", B_IP, B_MAC, pod_type="StatefulSet")
    if cached_replicas is not None:
        w.statefulset("web", replicas=cached_replicas)
    w.sync()
    w.statefulset("web", replicas=3)  # the API moved on; the cache has not seen it
    for _ in range(3):
        assert w.gc.mark_and_clean_lsp() == []
        assert w.gc.gc_ip_crs() == []
    assert {port, absent} <= w.ports()
    assert {"web-1.default", "web-2.default"} <= set(w.kube.ips)


def test_running_sts_pod_beyond_replicas_is_not_touched() -> None:
    # Deviation from kube-ovn: an alive, non-terminating pod always keeps its network.
    w = World()
    w.statefulset("web", replicas=1)
    port = w.network("web-3", A_IP, A_MAC, pod_type="StatefulSet")
    w.kube.add_pod(raw_pod("web-3", annotations=allocated(A_IP, A_MAC), owner=STS_OWNER))
    w.sync()
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == []
    assert port in w.ports()


def test_unreadable_statefulset_keeps_the_pod() -> None:
    w = World(owner_caches=False)
    port = w.network("web-1", A_IP, A_MAC)
    w.kube.add_pod(
        raw_pod("web-1", annotations=allocated(A_IP, A_MAC), owner=STS_OWNER, deleted_ago=120)
    )
    w.sync()
    w.kube.fail_next("get_statefulset", KubeApiError(500, "InternalError", "boom"), times=4)
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == []
    assert port in w.ports()


@pytest.mark.parametrize("owner_caches", [True, False], ids=["cache", "api-get"])
def test_vm_port_kept_while_the_vm_exists(owner_caches: bool) -> None:
    w = World(keep_vm_ip=True, owner_caches=owner_caches)
    w.kube.add_virtual_machine({"metadata": {"name": "vm1", "namespace": "default"}})
    port = w.network("vm1", A_IP, A_MAC, pod_type="VirtualMachine")  # no launcher pod now
    w.sync()
    for _ in range(3):
        assert w.gc.mark_and_clean_lsp() == []
        assert w.gc.gc_ip_crs() == []
    assert port in w.ports()

    w.kube.virtual_machines.clear()
    w.sync()
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == [port]
    assert w.held("default/vm1") == []


# -- IP CRs ---------------------------------------------------------------------------------


def test_orphan_ip_cr_removed_after_two_sightings_and_released() -> None:
    w = World()
    # an IPAM-only attachment of a deleted pod: IP CR and address, no LSP
    w.network("gone", A_IP, A_MAC, provider="net1.default", lsp=False, route=False)
    live_pod(w, "alive", B_IP, B_MAC)
    w.sync()
    assert w.gc.gc_ip_crs() == []
    assert "gone.default.net1.default" in w.kube.ips
    assert w.held("default/gone") == [A_IP]

    assert w.gc.gc_ip_crs() == ["gone.default.net1.default"]
    assert "gone.default.net1.default" not in w.kube.ips
    assert w.held("default/gone") == []
    assert "alive.default" in w.kube.ips and w.held("default/alive") == [B_IP]
    assert w.deleted_metric("ip") == 1


def test_ip_cr_of_a_pod_that_came_back_is_kept() -> None:
    w = World()
    w.network("p", A_IP, A_MAC, lsp=False)
    w.sync()
    w.gc.gc_ip_crs()
    w.kube.add_pod(raw_pod("p"))  # back, not yet allocated
    w.sync()
    assert w.gc.gc_ip_crs() == []
    assert "p.default" in w.kube.ips


def test_ip_cr_without_owner_is_left_alone() -> None:
    w = World()
    w.kube.create_or_update_ip({"metadata": {"name": "mystery"}, "spec": {"subnet": "x"}})
    w.sync()
    w.gc.gc_ip_crs()
    assert w.gc.gc_ip_crs() == []
    assert "mystery" in w.kube.ips


def test_node_ip_cr_of_a_deleted_node_goes_with_its_address() -> None:
    w = World()
    w.node("n1", "100.64.0.2", "00:00:00:00:01:01")
    w.node("n9", "100.64.0.9", "00:00:00:00:01:09", api=False)
    w.fake_nb().delete_port("node-n9")  # only the IP CR and the address are left
    w.sync()
    w.gc.gc_ip_crs()
    assert w.gc.gc_ip_crs() == ["node-n9"]
    assert set(w.kube.ips) == {"node-n1"}
    assert w.held("node-n9") == [] and w.held("node-n1") == ["100.64.0.2"]


# -- static routes --------------------------------------------------------------------------


def test_stale_src_ip_route_removed_and_live_routes_kept() -> None:
    w = World()
    live_pod(w, "alive", A_IP, A_MAC)
    w.nb.add_static_route("src-ip", "10.16.0.99", "100.64.0.2", LR)  # nobody holds it
    w.nb.add_static_route("dst-ip", "10.16.0.98", "100.64.0.2", LR)  # not ours
    w.nb.add_static_route("src-ip", "10.17.0.0/16", "100.64.0.2", LR)  # a network, not ours
    w.sync()
    assert w.gc.gc_static_routes() == []
    assert "10.16.0.99" in w.routes()
    assert w.gc.gc_static_routes() == ["10.16.0.99"]
    assert w.routes() == {A_IP, "10.16.0.98", "10.17.0.0/16"}
    assert w.deleted_metric("static_route") == 1


def test_route_whose_address_is_allocated_between_passes_is_kept() -> None:
    w = World()
    w.nb.add_static_route("src-ip", A_IP, "100.64.0.2", LR)
    w.gc.gc_static_routes()
    w.ipam.get_static_address("default/p", A_IP, A_MAC, "ovn-default")
    w.kube.add_pod(raw_pod("p", annotations=allocated(A_IP, A_MAC)))
    w.sync()
    assert w.gc.gc_static_routes() == []
    w.ipam.release_address_by_pod("default/p")
    assert w.gc.gc_static_routes() == []  # the mark was reset
    assert A_IP in w.routes()


def test_static_route_gc_refuses_to_run_on_an_empty_ipam() -> None:
    w = World()
    w.nb.add_static_route("src-ip", A_IP, "100.64.0.2", LR)
    for name in w.ipam.subnet_names():
        w.ipam.delete_subnet(name)
    for _ in range(3):
        assert w.gc.gc_static_routes() == []
    assert A_IP in w.routes()


# -- safety and failure handling --------------------------------------------------------------


def test_nothing_happens_while_the_caches_are_not_ready() -> None:
    ready = threading.Event()
    w = World(ready=ready.is_set)
    port = w.network("gone", A_IP, A_MAC)
    w.nb.add_static_route("src-ip", "10.16.0.99", "100.64.0.2", LR)
    for _ in range(3):
        w.gc.run_once()
    assert port in w.ports() and "10.16.0.99" in w.routes()
    ready.set()
    w.gc.run_once()
    assert port in w.ports()  # first sighting only
    w.gc.run_once()
    assert port not in w.ports() and "10.16.0.99" not in w.routes()


def test_failed_delete_is_retried_next_pass() -> None:
    w = World()
    port = w.network("gone", A_IP, A_MAC)
    w.sync()
    w.gc.mark_and_clean_lsp()
    w.fake_nb().fail_next("delete_port", OvnTimeoutError("not connected"))
    assert w.gc.mark_and_clean_lsp() == []
    assert port in w.ports()
    assert w.gc.mark_and_clean_lsp() == [port]
    assert "gone.default" not in w.kube.ips


def test_failing_step_does_not_stop_the_others() -> None:
    w = World()
    w.nb.add_static_route("src-ip", "10.16.0.99", "100.64.0.2", LR)
    w.fake_nb().fail_next("list_ports", OvnTimeoutError("x"))
    w.gc.run_once()
    w.gc.run_once()
    assert "10.16.0.99" not in w.routes()
    assert w.runs_metric() == 2


class HandlerRacesGc:
    """A key lock under which a pod handler (simulated) re-creates the pod first."""

    def __init__(self) -> None:
        self.w: World | None = None
        self.locked_keys: list[str] = []

    @contextmanager
    def locked(self, key: str) -> Iterator[None]:
        self.locked_keys.append(key)
        name = key.split("/", 1)[1]
        assert self.w is not None
        self.w.pods.add(raw_pod(name, annotations=allocated(A_IP, A_MAC)))
        yield


def test_deletion_rechecks_the_cache_under_the_pod_key_lock() -> None:
    lock = HandlerRacesGc()
    w = World(key_mutex=lock)
    lock.w = w
    port = w.network("p", A_IP, A_MAC)
    w.sync()
    w.gc.mark_and_clean_lsp()
    assert w.gc.mark_and_clean_lsp() == []
    assert lock.locked_keys == ["default/p"]
    assert port in w.ports() and w.held("default/p") == [A_IP]
    # the port is no longer marked: the pod holding it counts as a fresh start
    w.pods.delete_by_key("default/p")
    assert w.gc.mark_and_clean_lsp() == []


# -- startup and the periodic loop ------------------------------------------------------------


def test_startup_gc_is_immediate() -> None:
    w = World()
    port = w.network("gone", A_IP, A_MAC)
    live = live_pod(w, "alive", B_IP, B_MAC)
    w.nb.add_static_route("src-ip", "10.16.0.99", "100.64.0.2", LR)
    w.sync()
    w.gc.run_startup_gc()
    assert live in w.ports() and port not in w.ports()
    assert w.routes() == {B_IP}
    assert set(w.kube.ips) == {"alive.default"}
    assert w.held("default/gone") == []
    assert w.runs_metric() == 2


def test_startup_gc_of_a_clean_state_is_one_pass() -> None:
    # Nothing orphaned after a clean shutdown: the second pass could delete nothing.
    w = World()
    live = live_pod(w, "alive", B_IP, B_MAC)
    w.sync()
    w.gc.run_startup_gc()
    assert live in w.ports() and w.held("default/alive") == [B_IP]
    assert w.runs_metric() == 1


def test_startup_gc_runs_a_second_pass_for_an_orphan_route_alone() -> None:
    w = World()
    live_pod(w, "alive", B_IP, B_MAC)
    w.nb.add_static_route("src-ip", "10.16.0.99", "100.64.0.2", LR)
    w.sync()
    w.gc.run_startup_gc()
    assert w.routes() == {B_IP}
    assert w.runs_metric() == 2


def test_run_passes_every_interval_on_the_injected_clock() -> None:
    clock = FakeClock()
    w = World(clock=clock)
    port = w.network("gone", A_IP, A_MAC)
    w.sync()
    stop = threading.Event()
    t = threading.Thread(target=w.gc.run, args=(stop, 360.0), daemon=True)
    t.start()

    def settled(runs: float) -> None:
        wait_for(
            lambda: clock.waiters() == 1 and w.runs_metric() == runs,
            10,
            f"the gc loop parked on the clock after {runs} passes",
            interval=0.001,
        )

    settled(0)
    assert port in w.ports()
    clock.step(360)
    settled(1)
    assert port in w.ports()
    clock.step(360)
    settled(2)
    assert port not in w.ports()
    stop.set()
    t.join(5)
    assert not t.is_alive()
    assert clock.waits == [360.0, 360.0, 360.0]


def test_run_stops_promptly_on_the_stop_event() -> None:
    w = World()  # the real clock
    stop = threading.Event()
    t = threading.Thread(target=w.gc.run, args=(stop, 3600.0), daemon=True)
    t.start()
    stop.set()
    t.join(5)
    assert not t.is_alive()
    assert w.runs_metric() == 0


def test_run_with_a_non_positive_interval_is_disabled() -> None:
    w = World()
    w.gc.run(threading.Event(), 0)  # returns at once
    assert w.runs_metric() == 0


def test_route_of_a_kept_statefulset_address_goes_with_its_pod() -> None:
    # The sts pod was deleted while no controller ran: its IP CR, port and address stay for the
    # pod to come back (its StatefulSet still wants the ordinal), but its route, which the
    # delete handler would have removed, is stale. A present pod keeps its route.
    w = World()
    w.statefulset("web", replicas=2)
    w.network("web-1", A_IP, A_MAC, pod_type="StatefulSet")
    live_pod(w, "web-0", B_IP, B_MAC)
    w.sync()
    assert w.gc.gc_static_routes() == []
    assert w.gc.gc_static_routes() == [A_IP]
    assert w.routes() == {B_IP}
    assert w.held("default/web-1") == [A_IP]  # the address itself stays kept
