"""VLAN (underlay) subnets and custom-VPC subnets end to end (kube-ovn
v1.8.18 pod.go handleAddPod, handleUpdatePod, handleDeletePod).

A VLAN subnet's pods get network_type=vlan, vlan_id and provider_network; a custom-VPC subnet's
pods get logical_router and their switch hangs off the VPC's router. Neither gets per-pod routes
or NAT (kube-ovn routes only overlay subnets of the default VPC), and deletion removes the port,
IP CR and IPAM entry.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    EIP_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    NORTH_GATEWAY_ANNOTATION,
)
from tests.e2e.conftest import Cluster
from tests.e2e.helpers import NODE, annotations_of, audit_clean, get_or_none, pod, wait_for
from tests.e2e.nbrows import nb_row, nb_rows
from tests.e2e.workloads import routed

pytestmark = pytest.mark.e2e

NS = "default"


def routes_and_nats(cluster: Cluster, ip: str) -> list[dict[str, Any]]:
    remote = cluster.nb_server.remote
    return [r for r in nb_rows(remote, "Logical_Router_Static_Route") if r["ip_prefix"] == ip] + [
        n for n in nb_rows(remote, "NAT") if n["logical_ip"] == ip
    ]


def wait_switch(cluster: Cluster, name: str) -> None:
    wait_for(lambda: name in cluster.nb.list_logical_switches(), message=f"switch {name}")


def test_vlan_subnet_pod(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create("vlans", {"metadata": {"name": "vlan10"}, "spec": {"id": 10, "provider": "phy"}})
    store.create(
        "subnets",
        {"metadata": {"name": "under"}, "spec": {"cidrBlock": "192.168.10.0/24", "vlan": "vlan10"}},
    )
    wait_switch(cluster, "under")
    store.create(
        "pods",
        pod(
            "grounded",
            node_name=NODE,
            annotations={LOGICAL_SWITCH_ANNOTATION: "under", EIP_ANNOTATION: "172.56.0.9"},
        ),
    )
    ann = routed(cluster, "grounded")
    ip = ann[IP_ADDRESS_ANNOTATION]
    assert ip.startswith("192.168.10.")
    assert ann["ovn.kubernetes.io/network_type"] == "vlan"
    assert ann["ovn.kubernetes.io/vlan_id"] == "10"
    assert ann["ovn.kubernetes.io/provider_network"] == "phy"
    assert "ovn.kubernetes.io/logical_router" not in ann
    port = nb_row(cluster.nb_server.remote, "Logical_Switch_Port", f"grounded.{NS}")
    assert port is not None and port["external_ids"]["ls"] == "under"
    # an underlay subnet is routed by the physical network: no switch-router link, no route/NAT
    ls = nb_row(cluster.nb_server.remote, "Logical_Switch", "under")
    assert ls is not None and ls["ports"] == [f"grounded.{NS}"]
    assert routes_and_nats(cluster, ip) == []
    audit_clean(cluster.argv())

    store.delete("pods", NS, "grounded")
    wait_for(lambda: cluster.nb.get_port(f"grounded.{NS}") is None, message="port removed")
    wait_for(
        lambda: get_or_none(cluster.server, "ips", None, f"grounded.{NS}") is None, message="IP CR"
    )
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/grounded") == [], message="IPAM released")
    audit_clean(cluster.argv())


def test_vlan_subnet_without_its_vlan_is_an_event(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create(
        "subnets",
        {"metadata": {"name": "orphan"}, "spec": {"cidrBlock": "192.168.20.0/24", "vlan": "nope"}},
    )
    wait_switch(cluster, "orphan")
    store.create("pods", pod("stray", annotations={LOGICAL_SWITCH_ANNOTATION: "orphan"}))
    wait_for(
        lambda: [
            e
            for e in store.list("events", NS)
            if e["involvedObject"]["name"] == "stray" and e["reason"] == "GetVlanInfoFailed"
        ],
        message="GetVlanInfoFailed event",
    )
    assert ALLOCATED_ANNOTATION not in annotations_of(cluster.server, "pods", NS, "stray")
    assert cluster.nb.get_port(f"stray.{NS}") is None


def test_custom_vpc_subnet_pod(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create(
        "vpcs",
        {"metadata": {"name": "tenant"}, "spec": {}, "status": {"router": "tenant"}},
    )
    store.create(
        "subnets",
        {
            "metadata": {"name": "tenant-net"},
            "spec": {"cidrBlock": "10.200.0.0/24", "vpc": "tenant"},
        },
    )
    wait_switch(cluster, "tenant-net")
    # the switch is linked to the VPC's own router, not to the cluster router
    lr = wait_for(lambda: nb_row(cluster.nb_server.remote, "Logical_Router", "tenant"))
    lrp = nb_row(cluster.nb_server.remote, "Logical_Router_Port", "tenant-tenant-net")
    assert lrp is not None and lrp["networks"] == ["10.200.0.1/24"]
    assert "tenant-tenant-net" in {
        p["name"] for p in nb_rows(cluster.nb_server.remote, "Logical_Router_Port")
    }
    cluster_router = nb_row(cluster.nb_server.remote, "Logical_Router", "ovn-cluster")
    assert cluster_router is not None
    assert len(lr["ports"]) == 1

    store.create(
        "pods",
        pod(
            "tenant-app",
            node_name=NODE,
            annotations={LOGICAL_SWITCH_ANNOTATION: "tenant-net", EIP_ANNOTATION: "172.56.0.8"},
        ),
    )
    ann = routed(cluster, "tenant-app")
    ip = ann[IP_ADDRESS_ANNOTATION]
    assert ip.startswith("10.200.0.")
    assert ann["ovn.kubernetes.io/logical_router"] == "tenant"
    assert ann["ovn.kubernetes.io/network_type"] == "geneve"
    port = nb_row(cluster.nb_server.remote, "Logical_Switch_Port", f"tenant-app.{NS}")
    assert port is not None and port["external_ids"]["ls"] == "tenant-net"
    assert routes_and_nats(cluster, ip) == []  # no default-VPC routing for a custom VPC
    audit_clean(cluster.argv())

    store.delete("pods", NS, "tenant-app")
    wait_for(lambda: cluster.nb.get_port(f"tenant-app.{NS}") is None, message="port removed")
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/tenant-app") == [], message="released")
    wait_for(
        lambda: get_or_none(cluster.server, "ips", None, f"tenant-app.{NS}") is None,
        message="IP CR",
    )
    audit_clean(cluster.argv())


def north_reroutes(cluster: Cluster, ip: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """The cluster router's per-address reroutes of `ip` (priority, match, next hops)."""
    return [
        (int(p["priority"]), str(p["match"]), tuple(p["nexthops"]))
        for p in nb_rows(cluster.nb_server.remote, "Logical_Router_Policy")
        if p["action"] == "reroute" and str(p["match"]).endswith(f"src == {ip}")
    ]


