"""Correctness regressions against the API emulator and a real NB database: IPAM follows the
Subnets in every mode, pods waiting for a subnet converge when it appears, owner checks confirm
with the API, writes apply only to the pod incarnation they were computed for."""

from __future__ import annotations

import pytest

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import annotations_of, get_or_none, running, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    delete_pod,
    graceful,
    lsp,
    no_lsp,
    pod,
    quiet,
    start_graceful,
    statefulset,
    virtual_machine,
)

pytestmark = pytest.mark.e2e


def _late_subnet(cluster: Cluster, name: str, cidr: str, gateway: str) -> None:
    """A subnet as kube-ovn's own subnet controller leaves it: formatted spec, switch created."""
    cluster.server.store.create(
        "subnets",
        {
            "metadata": {"name": name},
            "spec": {
                "cidrBlock": cidr,
                "gateway": gateway,
                "excludeIps": [gateway],
                "protocol": "IPv4",
                "provider": "ovn",
                "vpc": "ovn-cluster",
            },
        },
    )
    cluster.nb.ensure_logical_switch(name, "ovn-cluster", cidr, gateway, {})


def test_ipam_follows_subnets_without_subnet_controller(
    cluster: Cluster, start_controller: StartController
) -> None:
    graceful(cluster)
    store = cluster.server.store
    ctl = running(start_controller("--enable-subnet-controller=false"))
    # a subnet created after start-up becomes allocatable
    _late_subnet(cluster, "late", "10.90.0.0/24", "10.90.0.1")
    wait_for(lambda: ctl.ipam.has_subnet("late"), message="subnet late in IPAM")
    on_late = {LOGICAL_SWITCH_ANNOTATION: "late"}
    store.create("pods", pod("p1", annotations=on_late))
    first = allocated(cluster, "p1")[IP_ADDRESS_ANNOTATION]
    assert first == "10.90.0.2"
    # an excludeIps edit is honoured: the excluded range is never handed out
    store.patch("subnets", None, "late", {"spec": {"excludeIps": ["10.90.0.1..10.90.0.20"]}})

    def excluded() -> bool:
        try:
            return int(ctl.ipam.get_random_address("probe", "late")[0].split(".")[3]) > 20
        finally:
            ctl.ipam.release_address_by_pod("probe")

    wait_for(excluded, message="exclude list applied")
    store.create("pods", pod("p2", annotations=on_late))
    second = allocated(cluster, "p2")[IP_ADDRESS_ANNOTATION]
    assert int(second.split(".")[3]) > 20, second
    # a deleted subnet is forgotten, and the pods' deletes still remove their ports
    lsp(cluster, "p2.default")
    store.delete("subnets", None, "late")
    wait_for(lambda: not ctl.ipam.has_subnet("late"), message="subnet late forgotten")
    delete_pod(cluster, "p2")
    no_lsp(cluster, "p2.default")


