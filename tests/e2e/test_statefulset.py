"""StatefulSet pods end to end (kube-ovn pod.go acquireAddress,
handleDeletePod, gc.go): ip_pool by
ordinal with no random fallback; the LSP, IP CR and address are kept across a pod's re-creation
and released on scale-down, StatefulSet deletion or a subnet change, also across a restart.

Pods are deleted gracefully (`workloads.graceful`), as a real API server does."""

from __future__ import annotations

from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
)
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import get_or_none, running, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    delete_pod,
    gone,
    graceful,
    pod,
    quiet,
    settled,
    start_graceful,
    statefulset,
    subnet,
    warning,
)

pytestmark = pytest.mark.e2e

SUBNET = "ovn-default"


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    return start_graceful(cluster, start_controller)


def cached_sts(ctl: Controller, name: str) -> dict[str, Any]:
    """The controller's cached copy (KeyError until the informer has it)."""
    obj = ctl.informers["statefulsets"].get_indexer().get_by_key(f"{NS}/{name}")
    if obj is None:
        raise KeyError(name)
    return dict(obj)


def assert_kept(ctl: Controller, cluster: Cluster, name: str, ip: str) -> None:
    port = cluster.nb.get_port(f"{name}.{NS}")
    assert port is not None and ip in port.addresses[0].split()
    cr = cluster.server.store.get("ips", None, f"{name}.{NS}")
    assert cr["spec"]["ipAddress"] == ip and cr["spec"]["podType"] == "StatefulSet"
    assert ctl.ipam.get_ip_owner(ip, SUBNET) == f"{NS}/{name}"


def assert_released(ctl: Controller, cluster: Cluster, name: str) -> None:
    wait_for(lambda: cluster.nb.get_port(f"{name}.{NS}") is None, message=f"{name} LSP deleted")
    gone(cluster, "ips", f"{name}.{NS}")
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/{name}") == [], message="IPAM released")


def test_recreated_pod_keeps_port_and_address_until_scale_down(
    ctl: Controller, cluster: Cluster
) -> None:
    store = cluster.server.store
    owner = statefulset(cluster, "db", 2)
    store.create("pods", pod("db-0", owner=owner))
    store.create("pods", pod("db-1", owner=owner))
    first = allocated(cluster, "db-0")
    ip, mac = first[IP_ADDRESS_ANNOTATION], first[MAC_ADDRESS_ANNOTATION]
    ip1 = allocated(cluster, "db-1")[IP_ADDRESS_ANNOTATION]

    delete_pod(cluster, "db-0")  # the StatefulSet is alive and has ordinal 0: keep
    quiet(ctl)
    assert_kept(ctl, cluster, "db-0", ip)
    settled(cluster)  # a kept sts address is legitimate, not an orphan

    store.create("pods", pod("other"))  # must not get db-0's address
    store.create("pods", pod("db-0", owner=owner))
    again = allocated(cluster, "db-0")
    assert (again[IP_ADDRESS_ANNOTATION], again[MAC_ADDRESS_ANNOTATION]) == (ip, mac)
    assert allocated(cluster, "other")[IP_ADDRESS_ANNOTATION] not in (ip, ip1)
    assert_kept(ctl, cluster, "db-0", ip)
    settled(cluster)

    # scale down to 1: db-1 is released once it terminates
    store.patch("statefulsets", NS, "db", {"spec": {"replicas": 1}})
    wait_for(
        lambda: cached_sts(ctl, "db")["spec"]["replicas"] == 1,
        message="scale-down seen",
    )
    delete_pod(cluster, "db-1")
    assert_released(ctl, cluster, "db-1")
    assert not ctl.ipam.get_ip_owner(ip1, SUBNET)
    assert_kept(ctl, cluster, "db-0", ip)
    settled(cluster)


