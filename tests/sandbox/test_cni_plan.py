"""The CNI stand-in's reading of the controller's annotations (pure; no data plane needed)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.ovn.cni import NicPlan, _ip_batch, node_route_cidrs, plan_node, plan_pod
from controller.sandbox.ovn.cni_plan import ip_cr_on_node
from controller.testing import builders

MAC = "00:00:00:AB:CD:EF"


def _pod(ann: dict[str, str], name: str = "web", ns: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": "u1", "annotations": ann}}


def _net(provider: str, ip: str, cidr: str, gw: str, *, routed: bool = True) -> dict[str, str]:
    return builders.allocated(
        ip, MAC, "sw", provider=provider, cidr=cidr, gateway=gw, routed=routed and provider == "ovn"
    )


def test_default_network_is_eth0_with_prefix_lengths_and_default_routes() -> None:
    plans = plan_pod(
        _pod(_net("ovn", "10.16.0.5,fd00::5", "10.16.0.0/16,fd00::/64", "10.16.0.1,fd00::1"))
    )
    assert plans == [
        NicPlan(
            provider="ovn",
            port="web.default",
            ifname="eth0",
            mac=MAC.lower(),
            addresses=("10.16.0.5/16", "fd00::5/64"),
            gateways=("10.16.0.1", "fd00::1"),
            default_route=True,
        )
    ]
    batch = _ip_batch(plans[0])
    assert "addr replace fd00::5/64 dev eth0 nodad" in batch
    assert "route replace 0.0.0.0/0 via 10.16.0.1 dev eth0" in batch
    assert "route replace ::/0 via fd00::1 dev eth0" in batch


def test_not_allocated_or_not_routed_is_refused() -> None:
    with pytest.raises(WiringError, match="not allocated"):
        plan_pod(_pod({}))
    with pytest.raises(WiringError, match="not routed"):
        plan_pod(_pod(_net("ovn", "10.16.0.5", "10.16.0.0/16", "10.16.0.1", routed=False)))


@pytest.mark.parametrize(
    ("ip", "cidr", "gw", "message"),
    [
        ("10.17.0.5", "10.16.0.0/16", "10.16.0.1", "not in"),
        ("10.16.0.5,fd00::5", "10.16.0.0/16", "10.16.0.1", "does not match"),
        ("bogus", "10.16.0.0/16", "10.16.0.1", "does not appear"),
        ("10.16.0.5", "10.16.0.0/16", "nope", "invalid gateway"),
        ("10.16.0.5,fd00::5", "10.16.0.0/16,fd00::/64", "10.16.0.1", "gateway"),
    ],
)
def test_bad_annotations_are_a_clear_error(ip: str, cidr: str, gw: str, message: str) -> None:
    with pytest.raises(WiringError, match=message):
        plan_pod(_pod(_net("ovn", ip, cidr, gw)))


def test_bad_mac_is_a_clear_error() -> None:
    ann = _net("ovn", "10.16.0.5", "10.16.0.0/16", "10.16.0.1")
    ann["ovn.kubernetes.io/mac_address"] = "zz"
    with pytest.raises(WiringError, match="invalid mac_address"):
        plan_pod(_pod(ann))


def test_ovn_attachment_is_net1_without_default_route_and_ipam_only_is_skipped() -> None:
    ann = {
        **_net("ovn", "10.16.0.5", "10.16.0.0/16", "10.16.0.1"),
        **_net("att.default.ovn", "172.30.0.5", "172.30.0.0/24", "172.30.0.1"),
        **_net("mac.default", "192.168.0.5", "192.168.0.0/24", "192.168.0.1"),
        "k8s.v1.cni.cncf.io/networks": "default/att,mac@macnet",
    }
    plans = plan_pod(_pod(ann))
    assert [(p.ifname, p.port, p.default_route) for p in plans] == [
        ("eth0", "web.default", True),
        ("net1", "web.default.att.default.ovn", False),
    ]
    assert plans[1].addresses == ("172.30.0.5/24",)


def test_virtual_machine_pod_uses_the_vm_name_as_port() -> None:
    ann = {
        **_net("ovn", "10.16.0.5", "10.16.0.0/16", "10.16.0.1"),
        "ovn.kubernetes.io/virtualmachine": "vm1",
    }
    assert plan_pod(_pod(ann, name="virt-launcher-vm1-abcde"))[0].port == "vm1.default"


def test_malformed_network_selection_is_a_clear_error() -> None:
    ann = {
        **_net("ovn", "10.16.0.5", "10.16.0.0/16", "10.16.0.1"),
        "k8s.v1.cni.cncf.io/networks": "[{",
    }
    with pytest.raises(WiringError, match="JSON"):
        plan_pod(_pod(ann))


def test_node_plan_is_ovn0_on_the_join_address() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "annotations": {
                "ovn.kubernetes.io/ip_address": "100.64.0.2",
                "ovn.kubernetes.io/mac_address": MAC,
                "ovn.kubernetes.io/cidr": "100.64.0.0/16",
                "ovn.kubernetes.io/gateway": "100.64.0.1",
                "ovn.kubernetes.io/port_name": "node-n1",
            },
        }
    }
    plan = plan_node(node)
    assert (plan.port, plan.ifname, plan.addresses, plan.gateways) == (
        "node-n1",
        "ovn0",
        ("100.64.0.2/16",),
        ("100.64.0.1",),
    )
    with pytest.raises(WiringError, match="no join address"):
        plan_node({"metadata": {"name": "n2"}})


def _subnet(name: str, cidr: str, ready: str | None, **spec: Any) -> dict[str, Any]:
    status = {"conditions": [{"type": "Ready", "status": ready}]} if ready else {}
    return {"metadata": {"name": name}, "spec": {"cidrBlock": cidr, **spec}, "status": status}


def test_node_routes_follow_the_daemons_rule() -> None:
    # kube-ovn v1.8.18 pkg/daemon/controller.go: default VPC, no VLAN, Ready=True
    subnets = [
        _subnet("ovn-default", "10.16.0.0/16,fd00:10:16::/64", "True", vpc="ovn-cluster"),
        _subnet("c", "10.40.0.5/24", "True", vpc="ovn-cluster"),
        _subnet("notready", "10.41.0.0/24", "False", vpc="ovn-cluster"),
        _subnet("unknown", "10.42.0.0/24", "Unknown", vpc="ovn-cluster"),
        _subnet("fresh", "10.43.0.0/24", None, vpc="ovn-cluster"),
        _subnet("vlan", "10.44.0.0/24", "True", vpc="ovn-cluster", vlan="v1"),
        _subnet("custom-vpc", "10.45.0.0/24", "True", vpc="vpc1"),
        _subnet("unformatted", "10.46.0.0/24", "True"),
    ]
    assert node_route_cidrs(subnets) == ["10.16.0.0/16", "fd00:10:16::/64", "10.40.0.0/24"]


def test_a_node_has_no_default_route_on_ovn0() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "annotations": {
                "ovn.kubernetes.io/ip_address": "100.64.0.2",
                "ovn.kubernetes.io/mac_address": "00:00:00:12:34:56",
                "ovn.kubernetes.io/cidr": "100.64.0.0/16",
                "ovn.kubernetes.io/gateway": "100.64.0.1",
            },
        }
    }
    assert "route" not in _ip_batch(plan_node(node))


def test_the_ip_cr_as_the_daemon_writes_it_back() -> None:
    # as kube-ovn v1.8.18's controller may leave it: no node yet (allocated before scheduling),
    # leftover attachments, only the subnet-name label; plus a field and a label of someone else
    cr: dict[str, Any] = {
        "apiVersion": "kubeovn.io/v1",
        "kind": "IP",
        "metadata": {
            "name": "web.default",
            "resourceVersion": "7",
            "labels": {"ovn.kubernetes.io/subnet": "sw", "team": "a"},
        },
        "spec": {
            "podName": "web",
            "namespace": "default",
            "subnet": "sw",
            "nodeName": "",
            "ipAddress": "10.16.0.5",
            "attachIps": ["10.17.0.2"],
            "attachSubnets": ["other"],
            "attachMacs": ["00:00:00:00:00:02"],
            "containerID": "c1",
        },
    }
    before = repr(cr)
    body = ip_cr_on_node(cr, "node1", "sw")
    assert repr(cr) == before  # the cached object is not touched
    assert body["metadata"] == {
        "name": "web.default",
        "resourceVersion": "7",  # the PUT is refused if someone wrote the CR since
        "labels": {"ovn.kubernetes.io/subnet": "sw", "team": "a", "sw": ""},
    }
    assert body["spec"] == {
        **cr["spec"],
        "nodeName": "node1",
        "attachIps": [],
        "attachSubnets": [],
        "attachMacs": [],
    }
    # a CR without labels gets the map the daemon needs (kube-ovn's daemon would panic)
    bare = ip_cr_on_node({"metadata": {"name": "x"}, "spec": {}}, "node2", "sw")
    assert bare["metadata"]["labels"] == {"sw": ""} and bare["spec"]["nodeName"] == "node2"