def test_pod_waiting_for_its_subnet_is_requeued_when_the_subnet_appears(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    # the periodic inspection (which re-queues unallocated pods) must not be what saves it
    ctl = running(start_controller("--inspect-interval=600"))
    store.create("pods", pod("early", annotations={LOGICAL_SWITCH_ANNOTATION: "late2"}))
    queue = ctl.pod_queues.add
    # eleven failed adds: the next retry is 5 ms * 2**10 = 5.1 s away
    wait_for(lambda: queue.num_requeues("default/early") >= 11, message="add retried 11 times")
    store.create("subnets", {"metadata": {"name": "late2"}, "spec": {"cidrBlock": "10.91.0.0/24"}})
    wait_for(
        lambda: queue.num_requeues("default/early") == 0,
        timeout=3.0,
        message="the pod's add re-run for its new subnet, ahead of its backoff",
    )
    assert allocated(cluster, "early")[IP_ADDRESS_ANNOTATION].startswith("10.91.0.")


def _lag_owner_cache(ctl: Controller, informer: str, key: str) -> None:
    """The owner informer has not seen the object (a lagging or not yet synced cache)."""
    indexer = ctl.informers[informer].get_indexer()
    wait_for(lambda: indexer.get_by_key(key), message=f"{key} cached")
    indexer.delete(indexer.get_by_key(key))


def _touch_and_settle(cluster: Cluster, ctl: Controller, name: str) -> None:
    """An ordinary update of a running pod, seen by the controller's pod informer."""
    store = cluster.server.store
    new = store.patch("pods", NS, name, {"metadata": {"labels": {"touched": "yes"}}})
    rv = new["metadata"]["resourceVersion"]
    pods = ctl.informers["pods"].get_indexer()
    wait_for(
        lambda: (
            (pods.get_by_key(f"{NS}/{name}") or {}).get("metadata", {}).get("resourceVersion") == rv
        ),
        message="pod update cached",
    )
    quiet(ctl)


@pytest.mark.emulator_only(
    "a hand-made StatefulSet (no pod template) and the emulator's fault injection; the real-plane "
    "side is tests/controlplane/test_correctness.py"
)
def test_running_statefulset_pod_keeps_network_when_owner_cache_lags(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller)
    owner = statefulset(cluster, "web", 2)
    cluster.server.store.create("pods", pod("web-0", owner=owner))
    ip = allocated(cluster, "web-0")[IP_ADDRESS_ANNOTATION]
    lsp(cluster, f"web-0.{NS}")
    _lag_owner_cache(ctl, "statefulsets", f"{NS}/web")
    _touch_and_settle(cluster, ctl, "web-0")
    assert ctl.ipam.get_ip_owner(ip, "ovn-default") == f"{NS}/web-0"
    assert cluster.nb.get_port(f"web-0.{NS}") is not None


def test_running_vm_pod_keeps_network_when_owner_cache_lags(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, "--keep-vm-ip=true")
    owner = virtual_machine(cluster, "vm1")
    cluster.server.store.create("pods", pod("virt-launcher-vm1-x", owner=owner))
    ip = allocated(cluster, "virt-launcher-vm1-x")[IP_ADDRESS_ANNOTATION]
    lsp(cluster, f"vm1.{NS}")
    _lag_owner_cache(ctl, "vms", f"{NS}/vm1")
    _touch_and_settle(cluster, ctl, "virt-launcher-vm1-x")
    assert ctl.ipam.get_ip_owner(ip, "ovn-default") == f"{NS}/vm1"
    assert cluster.nb.get_port(f"vm1.{NS}") is not None
    assert cluster.server.store.get("ips", None, f"vm1.{NS}")


@pytest.mark.emulator_only(
    "holds the allocation patch with the emulator's latency fault; the real-plane side of the "
    "UID precondition is tests/controlplane/test_correctness.py"
)
def test_allocation_patch_only_applies_to_the_pod_it_was_computed_for(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    ctl = running(start_controller())
    _late_subnet(cluster, "other", "10.92.0.0/24", "10.92.0.1")
    wait_for(lambda: ctl.ipam.has_subnet("other"), message="subnet other in IPAM")
    # the first incarnation's allocation patch is held back at the API server...
    cluster.emulator.faults.add_latency(2.0, n=1, verb="patch", resource="pods", name="p")
    first = store.create("pods", pod("p"))
    wait_for(
        lambda: get_or_none(cluster.server, "ips", None, "p.default"),
        message="first incarnation's IP CR",
    )
    # ...while the pod is deleted and re-created on another subnet
    store.delete("pods", NS, "p")
    second = store.create("pods", pod("p", annotations={LOGICAL_SWITCH_ANNOTATION: "other"}))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    ann = allocated(cluster, "p")
    assert ann[LOGICAL_SWITCH_ANNOTATION] == "other"
    assert ann[IP_ADDRESS_ANNOTATION].startswith("10.92.0.")
    quiet(ctl)
    held = ctl.ipam.get_pod_address(f"{NS}/p")
    assert [(a.subnet, a.ip) for a in held] == [("other", ann[IP_ADDRESS_ANNOTATION])]
    port = lsp(cluster, "p.default")
    assert port.switch == "other"
    assert store.get("ips", None, "p.default")["spec"]["subnet"] == "other"


def test_ip_cr_written_by_kube_ovn_is_not_rewritten_at_start(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    ip, mac = "10.16.0.40", "00:00:00:00:00:40"
    store.create(
        "pods",
        {
            **pod("migrated", node_name="node1"),
            "metadata": {
                "name": "migrated",
                "namespace": NS,
                "annotations": {
                    "ovn.kubernetes.io/allocated": "true",
                    "ovn.kubernetes.io/routed": "true",
                    IP_ADDRESS_ANNOTATION: ip,
                    "ovn.kubernetes.io/mac_address": mac,
                    "ovn.kubernetes.io/cidr": "10.16.0.0/16",
                    "ovn.kubernetes.io/gateway": "10.16.0.1",
                    LOGICAL_SWITCH_ANNOTATION: "ovn-default",
                },
            },
        },
    )
    # the CR as kube-ovn v1.8 wrote it: containerID "", null lists; plus a foreign label
    cr = store.create(
        "ips",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "IP",
            "metadata": {
                "name": "migrated.default",
                "labels": {"ovn.kubernetes.io/subnet": "ovn-default", "ovn-default": "", "x": "y"},
            },
            "spec": {
                "podName": "migrated",
                "namespace": NS,
                "subnet": "ovn-default",
                "attachSubnets": None,
                "nodeName": "node1",
                "ipAddress": ip,
                "v4IpAddress": ip,
                "v6IpAddress": "",
                "attachIps": None,
                "macAddress": mac,
                "attachMacs": None,
                "containerID": "",
                "podType": "",
            },
        },
    )
    ctl = running(start_controller())
    quiet(ctl)
    now = store.get("ips", None, "migrated.default")
    assert now["metadata"]["resourceVersion"] == cr["metadata"]["resourceVersion"]
    assert now["metadata"]["labels"]["x"] == "y"


def test_namespace_of_custom_vpc_uses_the_vpc_default_subnet(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    ctl = running(start_controller())
    store.create(
        "vpcs",
        {
            "metadata": {"name": "vpc1"},
            "spec": {"namespaces": ["team-v"]},
            "status": {"router": "vpc1", "defaultLogicalSwitch": "vpc1-sub"},
        },
    )
    store.create(
        "subnets",
        {"metadata": {"name": "vpc1-sub"}, "spec": {"cidrBlock": "10.93.0.0/24", "vpc": "vpc1"}},
    )
    wait_for(lambda: ctl.ipam.has_subnet("vpc1-sub"), message="vpc1-sub in IPAM")
    store.create("namespaces", {"metadata": {"name": "team-v"}})
    wait_for(
        lambda: annotations_of(cluster.server, "namespaces", None, "team-v").get(
            LOGICAL_SWITCH_ANNOTATION
        ),
        message="team-v annotated",
    )
    assert (
        annotations_of(cluster.server, "namespaces", None, "team-v")[LOGICAL_SWITCH_ANNOTATION]
        == "vpc1-sub"
    )
    store.create("pods", pod("in-vpc", "team-v"))
    got = allocated(cluster, "in-vpc", namespace="team-v")
    assert got[IP_ADDRESS_ANNOTATION].startswith("10.93.0.")