def test_statefulset_deletion_releases_its_pods(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    owner = statefulset(cluster, "web", 1)
    store.create("pods", pod("web-0", owner=owner))
    allocated(cluster, "web-0")
    store.delete("statefulsets", NS, "web")
    gone(cluster, "statefulsets", "web", NS)
    delete_pod(cluster, "web-0")  # the garbage collector's cascade
    assert_released(ctl, cluster, "web-0")
    settled(cluster)


def test_subnet_change_releases_the_kept_address(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    subnet(cluster, ctl, "sub-x", "10.66.0.0/24")
    owner = statefulset(cluster, "kv", 1)
    store.create("pods", pod("kv-0", owner=owner))
    old_ip = allocated(cluster, "kv-0")[IP_ADDRESS_ANNOTATION]
    # the StatefulSet moves to sub-x: its pod's ovn-default address must not be kept
    store.patch(
        "statefulsets",
        NS,
        "kv",
        {"spec": {"template": {"metadata": {"annotations": {LOGICAL_SWITCH_ANNOTATION: "sub-x"}}}}},
    )
    wait_for(
        lambda: "annotations" in cached_sts(ctl, "kv")["spec"]["template"]["metadata"],
        message="template change seen",
    )
    delete_pod(cluster, "kv-0")
    assert_released(ctl, cluster, "kv-0")
    assert not ctl.ipam.get_ip_owner(old_ip, SUBNET)
    store.create("pods", pod("kv-0", owner=owner, annotations={LOGICAL_SWITCH_ANNOTATION: "sub-x"}))
    new_ip = allocated(cluster, "kv-0")[IP_ADDRESS_ANNOTATION]
    assert new_ip.startswith("10.66.0.")
    port = wait_for(lambda: cluster.nb.get_port(f"kv-0.{NS}"), message="kv-0 LSP")
    assert port.switch == "sub-x"
    settled(cluster)


def test_ip_pool_by_ordinal_without_random_fallback(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    pool = {IP_POOL_ANNOTATION: "10.16.0.80,10.16.0.81"}
    owner = statefulset(cluster, "pl", 3, template_annotations=pool)
    for i in (2, 1, 0):  # out of order: the ordinal, not the arrival, picks the address
        store.create("pods", pod(f"pl-{i}", owner=owner, annotations=pool))
    assert allocated(cluster, "pl-0")[IP_ADDRESS_ANNOTATION] == "10.16.0.80"
    assert allocated(cluster, "pl-1")[IP_ADDRESS_ANNOTATION] == "10.16.0.81"
    event = warning(cluster, "pl-2", "AcquireAddressFailed")
    assert "NoAvailable" in event["message"] or "no available" in event["message"].lower()
    assert get_or_none(cluster.server, "ips", None, f"pl-2.{NS}") is None
    assert cluster.nb.get_port(f"pl-2.{NS}") is None

    # pl-1 re-created gets its pool address back
    delete_pod(cluster, "pl-1")
    quiet(ctl)
    store.create("pods", pod("pl-1", owner=owner, annotations=pool))
    assert allocated(cluster, "pl-1")[IP_ADDRESS_ANNOTATION] == "10.16.0.81"

    # scaling to 2 removes the pod that could never be allocated
    store.patch("statefulsets", NS, "pl", {"spec": {"replicas": 2}})
    delete_pod(cluster, "pl-2")
    gone(cluster, "pods", "pl-2", NS)
    settled(cluster)


def test_restart_after_scale_down_releases_the_kept_address(
    cluster: Cluster, start_controller: StartController
) -> None:
    graceful(cluster)
    store = cluster.server.store
    owner = statefulset(cluster, "rs", 2)
    first = running(start_controller(identity="controller-a"), "first controller started")
    store.create("pods", pod("rs-0", owner=owner))
    store.create("pods", pod("rs-1", owner=owner))
    ip0 = allocated(cluster, "rs-0")[IP_ADDRESS_ANNOTATION]
    ip1 = allocated(cluster, "rs-1")[IP_ADDRESS_ANNOTATION]
    first.stop()
    assert first.wait(15) == 0

    # while no controller runs: both pods go, the StatefulSet shrinks to one replica
    delete_pod(cluster, "rs-0")
    delete_pod(cluster, "rs-1")
    store.patch("statefulsets", NS, "rs", {"spec": {"replicas": 1}})

    second = running(start_controller(identity="controller-b"), "second controller started")
    # rs-0 is still wanted: restored from its IP CR, its port kept by the start-up gc
    assert_kept(second, cluster, "rs-0", ip0)
    # rs-1 is beyond the replicas: the start-up gc collects its port, IP CR and address
    assert_released(second, cluster, "rs-1")
    assert not second.ipam.get_ip_owner(ip1, SUBNET)
    settled(cluster)
    store.create("pods", pod("rs-0", owner=owner))
    assert allocated(cluster, "rs-0")[IP_ADDRESS_ANNOTATION] == ip0
    settled(cluster)


def test_periodic_gc_keeps_a_kept_statefulset_port(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, "--gc-interval=0.2")
    owner = statefulset(cluster, "gk", 1)
    cluster.server.store.create("pods", pod("gk-0", owner=owner))
    ip = allocated(cluster, "gk-0")[IP_ADDRESS_ANNOTATION]
    delete_pod(cluster, "gk-0")
    quiet(ctl)
    runs = ctl.registry.get_sample_value("kube_ovn_controller_gc_runs_total") or 0.0
    wait_for(
        lambda: (
            (ctl.registry.get_sample_value("kube_ovn_controller_gc_runs_total") or 0) >= runs + 3
        ),
        message="three more gc passes",
    )
    assert_kept(ctl, cluster, "gk-0", ip)
    settled(cluster)


def test_force_deleted_pod_gets_its_address_back(ctl: Controller, cluster: Cluster) -> None:
    # `kubectl delete --force --grace-period=0`: the pod goes at once, its last state has no
    # deletionTimestamp, so kube-ovn removes the port but keeps the IP CR; the re-created pod
    # must get the address that IP CR records (what a restarted controller would restore).
    store = cluster.server.store
    owner = statefulset(cluster, "fd", 1)
    store.create("pods", pod("fd-0", owner=owner))
    first = allocated(cluster, "fd-0")
    ip, mac = first[IP_ADDRESS_ANNOTATION], first[MAC_ADDRESS_ANNOTATION]
    store.delete("pods", NS, "fd-0", grace_period_seconds=0)
    quiet(ctl)
    cr = cluster.server.store.get("ips", None, f"fd-0.{NS}")
    assert cr["spec"]["ipAddress"] == ip
    settled(cluster)
    store.create("pods", pod("filler"))  # takes the next free address if fd-0's was released
    allocated(cluster, "filler")
    store.create("pods", pod("fd-0", owner=owner))
    again = allocated(cluster, "fd-0")
    assert (again[IP_ADDRESS_ANNOTATION], again[MAC_ADDRESS_ANNOTATION]) == (ip, mac)
    assert_kept(ctl, cluster, "fd-0", ip)
    settled(cluster)


def test_gc_releases_a_force_deleted_pods_address_after_scale_down(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, "--gc-interval=0.3")
    store = cluster.server.store
    owner = statefulset(cluster, "fz", 1)
    store.create("pods", pod("fz-0", owner=owner))
    ip = allocated(cluster, "fz-0")[IP_ADDRESS_ANNOTATION]
    store.delete("pods", NS, "fz-0", grace_period_seconds=0)
    quiet(ctl)
    assert ctl.ipam.get_ip_owner(ip, SUBNET) == f"{NS}/fz-0"  # kept with the IP CR
    # no pod will ever be deleted again for ordinal 0: the gc releases what was kept
    store.patch("statefulsets", NS, "fz", {"spec": {"replicas": 0}})
    gone(cluster, "ips", f"fz-0.{NS}")
    wait_for(lambda: not ctl.ipam.get_ip_owner(ip, SUBNET), message="address released by gc")
    settled(cluster)


def test_gc_releases_a_kept_address_once_the_statefulset_is_deleted(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, "--gc-interval=0.3")
    store = cluster.server.store
    owner = statefulset(cluster, "gd", 1)
    store.create("pods", pod("gd-0", owner=owner))
    ip = allocated(cluster, "gd-0")[IP_ADDRESS_ANNOTATION]
    delete_pod(cluster, "gd-0")
    quiet(ctl)
    assert_kept(ctl, cluster, "gd-0", ip)
    store.delete("statefulsets", NS, "gd")  # no pod is left to trigger a delete: the gc does
    assert_released(ctl, cluster, "gd-0")
    settled(cluster)
