"""A restart converges. Pods are created and deleted while no controller runs;
the next one rebuilds IPAM from annotations, collects what the deleted pods left behind (the
start-up gc), allocates the new pods, and no address is held twice."""

from __future__ import annotations

from functools import partial

import pytest

from controller.app import Controller
from controller.core.constants import ROUTED_ANNOTATION
from controller.ovn.api import PortSpec
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.egress import egress_routes
from tests.e2e.helpers import (
    HANDMADE_STS,
    NODE,
    allocated_pods,
    annotations_once,
    audit_clean,
    pod,
    running,
    wait_for,
)
from tests.e2e.workloads import lsp, no_lsp

pytestmark = pytest.mark.e2e

NS = "default"
SUBNET = "ovn-default"


def all_allocated(cluster: Cluster, names: set[str]) -> dict[str, str]:
    ips = allocated_pods(cluster.server.store)
    return ips if names <= set(ips) else {}


def assert_consistent(ctl: Controller, cluster: Cluster, names: set[str]) -> None:
    store = cluster.server.store
    ips = allocated_pods(cluster.server.store)
    assert set(ips) == names
    assert len(set(ips.values())) == len(ips), f"an address is annotated twice: {ips}"
    for name, ip in ips.items():
        held = ctl.ipam.get_pod_address(f"{NS}/{name}")
        assert [(a.subnet, a.ip) for a in held] == [(SUBNET, ip)], (name, held)
        port = lsp(cluster, f"{name}.{NS}")
        assert port.addresses[0].split()[1:] == [ip], (name, port)
        assert store.get("ips", None, f"{name}.{NS}")["spec"]["ipAddress"] == ip
    wanted = {f"{n}.{NS}" for n in names}
    wait_for(
        lambda: {p.name for p in cluster.nb.list_ports() if p.external_ids.get("pod")} == wanted,
        message=f"the reader sees exactly the pod ports {sorted(wanted)}",
    )
    ip_crs = {c["metadata"]["name"] for c in store.list("ips") if c["spec"]["namespace"]}
    assert ip_crs == {f"{n}.{NS}" for n in names}
    assert ctl.ipam.verify() == []


def test_restart_converges_without_leaks_or_double_allocation(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    first = running(start_controller(identity="controller-a"), "first controller started")
    for name in ("p1", "p2", "p3", "p4"):
        store.create("pods", pod(name, node_name=NODE if name in ("p1", "p4") else ""))
    before = wait_for(lambda: all_allocated(cluster, {"p1", "p2", "p3", "p4"}), message="pods")
    for routed in ("p1", "p4"):
        wait_for(
            partial(annotations_once, cluster.server, "pods", NS, routed, ROUTED_ANNOTATION),
            message=f"{routed} routed",
        )
    first.stop()
    assert first.wait(15) == 0

    # while no controller runs: two pods go, two come, one is re-created under the same name,
    # and somebody leaves an orphan kube-ovn port behind
    store.delete("pods", NS, "p1")
    store.delete("pods", NS, "p2")
    store.delete("pods", NS, "p3")
    store.create("pods", pod("p3"))
    store.create("pods", pod("p5"))
    store.create("pods", pod("p6"))
    cluster.nb.create_port(
        PortSpec(
            name=f"ghost.{NS}",
            switch=SUBNET,
            mac="00:00:00:12:34:56",
            ips=("10.16.0.200",),
            pod_name="ghost",
            pod_namespace=NS,
        )
    )

    second = running(start_controller(identity="controller-b"), "second controller started")
    names = {"p3", "p4", "p5", "p6"}
    after = wait_for(lambda: all_allocated(cluster, names), message="new pods allocated")
    assert after["p4"] == before["p4"]  # restored from its annotations, not re-allocated
    wait_for(lambda: len(second.pod_queues.add) == 0 and len(second.pod_queues.delete) == 0)
    assert_consistent(second, cluster, names)
    no_lsp(cluster, f"ghost.{NS}")
    for gone in ("p1", "p2"):
        assert second.ipam.get_pod_address(f"{NS}/{gone}") == []

    def routes() -> set[str]:
        return {r[0] for r in egress_routes(cluster.nb)}

    def scheduled() -> set[str]:
        return {after[n] for n in names if store.get("pods", NS, n)["spec"].get("nodeName")}

    # the start-up gc removed the deleted pod's route (unless a new scheduled pod got its
    # address: a scheduler binds every pod, the emulator none); p4 is still routed
    wait_for(
        lambda: (
            (before["p1"] not in routes() or before["p1"] in scheduled())
            and after["p4"] in routes()
        ),
        message="p1's route removed, p4's kept",
    )
    used = wait_for(
        lambda: (
            store.get("subnets", None, SUBNET).get("status", {}).get("v4usingIPs") == len(names)
        ),
        message="subnet status counts the four pods",
    )
    assert used
    audit_clean(cluster.argv())


@pytest.mark.emulator_only(HANDMADE_STS)
def test_statefulset_pod_keeps_its_address_across_a_restart(
    cluster: Cluster, start_controller: StartController
) -> None:
    # InitIPAM restores a StatefulSet pod's address from its IP CR
    store = cluster.server.store
    sts = store.create(
        "statefulsets",
        {
            "metadata": {"name": "db", "namespace": NS},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}}, "template": {}},
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "db",
        "uid": sts["metadata"]["uid"],
        "controller": True,
    }
    first = running(start_controller(identity="controller-a"), "first controller started")
    store.create("pods", pod("db-0", owner=owner))
    ip = wait_for(lambda: all_allocated(cluster, {"db-0"}), message="db-0 allocated")["db-0"]
    assert store.get("ips", None, f"db-0.{NS}")["spec"]["podType"] == "StatefulSet"
    first.stop()
    assert first.wait(15) == 0

    store.delete("pods", NS, "db-0")  # the StatefulSet is alive: its address is kept
    store.create("pods", pod("other"))  # would take db-0's address if IPAM forgot it
    second = running(start_controller(identity="controller-b"), "second controller started")
    wait_for(lambda: all_allocated(cluster, {"other"}), message="other allocated")
    assert second.ipam.get_ip_owner(ip, SUBNET) == f"{NS}/db-0"
    assert cluster.nb.get_port(f"db-0.{NS}") is not None  # kept by the start-up gc
    store.create("pods", pod("db-0", owner=owner))
    again = wait_for(lambda: all_allocated(cluster, {"db-0", "other"}), message="db-0 again")
    assert again["db-0"] == ip
    assert again["other"] != ip
    audit_clean(cluster.argv())


def test_periodic_gc_removes_an_orphan_port_while_running(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--gc-interval=0.3"))
    cluster.server.store.create("pods", pod("keeper"))
    wait_for(lambda: all_allocated(cluster, {"keeper"}), message="keeper allocated")
    cluster.nb.create_port(
        PortSpec(
            name=f"stray.{NS}",
            switch=SUBNET,
            mac="00:00:00:65:43:21",
            ips=("10.16.0.201",),
            pod_name="stray",
            pod_namespace=NS,
        )
    )
    wait_for(lambda: cluster.nb.get_port(f"stray.{NS}") is None, message="orphan port collected")
    assert cluster.nb.get_port(f"keeper.{NS}") is not None
    gc_runs = ctl.registry.get_sample_value("kube_ovn_controller_gc_runs_total")
    assert gc_runs is not None and gc_runs >= 2
