"""`run_check` end to end: the API server emulator plus a real NB ovsdb-server.

The cluster is written directly (emulator store, NB client) the way the controller's flows
would leave it; then damage is injected and the report must name it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.apiclient.errors import KubeUnavailableError
from controller.audit.check import EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNAVAILABLE, check, run_check
from controller.config import Config
from controller.core import router_policy as rp
from controller.ovn.api import PortSpec
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod_logic import build_ip_cr
from controller.process import main
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.ovn.ovsdb import NbServer
from controller.testing import builders
from controller.testing.fake_kube import FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from tests.fixtures.logging_state import preserved_logging

pytestmark = pytest.mark.timeout(60)

ROUTER = "ovn-cluster"
NODE_IP, NODE_MAC = "100.64.0.2", "00:00:00:00:01:01"


def subnet(name: str, cidr: str, gateway: str) -> dict[str, Any]:
    return builders.subnet(name, cidr, gateway=gateway, exclude_ips=[gateway])


def pod(name: str, ip: str, mac: str) -> dict[str, Any]:
    """A running pod on n1 that the controller allocated and routed in ovn-default."""
    return builders.pod(
        name,
        annotations={
            "ovn.kubernetes.io/allocated": "true",
            "ovn.kubernetes.io/routed": "true",
            "ovn.kubernetes.io/ip_address": ip,
            "ovn.kubernetes.io/mac_address": mac,
            "ovn.kubernetes.io/cidr": "10.16.0.0/16",
            "ovn.kubernetes.io/gateway": "10.16.0.1",
            "ovn.kubernetes.io/logical_switch": "ovn-default",
        },
        node="n1",
        containers=({"name": "c", "image": "pause"},),
        phase="Running",
    )


def ip_cr(name: str, ip: str, mac: str, subnet_name: str, namespace: str = "default") -> Any:
    return build_ip_cr(
        pod_name=name,
        ip=ip,
        mac=mac,
        subnet=subnet_name,
        namespace=namespace,
        node_name="n1",
        provider="ovn",
        pod_type="",
        node_switch="join",
    )


@pytest.fixture
def cluster(apiserver: ApiServer, nb_server: NbServer) -> Iterator[OvsdbappNbClient]:
    """A clean cluster: subnets, one node, two routed pods, all their IP CRs, LSPs, routes."""
    store = apiserver.store
    for resource in ("pods", "ips", "subnets", "nodes", "statefulsets"):
        for obj in store.list(resource):
            store.delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"])
    store.create("subnets", subnet("ovn-default", "10.16.0.0/16", "10.16.0.1"))
    store.create("subnets", subnet("join", "100.64.0.0/16", "100.64.0.1"))
    store.create(
        "nodes",
        {
            "metadata": {
                "name": "n1",
                "annotations": {
                    "ovn.kubernetes.io/allocated": "true",
                    "ovn.kubernetes.io/ip_address": NODE_IP,
                    "ovn.kubernetes.io/mac_address": NODE_MAC,
                    "ovn.kubernetes.io/logical_switch": "join",
                },
            }
        },
    )
    store.create("ips", ip_cr("n1", NODE_IP, NODE_MAC, "join", namespace=""))
    nb = OvsdbappNbClient.from_addr(nb_server.remote, timeout=5)
    nb.ensure_logical_router(ROUTER)
    nb.ensure_logical_switch("ovn-default", ROUTER, "10.16.0.0/16", "10.16.0.1", {})
    nb.ensure_logical_switch("join", ROUTER, "100.64.0.0/16", "100.64.0.1", {})
    nb.create_port(PortSpec("node-n1", "join", NODE_MAC, (NODE_IP,)))
    for i, name in enumerate(("a", "b"), start=2):
        ip, mac = f"10.16.0.{i}", f"00:00:00:00:00:0{i}"
        store.create("pods", pod(name, ip, mac))
        store.create("ips", ip_cr(name, ip, mac, "ovn-default"))
        nb.create_port(
            PortSpec(
                f"{name}.default",
                "ovn-default",
                mac,
                (ip,),
                ("10.16.0.0/16",),
                pod_name=name,
                pod_namespace="default",
            )
        )
        # what handleUpdatePod writes for a distributed-gateway pod on node n1
        aset = rp.set_name("ovn-default", "n1", 4)
        ids = rp.ids(rp.KIND_GATEWAY, 4, subnet="ovn-default", node="n1")
        nb.add_address_set_addresses(aset, [ip], ids)
        nb.add_router_policy(
            ROUTER, rp.GATEWAY_PRIORITY, rp.src_set_match(aset, 4), "reroute", [NODE_IP], ids
        )
    # a StatefulSet pod that is gone (being recreated) keeps its IP CR and port
    store.create(
        "statefulsets",
        {"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 1}},
    )
    kept = ip_cr("web-0", "10.16.0.9", "00:00:00:00:00:09", "ovn-default")
    kept["spec"]["podType"] = "StatefulSet"
    store.create("ips", kept)
    nb.create_port(
        PortSpec(
            "web-0.default",
            "ovn-default",
            "00:00:00:00:00:09",
            ("10.16.0.9",),
            pod_name="web-0",
            pod_namespace="default",
        )
    )
    try:
        yield nb
    finally:
        nb.close()


def config(apiserver: ApiServer, nb_server: NbServer, tmp: Path) -> Config:
    kubeconfig = apiserver.write_kubeconfig(tmp / "kubeconfig")
    return Config(
        command="check", kubeconfig=str(kubeconfig), ovn_nb_addr=nb_server.remote, ovn_timeout=5
    )


def test_clean_then_damaged(
    apiserver: ApiServer, nb_server: NbServer, cluster: OvsdbappNbClient, short_tmp: Path
) -> None:
    cfg = config(apiserver, nb_server, short_tmp)
    out = io.StringIO()
    assert run_check(cfg, out=out) == EXIT_CLEAN, out.getvalue()
    assert out.getvalue().startswith(
        "cluster audit: OK (checked 2 pods, 6 ports, 4 IP CRs, 0 routes, 1 router policies, "
        "0 NAT rules)"
    )

    # a pod deleted behind the controller's back leaves its port; a new pod gets a's address
    cluster.create_port(
        PortSpec(
            "gone.default",
            "ovn-default",
            "00:00:00:00:00:50",
            ("10.16.0.50",),
            pod_name="gone",
            pod_namespace="default",
        )
    )
    apiserver.store.create("pods", pod("c", "10.16.0.2", "00:00:00:00:00:04"))
    apiserver.store.create("ips", ip_cr("c", "10.16.0.2", "00:00:00:00:00:04", "ovn-default"))

    # ... and the StatefulSet is scaled to zero: its kept address must go
    apiserver.store.patch("statefulsets", "default", "web", {"spec": {"replicas": 0}})

    out = io.StringIO()
    assert run_check(cfg, out=out) == EXIT_FINDINGS
    report = out.getvalue()
    assert report.startswith("cluster audit: 6 finding(s), 0 pending")
    assert "orphan-ip-cr (1):\n  IP web-0.default: 10.16.0.9 in 'ovn-default'" in report
    assert (
        "duplicate-address (1):\n"
        "  10.16.0.2 in ovn-default: held by a.default [ip-cr, lsp, pod], c.default [ip-cr, pod]\n"
    ) in report
    assert "orphan-lsp (2):\n  port gone.default: kube-ovn port (default/gone, " in report
    assert "\n  port web-0.default: kube-ovn port (default/web-0, " in report
    assert "lsp-missing (1):\n  pod default/c: no logical switch port c.default\n" in report
    assert "ipam-disagrees (1):\n  pod default/" in report


def test_strict_flag_counts_pending_pods(
    apiserver: ApiServer,
    nb_server: NbServer,
    cluster: OvsdbappNbClient,
    short_tmp: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a scheduled pod the controller has not allocated yet: pending, not a finding
    apiserver.store.create(
        "pods",
        {
            "metadata": {"name": "new", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": "Pending"},
        },
    )
    argv = [
        "check",
        f"--kubeconfig={apiserver.write_kubeconfig(short_tmp / 'kubeconfig')}",
        f"--ovn-nb-addr={nb_server.remote}",
        "--ovn-timeout=5",
    ]
    with preserved_logging():  # main() installs its own root handler and levels
        assert main(argv) == EXIT_CLEAN
        assert "pod-not-allocated (1):" in capsys.readouterr().out
        assert main([*argv, "--strict"]) == EXIT_FINDINGS
        assert "pod-not-allocated (1):" in capsys.readouterr().out


def test_unreachable_api_server(nb_server: NbServer, short_tmp: Path) -> None:
    with ApiServer() as server:
        kubeconfig = server.write_kubeconfig(short_tmp / "kubeconfig")
    cfg = Config(kubeconfig=str(kubeconfig), ovn_nb_addr=nb_server.remote, ovn_timeout=5)
    out = io.StringIO()
    assert run_check(cfg, out=out) == EXIT_UNAVAILABLE
    assert out.getvalue().startswith("check: cannot read the Kubernetes API: ")


def test_unreachable_nb(apiserver: ApiServer, short_tmp: Path) -> None:
    kubeconfig = apiserver.write_kubeconfig(short_tmp / "kubeconfig")
    cfg = Config(
        kubeconfig=str(kubeconfig), ovn_nb_addr=f"unix:{short_tmp}/none.sock", ovn_timeout=1
    )
    out = io.StringIO()
    assert run_check(cfg, out=out) == EXIT_UNAVAILABLE
    assert out.getvalue().startswith("check: cannot connect to the OVN Northbound database: ")


def test_missing_kubeconfig(short_tmp: Path) -> None:
    cfg = Config(kubeconfig=str(short_tmp / "absent"), ovn_nb_addr="unix:/nonexistent")
    out = io.StringIO()
    assert run_check(cfg, out=out) == EXIT_UNAVAILABLE
    assert out.getvalue().startswith("check: cannot load Kubernetes config from ")


def test_check_over_fakes_strict_and_api_errors() -> None:
    kube, nb = FakeKubeApi(), FakeNbClient()
    kube.add_namespace({"metadata": {"name": "default"}})
    kube.add_pod({"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": "n1"}})
    out = io.StringIO()
    assert check(kube, nb, Config(), out=out) == EXIT_CLEAN  # only pending
    assert "pod-not-allocated (1):" in out.getvalue()
    assert check(kube, nb, Config(), out=io.StringIO(), strict=True) == EXIT_FINDINGS

    kube.fail_next("list_nodes", KubeUnavailableError(0, "ConnectionRefused", "refused"))
    out = io.StringIO()
    assert check(kube, nb, Config(), out=out) == EXIT_UNAVAILABLE
    assert "cannot read the Kubernetes API" in out.getvalue()


def test_malformed_objects_are_findings() -> None:
    kube, nb = FakeKubeApi(), FakeNbClient()
    kube.add_pod({"metadata": {"name": "p", "namespace": "default", "annotations": {"a": 1}}})
    out = io.StringIO()
    assert check(kube, nb, Config(), out=out) == EXIT_FINDINGS
    assert "malformed-object (1):\n  Pod 'p': field metadata.annotations" in out.getvalue()
