"""Dual stack end to end (addresses, routes, port security and
address sets of a pod on dual-stack subnets).

The default and join subnets are dual stack (--default-cidr / --node-switch-cidr "v4,v6").
"""

from __future__ import annotations

import pytest

from controller.app import Controller
from controller.core.constants import (
    CIDR_ANNOTATION,
    GATEWAY_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    PORT_SECURITY_ANNOTATION,
)
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.egress import egress_routes
from tests.e2e.helpers import NODE, annotations_of, audit_clean, pod, running, wait_for
from tests.e2e.nbrows import nb_row, nb_rows
from tests.e2e.workloads import routed

pytestmark = pytest.mark.e2e

NS = "default"
DUAL_FLAGS = (
    "--default-cidr=10.16.0.0/16,fd00:10:16::/64",
    "--node-switch-cidr=100.64.0.0/16,fd00:100:64::/64",
)


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    controller = running(start_controller(*DUAL_FLAGS))
    return controller


def src_routes(cluster: Cluster) -> set[tuple[str, str]]:
    return {(ip, hop) for ip, hop, _ in egress_routes(cluster.nb)}


def test_dual_stack_pod_port_routes_and_cleanup(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create(
        "pods",
        pod(
            "duo",
            node_name=NODE,
            annotations={
                PORT_SECURITY_ANNOTATION: "true",
                "ovn.kubernetes.io/security_groups": "dual-sg",
            },
        ),
    )
    ann = routed(cluster, "duo")
    v4, v6 = ann[IP_ADDRESS_ANNOTATION].split(",")
    assert v4.startswith("10.16.") and v6.startswith("fd00:10:16::")
    assert ann[CIDR_ANNOTATION] == "10.16.0.0/16,fd00:10:16::/64"
    assert ann[GATEWAY_ANNOTATION] == "10.16.0.1,fd00:10:16::1"
    mac = ann[MAC_ADDRESS_ANNOTATION].lower()

    port = nb_row(cluster.nb_server.remote, "Logical_Switch_Port", f"duo.{NS}")
    assert port is not None
    assert port["addresses"] == [f"{mac} {v4} {v6}"]
    assert port["port_security"] == [f"{mac} {v4}/16 {v6}/64"]  # masked, as kube-ovn
    assert port["external_ids"]["security_groups"] == "dual-sg"
    assert port["external_ids"]["associated_sg_dual-sg"] == "true"
    sg = nb_row(cluster.nb_server.remote, "Port_Group", "ovn.sg.dual.sg")
    assert sg is not None and sg["ports"] == [f"duo.{NS}"]
    v4_set = nb_row(cluster.nb_server.remote, "Address_Set", "ovn.sg.dual.sg.associated.v4")
    v6_set = nb_row(cluster.nb_server.remote, "Address_Set", "ovn.sg.dual.sg.associated.v6")
    assert v4_set is not None and v4_set["addresses"] == [v4]
    assert v6_set is not None and v6_set["addresses"] == [v6]
    deny = nb_row(cluster.nb_server.remote, "Port_Group", "ovn.sg.kubeovn_deny_all")
    assert deny is not None and f"duo.{NS}" in deny["ports"]

    cr = store.get("ips", None, f"duo.{NS}")
    assert cr["spec"]["v4IpAddress"] == v4 and cr["spec"]["v6IpAddress"] == v6

    # one src-ip route per family, each to the node's join address of that family
    node_v4, node_v6 = annotations_of(cluster.server, "nodes", None, NODE)[
        IP_ADDRESS_ANNOTATION
    ].split(",")
    assert node_v4.startswith("100.64.") and node_v6.startswith("fd00:100:64::")
    assert {(v4, node_v4), (v6, node_v6)} <= src_routes(cluster)
    assert [r for r in src_routes(cluster) if r[0] in (v4, v6)] != []
    assert len([r for r in src_routes(cluster) if r[0] in (v4, v6)]) == 2
    audit_clean(cluster.argv(*DUAL_FLAGS))

    store.delete("pods", NS, "duo")
    wait_for(
        lambda: not [r for r in src_routes(cluster) if r[0] in (v4, v6)],
        message="both routes removed",
    )
    wait_for(
        lambda: nb_row(cluster.nb_server.remote, "Logical_Switch_Port", f"duo.{NS}") is None,
        message="port removed",
    )
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/duo") == [], message="IPAM released")
    v6_set = nb_row(cluster.nb_server.remote, "Address_Set", "ovn.sg.dual.sg.associated.v6")
    assert v6_set is not None and v6_set["addresses"] == []
    audit_clean(cluster.argv(*DUAL_FLAGS))


def test_dual_stack_eip_snat_pairs_by_family(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create(
        "configmaps",
        {
            "metadata": {"name": "ovn-external-gw-config", "namespace": "kube-system"},
            "data": {"external-gw-addr": "172.56.0.1/16,fd00:56::1/64"},
        },
    )
    store.create(
        "pods",
        pod(
            "exposed",
            node_name=NODE,
            annotations={
                "ovn.kubernetes.io/eip": "172.56.0.50",
                "ovn.kubernetes.io/snat": "fd00:56::60",
            },
        ),
    )
    v4, v6 = routed(cluster, "exposed")[IP_ADDRESS_ANNOTATION].split(",")
    nat = {
        (n["type"], n["logical_ip"], n["external_ip"])
        for n in nb_rows(cluster.nb_server.remote, "NAT")
    }
    # an external address translates the pod address of its own family only
    assert nat == {("dnat_and_snat", v4, "172.56.0.50"), ("snat", v6, "fd00:56::60")}
    assert {(v4, "172.56.0.1"), (v6, "fd00:56::1")} <= src_routes(cluster)
    audit_clean(cluster.argv(*DUAL_FLAGS))
    store.delete("pods", NS, "exposed")
    wait_for(lambda: not nb_rows(cluster.nb_server.remote, "NAT"), message="NAT removed")
    wait_for(
        lambda: not [r for r in src_routes(cluster) if r[0] in (v4, v6)], message="routes gone"
    )
    audit_clean(cluster.argv(*DUAL_FLAGS))
