"""Routes and NAT of default-VPC pods end to end (kube-ovn v1.8.18 pod.go
handleUpdatePod, handleDeletePod; pkg/ovs/ovn-nbctl.go).

EIP/SNAT pods (with --enable-eip-snat, the default) get dnat_and_snat / snat rules and a src-ip
route to the external gateway of ConfigMap kube-system/ovn-external-gw-config; north-gateway
pods a src-ip route to their gateway; everything goes again when the pod is deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.constants import (
    EIP_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    NORTH_GATEWAY_ANNOTATION,
    ROUTED_ANNOTATION,
    SNAT_ANNOTATION,
)
from controller.testing.wait import WaitTimeout
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.egress import egress_routes
from tests.e2e.helpers import NODE, annotations_of, audit_clean, pod, running, wait_for
from tests.e2e.nbrows import nb_rows
from tests.e2e.workloads import routed

pytestmark = pytest.mark.e2e

NS = "default"
GW_CONFIG = {
    "metadata": {"name": "ovn-external-gw-config", "namespace": "kube-system"},
    "data": {"enable-external-gw": "true", "external-gw-addr": "172.56.0.1/16"},
}


def routes(cluster: Cluster, ip: str) -> set[tuple[str, str, str]]:
    return {r for r in egress_routes(cluster.nb) if r[0] == ip}


def routes_become(cluster: Cluster, ip: str, want: set[tuple[str, str, str]]) -> None:
    """Waits (with a deadline) for `ip`'s egress to be `want`: the routed annotation can reach
    the test before the test's own NB replica has the controller's policy and set rows."""
    try:
        wait_for(lambda: routes(cluster, ip) == want, message=f"egress of {ip}")
    except WaitTimeout:
        assert routes(cluster, ip) == want  # the difference, in pytest's words


def nats(cluster: Cluster, ip: str) -> set[tuple[str, str]]:
    return {
        (n["type"], n["external_ip"])
        for n in nb_rows(cluster.nb_server.remote, "NAT")
        if n["logical_ip"] == ip
    }


def on_cluster_router(cluster: Cluster, table_column: str) -> list[Any]:
    rows = [r for r in nb_rows(cluster.nb_server.remote, "Logical_Router")]
    (lr,) = [r for r in rows if r["name"] == "ovn-cluster"]
    return list(lr[table_column])


def test_eip_snat_pod_gets_nat_and_external_gateway_route(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    running(start_controller("--enable-eip-snat=true"))
    store.create(
        "pods",
        pod(
            "exposed",
            node_name=NODE,
            annotations={EIP_ANNOTATION: "172.56.0.100", SNAT_ANNOTATION: "172.56.0.200"},
        ),
    )
    # without the external gateway config the pod cannot be routed yet ...
    ip = wait_for(
        lambda: annotations_of(cluster.server, "pods", NS, "exposed").get(IP_ADDRESS_ANNOTATION),
        message="exposed allocated",
    )
    assert ROUTED_ANNOTATION not in annotations_of(cluster.server, "pods", NS, "exposed")
    # ... and is, once the ConfigMap appears (retried by the update queue)
    store.create("configmaps", GW_CONFIG)
    ann = routed(cluster, "exposed")
    routes_become(cluster, ip, {(ip, "172.56.0.1", "src-ip")})
    assert nats(cluster, ip) == {("dnat_and_snat", "172.56.0.100"), ("snat", "172.56.0.200")}
    dnat = [n for n in nb_rows(cluster.nb_server.remote, "NAT") if n["type"] == "dnat_and_snat"]
    assert dnat[0]["logical_ip"] == ip
    # kube-ovn v1.8 (no "type: distributed" in the ConfigMap): centralized NAT, no port/MAC
    assert dnat[0]["logical_port"] == [] and dnat[0]["external_mac"] == []
    assert ann[MAC_ADDRESS_ANNOTATION]
    assert len(on_cluster_router(cluster, "nat")) == 2

    # a plain pod next to it: the node route, no NAT
    store.create("pods", pod("plain", node_name=NODE))
    plain_ip = routed(cluster, "plain")[IP_ADDRESS_ANNOTATION]
    node_ip = annotations_of(cluster.server, "nodes", None, NODE)[IP_ADDRESS_ANNOTATION]
    routes_become(cluster, plain_ip, {(plain_ip, node_ip, "src-ip")})
    assert nats(cluster, plain_ip) == set()
    audit_clean(cluster.argv())

    store.delete("pods", NS, "exposed")
    wait_for(lambda: not routes(cluster, ip) and not nats(cluster, ip), message="route/NAT gone")
    assert on_cluster_router(cluster, "nat") == []
    assert routes(cluster, plain_ip) == {(plain_ip, node_ip, "src-ip")}
    wait_for(lambda: cluster.nb.get_port(f"exposed.{NS}") is None, message="port removed")
    audit_clean(cluster.argv())


def test_north_gateway_route(cluster: Cluster, start_controller: StartController) -> None:
    store = cluster.server.store
    running(start_controller())
    store.create(
        "pods",
        pod("northern", node_name=NODE, annotations={NORTH_GATEWAY_ANNOTATION: "10.16.0.254"}),
    )
    ip = routed(cluster, "northern")[IP_ADDRESS_ANNOTATION]
    # the north gateway replaces the node route of a distributed subnet
    routes_become(cluster, ip, {(ip, "10.16.0.254", "src-ip")})
    assert nats(cluster, ip) == set()
    audit_clean(cluster.argv())
    store.delete("pods", NS, "northern")
    wait_for(lambda: not routes(cluster, ip), message="north route removed")
    audit_clean(cluster.argv())


def test_eip_snat_disabled(cluster: Cluster, start_controller: StartController) -> None:
    store = cluster.server.store
    store.create("configmaps", GW_CONFIG)
    running(start_controller("--enable-eip-snat=false"))
    store.create(
        "pods", pod("ignored", node_name=NODE, annotations={EIP_ANNOTATION: "172.56.0.101"})
    )
    ip = routed(cluster, "ignored")[IP_ADDRESS_ANNOTATION]
    node_ip = annotations_of(cluster.server, "nodes", None, NODE)[IP_ADDRESS_ANNOTATION]
    routes_become(cluster, ip, {(ip, node_ip, "src-ip")})
    assert nats(cluster, ip) == set()
    audit_clean(cluster.argv("--enable-eip-snat=false"))
    store.delete("pods", NS, "ignored")
    wait_for(lambda: not routes(cluster, ip), message="route removed")
