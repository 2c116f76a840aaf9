"""IPAM and pods follow the Subnets end to end: IPAM knows every Subnet in every mode (with or
without the subnet controller), a pod waiting for its subnet converges when the subnet appears,
and a namespace of a custom VPC uses that VPC's default subnet."""

from __future__ import annotations

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import annotations_of, running, wait_for
from tests.e2e.workloads import (
    allocated,
    delete_pod,
    formatted_subnet,
    graceful,
    lsp,
    no_lsp,
    pod,
)

pytestmark = pytest.mark.e2e


def test_ipam_follows_subnets_without_subnet_controller(
    cluster: Cluster, start_controller: StartController
) -> None:
    graceful(cluster)
    store = cluster.server.store
    ctl = running(start_controller("--enable-subnet-controller=false"))
    # a subnet created after start-up becomes allocatable
    formatted_subnet(cluster, "late", "10.90.0.0/24", "10.90.0.1")
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
    cluster: Cluster, start_controller: StartController, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cluster.server.store
    # the periodic inspection (which re-queues unallocated pods) must not be what saves it
    ctl = running(start_controller("--inspect-interval=600"))
    queue = ctl.pod_queues.add
    retries: list[str] = []

    def an_hour_later(item: str) -> None:
        retries.append(item)
        queue.add_after(item, 3600.0)

    # nor its backoff: a failed add is retried an hour later, far past every deadline here
    monkeypatch.setattr(queue, "add_rate_limited", an_hour_later)
    store.create("pods", pod("early", annotations={LOGICAL_SWITCH_ANNOTATION: "late2"}))
    wait_for(lambda: retries == ["default/early"], message="the add failed for want of late2")
    store.create("subnets", {"metadata": {"name": "late2"}, "spec": {"cidrBlock": "10.91.0.0/24"}})
    ip = allocated(cluster, "early")[IP_ADDRESS_ANNOTATION]
    assert ip.startswith("10.91.0."), ip
    assert retries == ["default/early"]  # re-run by the subnet's appearance, at the first go


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
