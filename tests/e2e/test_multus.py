"""Multus attachments end to end (kube-ovn pod.go
getPodAttachmentNet, handleAddPod, handleDeletePod): NADs come from
the informer cache; an OVN-type attachment gets provider `<nad>.<ns>.ovn`, its own LSP, its
annotations and IP CR; an IPAM-only attachment gets annotations and an IP CR but no LSP; the
default-network override replaces the `ovn` network; the same subnet twice and a malformed
selection annotation are Warning Events; a pod whose NAD appears later converges.
Inspection and gc cover attachment ports too."""

from __future__ import annotations

from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    ATTACHMENT_NETWORK_ANNOTATION,
    DEFAULT_NETWORK_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
)
from controller.ovn.api import PortSpec
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import HANDMADE_STS, NODE, annotations_of, get_or_none, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    delete_pod,
    gone,
    lsp,
    nad,
    no_lsp,
    pod,
    quiet,
    settled,
    start_graceful,
    statefulset,
    subnet,
    warning,
)

pytestmark = pytest.mark.e2e

OVN_NET = "attnet"
OVN_PROVIDER = f"{OVN_NET}.{NS}.ovn"
IPAM_NET = "macnet"
IPAM_PROVIDER = f"{IPAM_NET}.{NS}"
SOCKET = "/run/openvswitch/kube-ovn-daemon.sock"


def ovn_conf(provider: str = OVN_PROVIDER) -> dict[str, Any]:
    return {
        "cniVersion": "0.3.1",
        "type": "kube-ovn",
        "server_socket": SOCKET,
        "provider": provider,
    }


def ipam_conf(provider: str = IPAM_PROVIDER) -> dict[str, Any]:
    return {
        "cniVersion": "0.3.1",
        "type": "macvlan",
        "master": "eth0",
        "mode": "bridge",
        "ipam": {"type": "kube-ovn", "server_socket": SOCKET, "provider": provider},
    }


def key(provider: str, name: str) -> str:
    return f"{provider}.kubernetes.io/{name}"


@pytest.fixture
def ctl(cluster: Cluster, start_controller: StartController) -> Controller:
    return start_graceful(cluster, start_controller, "--gc-interval=0.3")


@pytest.fixture
def attach_subnets(ctl: Controller, cluster: Cluster) -> None:
    subnet(cluster, ctl, "att-sub", "172.30.0.0/24", provider=OVN_PROVIDER)
    subnet(cluster, ctl, "mac-sub", "172.31.0.0/24", provider=IPAM_PROVIDER)
    nad(cluster, OVN_NET, ovn_conf())
    nad(cluster, IPAM_NET, ipam_conf())


def nad_cached(ctl: Controller, name: str) -> bool:
    return ctl.informers["nads"].get_indexer().get_by_key(f"{NS}/{name}") is not None