def test_a_custom_vpc_pods_delete_keeps_the_default_pods_reroute_of_the_same_address(
    ctl: Controller, cluster: Cluster
) -> None:
    """A custom VPC may reuse the default subnet's range, so one address can be held by a
    default-VPC pod and a custom-VPC pod at once: the custom-VPC pod's delete leaves the
    default-VPC pod's reroute of that address on the cluster router."""
    store = cluster.server.store
    shared = "10.16.200.7"
    store.create(
        "vpcs", {"metadata": {"name": "tenant"}, "spec": {}, "status": {"router": "tenant"}}
    )
    store.create(
        "subnets",
        {
            "metadata": {"name": "tenant-reuse"},
            "spec": {"cidrBlock": "10.16.0.0/16", "vpc": "tenant"},
        },
    )
    wait_switch(cluster, "tenant-reuse")
    north = {NORTH_GATEWAY_ANNOTATION: "10.16.0.254", IP_ADDRESS_ANNOTATION: shared}
    store.create("pods", pod("northern", node_name=NODE, annotations=north))
    assert routed(cluster, "northern")[IP_ADDRESS_ANNOTATION] == shared
    want = [(29250, f"ip4.src == {shared}", ("10.16.0.254",))]
    wait_for(lambda: north_reroutes(cluster, shared) == want, message="north reroute written")
    twin = {LOGICAL_SWITCH_ANNOTATION: "tenant-reuse", IP_ADDRESS_ANNOTATION: shared}
    store.create("pods", pod("tenant-twin", node_name=NODE, annotations=twin))
    ann = routed(cluster, "tenant-twin")
    assert (
        ann[IP_ADDRESS_ANNOTATION] == shared and ann["ovn.kubernetes.io/logical_router"] == "tenant"
    )

    store.delete("pods", NS, "tenant-twin")
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/tenant-twin") == [], message="released")
    # the release's routing write precedes the IPAM release: anything it removed is gone now
    assert north_reroutes(cluster, shared) == want
    assert ctl.ipam.get_pod_address(f"{NS}/northern") != []
    audit_clean(cluster.argv())
