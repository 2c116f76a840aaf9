"""Pod scenarios end to end (address, port, IP CR and route; a same-name new pod; static
addresses and their errors; ip_pool; the inspection re-creating a lost port):
the real controller in-process, the API server emulator and a real NB ovsdb-server."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from controller.app import Controller
from controller.audit.check import EXIT_FINDINGS, run_check
from controller.config import parse_args
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION,
    GATEWAY_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    POD_NIC_ANNOTATION,
    ROUTED_ANNOTATION,
)
from tests.e2e.conftest import Cluster
from tests.e2e.egress import egress_routes
from tests.e2e.helpers import (
    NODE,
    annotations_of,
    audit_clean,
    get_or_none,
    http_get,
    pod,
    wait_for,
)
from tests.e2e.workloads import allocated, events

pytestmark = pytest.mark.e2e

NS = "default"


def test_pod_gets_address_port_and_ip_cr_then_route(ctl: Controller, cluster: Cluster) -> None:
    # allocation: annotations, LSP and IP CR
    cluster.server.store.create("pods", pod("web"))
    ann = allocated(cluster, "web")
    ip, mac = ann[IP_ADDRESS_ANNOTATION], ann[MAC_ADDRESS_ANNOTATION]
    assert ip.startswith("10.16.") and ip != "10.16.0.1"
    assert ann[CIDR_ANNOTATION] == "10.16.0.0/16"
    assert ann[GATEWAY_ANNOTATION] == "10.16.0.1"
    assert ann[LOGICAL_SWITCH_ANNOTATION] == "ovn-default"
    assert ann["ovn.kubernetes.io/network_type"] == "geneve"
    assert ann[POD_NIC_ANNOTATION] == "veth-pair"
    # The assertion reader is a second NB connection: its cache may trail the controller's
    # commit by a few milliseconds, so wait for the row rather than read it once.
    port = wait_for(lambda: cluster.nb.get_port(f"web.{NS}"), message="LSP visible to the reader")
    assert port.switch == "ovn-default"
    assert port.addresses == (f"{mac.lower()} {ip}",)
    assert port.external_ids["pod"] == f"{NS}/web"
    assert port.external_ids["vendor"] == "kube-ovn"
    cr = cluster.server.store.get("ips", None, f"web.{NS}")
    assert cr["metadata"]["labels"] == {
        "ovn.kubernetes.io/subnet": "ovn-default",
        "ovn-default": "",
    }
    assert cr["spec"]["ipAddress"] == ip and cr["spec"]["macAddress"] == mac
    assert ctl.ipam.get_ip_owner(ip, "ovn-default") == f"{NS}/web"

    # once scheduled, a src-ip route to the node's join address and routed=true
    node_ip = annotations_of(cluster.server, "nodes", None, NODE)[IP_ADDRESS_ANNOTATION]
    cluster.server.store.patch("pods", NS, "web", {"spec": {"nodeName": NODE}})
    wait_for(
        lambda: annotations_of(cluster.server, "pods", NS, "web").get(ROUTED_ANNOTATION) == "true",
        message="pod routed",
    )

    def routes() -> set[tuple[str, str, str]]:
        return egress_routes(cluster.nb)

    wait_for(lambda: (ip, node_ip, "src-ip") in routes(), message="src-ip route visible")

    # delete removes LSP, IP CR, route and the IPAM entry
    cluster.server.store.delete("pods", NS, "web")
    wait_for(lambda: cluster.nb.get_port(f"web.{NS}") is None, message="LSP deleted")
    wait_for(lambda: get_or_none(cluster.server, "ips", None, f"web.{NS}") is None, message="IP CR")
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/web") == [], message="IPAM released")
    wait_for(
        lambda: all(r[0] != ip for r in egress_routes(cluster.nb)),
        message="route removed",
    )

    # the metrics port serves the pod metrics
    text = http_get(f"http://127.0.0.1:{ctl.metrics_port}/metrics")[1]
    assert (
        'subnet_used_ip_count{protocol="IPv4",subnet_cidr="10.16.0.0/16",subnet_name="ovn-default"}'
        in text
    )
    adds = ctl.registry.get_sample_value("workqueue_adds_total", {"name": "AddPod"})
    assert adds is not None and adds >= 1
    assert 'workqueue_adds_total{name="DeletePod"}' in text
    assert (
        'ovs_client_request_latency_milliseconds_count{code="0",db="ovn-nb",method="create_port"}'
        in text
    )
    assert "rest_client_requests_total{" in text
    audit_clean(cluster.argv())


def test_same_name_new_pod_is_not_disturbed(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create("pods", pod("twin"))
    allocated(cluster, "twin")
    old_uid = store.get("pods", NS, "twin")["metadata"]["uid"]
    store.delete("pods", NS, "twin")
    store.create("pods", pod("twin"))
    assert store.get("pods", NS, "twin")["metadata"]["uid"] != old_uid
    ann = allocated(cluster, "twin")
    ip = ann[IP_ADDRESS_ANNOTATION]
    # the delete of the old object must not remove what the new one got
    wait_for(lambda: len(ctl.pod_queues.delete) == 0 and len(ctl.pod_queues.add) == 0)
    port = wait_for(lambda: cluster.nb.get_port(f"twin.{NS}"), message="new pod's LSP")
    assert ip in port.addresses[0]
    assert store.get("ips", None, f"twin.{NS}")["spec"]["ipAddress"] == ip
    assert ctl.ipam.get_ip_owner(ip, "ovn-default") == f"{NS}/twin"


def test_static_addresses_and_their_errors(
    ctl: Controller, cluster: Cluster, tmp_path: Path
) -> None:
    store = cluster.server.store
    store.create(
        "pods",
        pod(
            "fixed",
            annotations={
                IP_ADDRESS_ANNOTATION: "10.16.0.50",
                MAC_ADDRESS_ANNOTATION: "00:00:00:aa:bb:cc",
            },
        ),
    )
    ann = allocated(cluster, "fixed")
    assert ann[IP_ADDRESS_ANNOTATION] == "10.16.0.50"
    assert ann[MAC_ADDRESS_ANNOTATION].lower() == "00:00:00:aa:bb:cc"

    store.create("pods", pod("clash", annotations={IP_ADDRESS_ANNOTATION: "10.16.0.50"}))
    store.create("pods", pod("outside", annotations={IP_ADDRESS_ANNOTATION: "10.99.0.5"}))
    store.create("pods", pod("netaddr", annotations={IP_ADDRESS_ANNOTATION: "10.16.0.0"}))
    clash = wait_for(
        lambda: events(cluster, "clash", "AcquireAddressFailed"), message="conflict event"
    )
    assert "AddressConflict" in clash[0]["message"] or "conflict" in clash[0]["message"].lower()
    outside = wait_for(
        lambda: events(cluster, "outside", "AcquireAddressFailed"), message="range event"
    )
    assert "OutOfRange" in outside[0]["message"] or "out of range" in outside[0]["message"].lower()
    wait_for(
        lambda: events(cluster, "netaddr", "ValidatePodNetworkFailed"), message="validate event"
    )
    for name in ("clash", "outside", "netaddr"):
        assert ALLOCATED_ANNOTATION not in annotations_of(cluster.server, "pods", NS, name)
        assert cluster.nb.get_port(f"{name}.{NS}") is None
    # the refused pods are the audit's only findings, each with its Event's reason (read with
    # an admin's kubeconfig: the controller's ServiceAccount may not list Events)
    out = io.StringIO()
    admin = cluster.server.write_kubeconfig(tmp_path / "admin-kubeconfig")
    argv = ["check", *cluster.argv(), f"--kubeconfig={admin}"]
    config = parse_args(argv, {"KUBE_NAMESPACE": "kube-system"})
    assert run_check(config, out=out, strict=False) == EXIT_FINDINGS, out.getvalue()
    lines = out.getvalue().splitlines()
    assert [line for line in lines if not line.startswith("  ")][1:] == [
        "pod-refused (3):",
        "cluster audit: 3 finding(s), 0 pending",
    ], out.getvalue()
    assert [line.split(":")[:2] for line in lines if line.startswith("  ")] == [
        ["  pod default/clash", " AcquireAddressFailed"],
        ["  pod default/netaddr", " ValidatePodNetworkFailed"],
        ["  pod default/outside", " AcquireAddressFailed"],
    ], out.getvalue()


def test_ip_pool_skips_addresses_held_by_others(ctl: Controller, cluster: Cluster) -> None:
    # an ordinary (Deployment) pod gets the first pool address nobody else holds
    store = cluster.server.store
    pool = "10.16.0.60,10.16.0.61,10.16.0.62"
    store.create("pods", pod("holder", annotations={IP_ADDRESS_ANNOTATION: "10.16.0.60"}))
    allocated(cluster, "holder")
    store.create("pods", pod("pool-a", annotations={IP_POOL_ANNOTATION: pool}))
    assert allocated(cluster, "pool-a")[IP_ADDRESS_ANNOTATION] == "10.16.0.61"
    store.create("pods", pod("pool-b", annotations={IP_POOL_ANNOTATION: pool}))
    assert allocated(cluster, "pool-b")[IP_ADDRESS_ANNOTATION] == "10.16.0.62"
    audit_clean(cluster.argv())


def test_inspection_recreates_a_lost_port(ctl: Controller, cluster: Cluster) -> None:
    # the periodic inspection (--inspect-interval=1) puts a lost port back
    cluster.server.store.create("pods", pod("fragile"))
    ip = allocated(cluster, "fragile")[IP_ADDRESS_ANNOTATION]
    cluster.nb.delete_port(f"fragile.{NS}")
    port = wait_for(lambda: cluster.nb.get_port(f"fragile.{NS}"), message="LSP re-created")
    assert ip in port.addresses[0]
    assert allocated(cluster, "fragile")[IP_ADDRESS_ANNOTATION] == ip