def test_ovn_and_ipam_attachments_get_their_networks_and_lose_them_on_delete(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    store = cluster.server.store
    wait_for(lambda: nad_cached(ctl, OVN_NET) and nad_cached(ctl, IPAM_NET), message="NADs")
    store.create(
        "pods", pod("multi", annotations={ATTACHMENT_NETWORK_ANNOTATION: f"{OVN_NET},{IPAM_NET}"})
    )
    allocated(cluster, "multi", OVN_PROVIDER)
    ann = allocated(cluster, "multi", IPAM_PROVIDER)
    assert ann[IP_ADDRESS_ANNOTATION].startswith("10.16.")
    att_ip = ann[key(OVN_PROVIDER, "ip_address")]
    mac_ip = ann[key(IPAM_PROVIDER, "ip_address")]
    assert att_ip.startswith("172.30.0.") and mac_ip.startswith("172.31.0.")
    assert ann[key(OVN_PROVIDER, "logical_switch")] == "att-sub"
    assert ann[key(IPAM_PROVIDER, "logical_switch")] == "mac-sub"
    assert ann[key(OVN_PROVIDER, "cidr")] == "172.30.0.0/24"

    port = lsp(cluster, f"multi.{NS}.{OVN_PROVIDER}")
    assert port.switch == "att-sub"
    assert port.addresses[0].split()[1:] == [att_ip]
    lsp(cluster, f"multi.{NS}")
    assert cluster.nb.get_port(f"multi.{NS}.{IPAM_PROVIDER}") is None  # IPAM only: no LSP
    expected = ((OVN_PROVIDER, att_ip, "att-sub"), (IPAM_PROVIDER, mac_ip, "mac-sub"))
    for provider, ip, sub in expected:
        cr = store.get("ips", None, f"multi.{NS}.{provider}")
        assert cr["spec"]["ipAddress"] == ip and cr["spec"]["subnet"] == sub
    settled(cluster)

    delete_pod(cluster, "multi")
    for name in (f"multi.{NS}", f"multi.{NS}.{OVN_PROVIDER}"):
        no_lsp(cluster, name)
    for provider in ("", f".{OVN_PROVIDER}", f".{IPAM_PROVIDER}"):
        gone(cluster, "ips", f"multi.{NS}{provider}")
    quiet(ctl)
    assert not ctl.ipam.get_ip_owner(att_ip, "att-sub")
    assert not ctl.ipam.get_ip_owner(mac_ip, "mac-sub")
    settled(cluster)


def test_pod_created_before_its_nad_converges_once_the_nad_appears(
    ctl: Controller, cluster: Cluster
) -> None:
    subnet(cluster, ctl, "late-sub", "172.32.0.0/24", provider=f"late.{NS}.ovn")
    store = cluster.server.store
    store.create("pods", pod("early", annotations={ATTACHMENT_NETWORK_ANNOTATION: "late"}))
    # kube-ovn returns an error and retries: nothing is allocated without the NAD
    wait_for(
        lambda: ctl.registry.get_sample_value("workqueue_retries_total", {"name": "AddPod"}),
        message="the add is retried",
    )
    assert ALLOCATED_ANNOTATION not in annotations_of(cluster.server, "pods", NS, "early")
    nad(cluster, "late", ovn_conf(f"late.{NS}.ovn"))
    ann = allocated(cluster, "early", f"late.{NS}.ovn")
    assert ann[key(f"late.{NS}.ovn", "ip_address")].startswith("172.32.0.")
    assert ann[ALLOCATED_ANNOTATION] == "true"
    wait_for(lambda: cluster.nb.get_port(f"early.{NS}.late.{NS}.ovn"), message="attachment LSP")
    settled(cluster)


def test_default_network_override_replaces_the_ovn_network(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    store = cluster.server.store
    wait_for(lambda: nad_cached(ctl, OVN_NET), message="NAD cached")
    store.create("pods", pod("primary", annotations={DEFAULT_NETWORK_ANNOTATION: OVN_NET}))
    ann = allocated(cluster, "primary", OVN_PROVIDER)
    assert ann[key(OVN_PROVIDER, "ip_address")].startswith("172.30.0.")
    assert IP_ADDRESS_ANNOTATION not in ann  # no `ovn` network at all
    lsp(cluster, f"primary.{NS}.{OVN_PROVIDER}")
    assert cluster.nb.get_port(f"primary.{NS}") is None
    assert get_or_none(cluster.server, "ips", None, f"primary.{NS}") is None
    settled(cluster)
    delete_pod(cluster, "primary")
    wait_for(
        lambda: cluster.nb.get_port(f"primary.{NS}.{OVN_PROVIDER}") is None,
        message="attachment LSP deleted",
    )
    gone(cluster, "ips", f"primary.{NS}.{OVN_PROVIDER}")
    settled(cluster)


def test_scheduled_override_pod_is_not_requeued_for_routes(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    # only the `ovn` network is routed (handleUpdatePod): a pod without it has nothing to route,
    # and the inspection must not send it to the update queue (which refuses it) every pass
    wait_for(lambda: nad_cached(ctl, OVN_NET), message="NAD cached")
    cluster.server.store.create(
        "pods",
        pod("sched", annotations={DEFAULT_NETWORK_ANNOTATION: OVN_NET}, node_name=NODE),
    )
    allocated(cluster, "sched", OVN_PROVIDER)
    quiet(ctl)
    runs = inspections(ctl)
    wait_for(lambda: inspections(ctl) >= runs + 3, message="three inspection passes")
    reroutes = ctl.registry.get_sample_value(
        "kube_ovn_controller_pod_inspection_repairs_total", {"action": "reroute"}
    )
    assert not reroutes
    assert not ctl.registry.get_sample_value("workqueue_retries_total", {"name": "UpdatePod"})
    settled(cluster)


def inspections(ctl: Controller) -> float:
    value = ctl.registry.get_sample_value("kube_ovn_controller_pod_inspection_runs_total")
    return value or 0.0


def test_same_subnet_attached_twice_is_a_warning(ctl: Controller, cluster: Cluster) -> None:
    # an OVN attachment whose provider has no subnet falls back to the namespace's subnet,
    # which the default network already uses
    nad(cluster, "dup", ovn_conf(f"dup.{NS}.ovn"))
    wait_for(lambda: nad_cached(ctl, "dup"), message="NAD cached")
    cluster.server.store.create(
        "pods", pod("twice", annotations={ATTACHMENT_NETWORK_ANNOTATION: "dup"})
    )
    event = warning(cluster, "twice", "ValidatePodNetworkFailed")
    assert "subnet conflict" in event["message"]
    assert ALLOCATED_ANNOTATION not in annotations_of(cluster.server, "pods", NS, "twice")
    assert cluster.nb.get_port(f"twice.{NS}") is None


MALFORMED = (
    '[{"name": "attnet"',  # truncated JSON
    '[{"namespace": "default"}]',  # no name
    "a/b/c",  # too many slashes
    "Bad_Name",  # not a DNS-1123 label
)


def test_malformed_networks_annotation_is_a_warning(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    for i, value in enumerate(MALFORMED):
        store.create("pods", pod(f"broken-{i}", annotations={ATTACHMENT_NETWORK_ANNOTATION: value}))
    for i, value in enumerate(MALFORMED):
        event = warning(cluster, f"broken-{i}", "ValidatePodNetworkFailed")
        assert ATTACHMENT_NETWORK_ANNOTATION in event["message"], (value, event["message"])
        assert ALLOCATED_ANNOTATION not in annotations_of(cluster.server, "pods", NS, f"broken-{i}")
    # fixing the annotation brings a pod back
    for i in range(len(MALFORMED)):
        store.patch(
            "pods",
            NS,
            f"broken-{i}",
            {"metadata": {"annotations": {ATTACHMENT_NETWORK_ANNOTATION: None}}},
        )
    for i in range(len(MALFORMED)):
        allocated(cluster, f"broken-{i}")
    settled(cluster)


def test_inspection_and_gc_repair_attachment_ports(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    store = cluster.server.store
    wait_for(lambda: nad_cached(ctl, OVN_NET), message="NAD cached")
    store.create("pods", pod("fix", annotations={ATTACHMENT_NETWORK_ANNOTATION: OVN_NET}))
    att_ip = allocated(cluster, "fix", OVN_PROVIDER)[key(OVN_PROVIDER, "ip_address")]
    port_name = f"fix.{NS}.{OVN_PROVIDER}"
    # inspection (--inspect-interval=1) re-creates a lost attachment port with the same address
    cluster.nb.delete_port(port_name)
    port = wait_for(lambda: cluster.nb.get_port(port_name), message="attachment LSP re-created")
    assert port.addresses[0].split()[1:] == [att_ip]
    assert allocated(cluster, "fix", OVN_PROVIDER)[key(OVN_PROVIDER, "ip_address")] == att_ip
    # gc collects an orphan attachment port whose pod is gone
    orphan = f"gone.{NS}.{OVN_PROVIDER}"
    cluster.nb.create_port(
        PortSpec(
            name=orphan,
            switch="att-sub",
            mac="00:00:00:11:22:33",
            ips=("172.30.0.200",),
            pod_name="gone",
            pod_namespace=NS,
        )
    )
    wait_for(lambda: cluster.nb.get_port(orphan) is None, message="orphan attachment port gc'd")
    assert cluster.nb.get_port(port_name) is not None
    settled(cluster)


@pytest.mark.emulator_only(HANDMADE_STS)
def test_statefulset_pod_keeps_its_attachment_addresses(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    store = cluster.server.store
    wait_for(lambda: nad_cached(ctl, OVN_NET) and nad_cached(ctl, IPAM_NET), message="NADs")
    owner = statefulset(cluster, "ms", 1)
    nets = {ATTACHMENT_NETWORK_ANNOTATION: f"{OVN_NET},{IPAM_NET}"}
    providers = ("ovn", OVN_PROVIDER, IPAM_PROVIDER)

    def addresses() -> dict[str, str]:
        ann = allocated(cluster, "ms-0", IPAM_PROVIDER)
        return {p: ann[key(p, "ip_address")] for p in providers}

    store.create("pods", pod("ms-0", owner=owner, annotations=nets))
    before = addresses()
    delete_pod(cluster, "ms-0")
    quiet(ctl)
    for suffix in ("", f".{OVN_PROVIDER}", f".{IPAM_PROVIDER}"):
        assert get_or_none(cluster.server, "ips", None, f"ms-0.{NS}{suffix}") is not None
    lsp(cluster, f"ms-0.{NS}.{OVN_PROVIDER}")
    settled(cluster)
    store.create("pods", pod("filler", annotations=nets))
    allocated(cluster, "filler", IPAM_PROVIDER)
    store.create("pods", pod("ms-0", owner=owner, annotations=nets))
    assert addresses() == before
    settled(cluster)

    store.patch("statefulsets", NS, "ms", {"spec": {"replicas": 0}})
    wait_for(
        lambda: (
            (ctl.informers["statefulsets"].get_indexer().get_by_key(f"{NS}/ms") or {})["spec"][
                "replicas"
            ]
            == 0
        ),
        message="scale-down seen",
    )
    delete_pod(cluster, "ms-0")
    for suffix in ("", f".{OVN_PROVIDER}", f".{IPAM_PROVIDER}"):
        gone(cluster, "ips", f"ms-0.{NS}{suffix}")
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/ms-0") == [], message="released")
    no_lsp(cluster, f"ms-0.{NS}.{OVN_PROVIDER}")
    settled(cluster)


def test_json_selection_with_a_static_attachment_address(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    wait_for(lambda: nad_cached(ctl, OVN_NET), message="NAD cached")
    selection = f'[{{"name": "{OVN_NET}", "namespace": "{NS}", "interface": "net1"}}]'
    cluster.server.store.create(
        "pods",
        pod(
            "static",
            annotations={
                ATTACHMENT_NETWORK_ANNOTATION: selection,
                key(OVN_PROVIDER, "ip_address"): "172.30.0.50",
                key(OVN_PROVIDER, "mac_address"): "00:00:00:0a:0b:0c",
            },
        ),
    )
    ann = allocated(cluster, "static", OVN_PROVIDER)
    assert ann[key(OVN_PROVIDER, "ip_address")] == "172.30.0.50"
    port = wait_for(lambda: cluster.nb.get_port(f"static.{NS}.{OVN_PROVIDER}"), message="LSP")
    assert port.addresses == ("00:00:00:0a:0b:0c 172.30.0.50",)
    assert ctl.ipam.get_ip_owner("172.30.0.50", "att-sub") == f"{NS}/static"
    settled(cluster)


def test_pod_outliving_its_nad_is_still_cleaned_up(
    ctl: Controller, cluster: Cluster, attach_subnets: None
) -> None:
    store = cluster.server.store
    wait_for(lambda: nad_cached(ctl, OVN_NET) and nad_cached(ctl, IPAM_NET), message="NADs")
    store.create(
        "pods",
        pod(
            "orphaned",
            annotations={ATTACHMENT_NETWORK_ANNOTATION: f"{OVN_NET},{IPAM_NET}"},
            node_name=NODE,
        ),
    )
    ann = allocated(cluster, "orphaned", IPAM_PROVIDER)
    wait_for(
        lambda: annotations_of(cluster.server, "pods", NS, "orphaned").get(
            "ovn.kubernetes.io/routed"
        ),
        message="routed",
    )
    store.delete("network-attachment-definitions", NS, OVN_NET)
    store.delete("network-attachment-definitions", NS, IPAM_NET)
    wait_for(lambda: not nad_cached(ctl, OVN_NET) and not nad_cached(ctl, IPAM_NET), message="gone")
    delete_pod(cluster, "orphaned")
    for suffix in ("", f".{OVN_PROVIDER}", f".{IPAM_PROVIDER}"):
        gone(cluster, "ips", f"orphaned.{NS}{suffix}")
    no_lsp(cluster, f"orphaned.{NS}.{OVN_PROVIDER}")
    no_lsp(cluster, f"orphaned.{NS}")
    quiet(ctl)
    assert not ctl.ipam.get_ip_owner(ann[key(IPAM_PROVIDER, "ip_address")], "mac-sub")
    settled(cluster)
