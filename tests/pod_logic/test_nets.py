"""pod_logic: subnets, nets, validators, address plans, annotations, IP CRs (kube-ovn
v1.8.18 pkg/controller/pod.go getPodKubeovnNets to handleUpdatePod)."""

from __future__ import annotations

from typing import Any

import pytest

from controller import pod_logic as pl
from controller.core import router_policy as rp
from controller.core.errors import InvalidPodNetworkError, ResourceNotReadyError, RetryableError
from controller.core.model import (
    Namespace,
    NetworkAttachmentDefinition,
    Node,
    Pod,
    PodNet,
    ProviderType,
    Subnet,
    Vlan,
)
from controller.ovn.api import NatChange, PortSpec
from controller.pod_logic import AddressMode
from controller.pod_logic import routing_state as rs
from controller.testing.builders import MACVLAN_CONF, NOW, OVN_CONF, OVN_CONFLIST
from controller.testing.models import nad, namespace, node, pod, sts_pod, subnet

DEFAULT = subnet("ovn-default", "10.16.0.0/16")
FULL = subnet("full", "10.17.0.0/16", v4_available=0)
FULL6 = subnet("full6", "fd00:17::/64", v6_available=0)
ROOMY6 = subnet("roomy6", "fd00:18::/64", v4_available=0)
S2 = subnet("s2", "10.18.0.0/16")
ATTACH = subnet("attach", "172.18.0.0/16", provider="net1.ns1.ovn")
IPAM_ONLY = subnet("macvlan-sub", "172.19.0.0/16", provider="mv.ns1")
ALL = [DEFAULT, FULL, FULL6, ROOMY6, S2, ATTACH, IPAM_ONLY]
BY_NAME = {s.name: s for s in ALL}
NADS = {
    ("ns1", "net1"): nad("net1", "ns1", OVN_CONF),
    ("ns1", "net2"): nad("net2", "ns1", OVN_CONFLIST),
    ("ns1", "mv"): nad("mv", "ns1", MACVLAN_CONF),
    ("ns1", "mv2"): nad("mv2", "ns1", MACVLAN_CONF),
    ("ns1", "broken"): nad("broken", "ns1", "{not json"),
}


def ns1_pod(annotations: dict[str, str] | None = None, **kw: Any) -> Pod:
    return pod("p", "ns1", annotations=annotations, **kw)


# --- default subnet --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ns_ls", "expected"),
    [
        ("ovn-default", "ovn-default"),
        ("full,ovn-default", "ovn-default"),  # skip exhausted subnets
        ("full,full6", "full6"),  # all full: the last one
        ("full6,roomy6,s2", "roomy6"),  # v6 subnets look at v6 availability
        ("s2,ovn-default", "s2"),
    ],
)
def test_default_subnet_from_namespace(ns_ls: str, expected: str) -> None:
    got = pl.get_pod_default_subnet(ns1_pod(), namespace("ns1", ns_ls), BY_NAME)
    assert got.name == expected


def test_default_subnet_from_pod_annotation_wins() -> None:
    p = ns1_pod({"ovn.kubernetes.io/logical_switch": "s2"})
    assert pl.get_pod_default_subnet(p, None, BY_NAME).name == "s2"


@pytest.mark.parametrize(
    ("the_pod", "ns", "message"),
    [
        (ns1_pod({"ovn.kubernetes.io/logical_switch": "nope"}), None, "subnet 'nope'"),
        (ns1_pod({"ovn.kubernetes.io/logical_switch": ""}), None, "subnet ''"),
        (ns1_pod(), None, "namespace ns1 not found"),
        (ns1_pod(), namespace("ns1", None), "namespace ns1 network annotations is nil"),
        (ns1_pod(), namespace("ns1", ""), "default logical switch is not found"),
        # an empty element only matters once reached: the full subnet is skipped first
        (ns1_pod(), namespace("ns1", "full,"), "default logical switch is not found"),
        (ns1_pod(), namespace("ns1", "ghost"), "subnet 'ghost' of namespace ns1 not found"),
    ],
)
def test_default_subnet_errors(the_pod: Pod, ns: Namespace | None, message: str) -> None:
    with pytest.raises(ResourceNotReadyError) as info:
        pl.get_pod_default_subnet(the_pod, ns, BY_NAME)
    assert message in str(info.value)


def test_ns_available_subnets() -> None:
    nets = pl.get_ns_available_subnets(namespace("ns1", "s2,,attach"), BY_NAME)
    assert [(n.subnet.name, n.provider_name, n.type) for n in nets] == [
        ("s2", "ovn", ProviderType.ORIGINAL),
        ("attach", "net1.ns1.ovn", ProviderType.ORIGINAL),
    ]
    assert pl.get_ns_available_subnets(namespace("ns1", None), BY_NAME) == []
    with pytest.raises(ResourceNotReadyError):
        pl.get_ns_available_subnets(None, BY_NAME)
    with pytest.raises(ResourceNotReadyError, match="ghost"):
        pl.get_ns_available_subnets(namespace("ns1", "ghost"), BY_NAME)


# --- attachments and pod nets ----------------------------------------------------------------

NS1 = namespace("ns1", "ovn-default")


def nets_of(annotations: dict[str, str]) -> list[tuple[str, str, ProviderType, bool]]:
    nets = pl.get_pod_kubeovn_nets(ns1_pod(annotations), NS1, ALL, NADS)
    return [(n.provider_name, n.subnet.name, n.type, n.is_default) for n in nets]


def test_plain_pod_has_the_default_net() -> None:
    assert nets_of({}) == [("ovn", "ovn-default", ProviderType.ORIGINAL, True)]


def test_ovn_attachment_uses_the_provider_subnet() -> None:
    assert nets_of({"k8s.v1.cni.cncf.io/networks": "net1"}) == [
        ("net1.ns1.ovn", "attach", ProviderType.ORIGINAL, False),
        ("ovn", "ovn-default", ProviderType.ORIGINAL, True),
    ]


def test_ovn_attachment_subnet_from_pod_annotation() -> None:
    got = nets_of(
        {
            "k8s.v1.cni.cncf.io/networks": "ns1/net1@eth1",
            "net1.ns1.ovn.kubernetes.io/logical_switch": "s2",
        }
    )
    assert got[0] == ("net1.ns1.ovn", "s2", ProviderType.ORIGINAL, False)


def test_ovn_conflist_attachment_without_provider_subnet_conflicts_with_default() -> None:
    # net2 has no subnet of its provider -> the pod default subnet -> the same subnet twice
    with pytest.raises(RetryableError, match="subnet conflict") as info:
        nets_of({"k8s.v1.cni.cncf.io/networks": "net2"})
    assert not isinstance(info.value, InvalidPodNetworkError)
    assert info.value.reason == "ValidatePodNetworkFailed"  # a Warning Event on the pod


def test_ipam_only_attachment() -> None:
    assert nets_of({"k8s.v1.cni.cncf.io/networks": "mv,mv2"}) == [
        ("mv.ns1", "macvlan-sub", ProviderType.IPAM, False),  # mv2 has no subnet: skipped
        ("ovn", "ovn-default", ProviderType.ORIGINAL, True),
    ]


def test_multus_default_network_replaces_the_ovn_default() -> None:
    got = nets_of({"v1.multus-cni.io/default-network": "ns1/net1"})
    assert got == [("net1.ns1.ovn", "attach", ProviderType.ORIGINAL, True)]
    assert (
        pl.default_ovn_net(
            pl.get_pod_kubeovn_nets(
                ns1_pod({"v1.multus-cni.io/default-network": "ns1/net1"}), NS1, ALL, NADS
            )
        )
        is None
    )


def test_attachment_requests_lists_default_network_first() -> None:
    p = ns1_pod({"k8s.v1.cni.cncf.io/networks": "mv", "v1.multus-cni.io/default-network": "net1"})
    assert [(s.namespace, s.name) for s in pl.pod_attachment_requests(p)] == [
        ("ns1", "net1"),
        ("ns1", "mv"),
    ]


def test_attachment_errors() -> None:
    with pytest.raises(ResourceNotReadyError, match="ns1/ghost not found"):
        nets_of({"k8s.v1.cni.cncf.io/networks": "ghost"})
    with pytest.raises(RetryableError, match="failed to load config of net-attach-def ns1/broken"):
        nets_of({"k8s.v1.cni.cncf.io/networks": "broken"})
    with pytest.raises(InvalidPodNetworkError, match="failed at '/'"):
        nets_of({"k8s.v1.cni.cncf.io/networks": "a/b/c"})
    with pytest.raises(ResourceNotReadyError, match="subnet 'gone'"):
        nets_of(
            {
                "k8s.v1.cni.cncf.io/networks": "net1",
                "net1.ns1.ovn.kubernetes.io/logical_switch": "gone",
            }
        )


def test_attachment_default_subnet_comes_from_namespace() -> None:
    # no subnet has provider net2.ns1.ovn, and the namespace points elsewhere
    nads = {("ns1", "net2"): NetworkAttachmentDefinition("ns1", "net2", OVN_CONF)}
    nets = pl.get_pod_attachment_nets(
        ns1_pod({"k8s.v1.cni.cncf.io/networks": "net2"}), nads, ALL, namespace("ns1", "s2")
    )
    assert [(n.provider_name, n.subnet.name) for n in nets] == [("net2.ns1.ovn", "s2")]


def test_need_allocate_subnets() -> None:
    nets = [
        PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True),
        PodNet(ProviderType.ORIGINAL, "net1.ns1.ovn", ATTACH),
    ]
    assert pl.need_allocate_subnets(ns1_pod(), nets) == nets
    half = ns1_pod({"ovn.kubernetes.io/allocated": "true"})
    assert pl.need_allocate_subnets(half, nets) == nets[1:]
    assert pl.need_allocate_subnets(ns1_pod(phase="Succeeded"), nets) == []
    assert pl.need_allocate_subnets(ns1_pod(phase="Failed"), nets) == []


# --- validators ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotations",
    [
        {},
        {"ovn.kubernetes.io/ip_address": "10.16.0.5"},
        {"ovn.kubernetes.io/ip_address": "10.16.0.5,fd00::5"},
        {"ovn.kubernetes.io/ip_address": "10.16.0.5/16"},
        {"ovn.kubernetes.io/ip_address": "10.16.0.5", "ovn.kubernetes.io/cidr": "10.16.0.0/16"},
        {"ovn.kubernetes.io/mac_address": "00:00:00:AA:BB:CC"},
        {"ovn.kubernetes.io/ip_pool": "10.16.0.5, 10.16.0.6"},
        {"ovn.kubernetes.io/ingress_rate": "100", "ovn.kubernetes.io/egress_rate": "-1"},
        {"net1.ns1.ovn.kubernetes.io/ip_address": "garbage"},  # only default-provider keys
    ],
)
def test_validate_pod_network_accepts(annotations: dict[str, str]) -> None:
    pl.validate_pod_network(annotations)


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"ovn.kubernetes.io/ip_address": "10.16.0.300"},
            "10.16.0.300 is not a valid ovn.kubernetes.io/ip_address",
        ),
        ({"ovn.kubernetes.io/ip_address": "10.16.0.5/40"}, "is not a valid"),
        (
            {"ovn.kubernetes.io/ip_address": "10.17.0.5", "ovn.kubernetes.io/cidr": "10.16.0.0/16"},
            "10.17.0.5 not in cidr 10.16.0.0/16",
        ),
        (
            {"ovn.kubernetes.io/ip_address": "10.16.0.5", "ovn.kubernetes.io/cidr": "x"},
            "invalid cidr x",
        ),
        (
            {"ovn.kubernetes.io/mac_address": "zz"},
            "zz is not a valid ovn.kubernetes.io/mac_address",
        ),
        (
            {"ovn.kubernetes.io/ip_pool": "10.16.0.5,nope"},
            "nope in ovn.kubernetes.io/ip_pool is not a valid address",
        ),
        (
            {"ovn.kubernetes.io/ingress_rate": "1.5"},
            "1.5 is not a valid ovn.kubernetes.io/ingress_rate",
        ),
        (
            {"ovn.kubernetes.io/egress_rate": "10M"},
            "10M is not a valid ovn.kubernetes.io/egress_rate",
        ),
        # several problems are aggregated like k8s utilerrors
        (
            {"ovn.kubernetes.io/ip_address": "a,b"},
            "[a is not a valid ovn.kubernetes.io/ip_address, "
            "b is not a valid ovn.kubernetes.io/ip_address]",
        ),
    ],
)
def test_validate_pod_network_rejects(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidPodNetworkError) as info:
        pl.validate_pod_network(annotations)
    assert str(info.value) == message or message in str(info.value)
    assert info.value.reason == "ValidatePodNetworkFailed"


@pytest.mark.parametrize(
    ("cidr", "ip", "message"),
    [
        ("10.16.0.0/16", "10.16.0.5", None),
        ("10.16.0.0/16", "10.16.255.255", "10.16.255.255 is the broadcast ip in cidr 10.16.0.0/16"),
        ("10.16.0.0/16", "10.16.0.0", "10.16.0.0 is the network number ip in cidr 10.16.0.0/16"),
        ("10.16.0.0/16,fd00::/120", "10.16.0.5,fd00::ff", "fd00::ff is the broadcast ip"),
        ("10.16.0.0/16,fd00::/120", "10.16.0.5,fd00::", "fd00:: is the network number ip"),
        ("10.16.0.0/16", "10.99.0.0", None),  # containment is not checked
        ("10.16.0.0/16", "fd00::", None),  # no same-family pair
    ],
)
def test_validate_pod_cidr(cidr: str, ip: str, message: str | None) -> None:
    if message is None:
        pl.validate_pod_cidr(cidr, ip)
        return
    with pytest.raises(InvalidPodNetworkError) as info:
        pl.validate_pod_cidr(cidr, ip)
    assert message in str(info.value)


def test_check_static_ip() -> None:
    pl.check_static_ip("10.16.0.5,fd00::5")
    with pytest.raises(InvalidPodNetworkError, match=r"failed to parse IP 10\.16\.0\.5/16"):
        pl.check_static_ip("10.16.0.5/16")


# --- address plans ---------------------------------------------------------------------------

DEFAULT_NET = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
ATTACH_NET = PodNet(ProviderType.ORIGINAL, "net1.ns1.ovn", ATTACH)
NS_NETS = pl.get_ns_available_subnets(namespace("ns1", "s2,ovn-default"), BY_NAME)


def names(subnets: tuple[Subnet, ...]) -> list[str]:
    return [s.name for s in subnets]


def test_random_plan_carries_a_lone_mac() -> None:
    # kube-ovn v1.9.41 acquireAddress passes it to GetRandomAddress (v1.8.18 ignored it)
    p = ns1_pod({"ovn.kubernetes.io/mac_address": "00:00:00:00:00:09"})
    plan = pl.plan_address_request(p, DEFAULT_NET, NS_NETS, keep_vm_ip=False)
    assert plan == pl.AddressRequest(
        AddressMode.RANDOM, "ns1/p", (DEFAULT,), mac="00:00:00:00:00:09"
    )


def test_static_plan_tries_namespace_subnets_then_own() -> None:
    p = ns1_pod(
        {
            "net1.ns1.ovn.kubernetes.io/ip_address": "172.18.0.5",
            "net1.ns1.ovn.kubernetes.io/mac_address": "00:00:00:00:00:09",
        }
    )
    plan = pl.plan_address_request(p, ATTACH_NET, NS_NETS, keep_vm_ip=False)
    assert plan.mode is AddressMode.STATIC
    assert names(plan.subnets) == ["s2", "ovn-default", "attach"]
    assert plan.ips == ("172.18.0.5",) and plan.mac == "00:00:00:00:00:09"
    own = pl.plan_address_request(
        ns1_pod({"ovn.kubernetes.io/ip_address": "10.16.0.5"}),
        DEFAULT_NET,
        NS_NETS,
        keep_vm_ip=False,
    )
    assert names(own.subnets) == ["s2", "ovn-default"]  # no duplicate


def test_pool_plan_for_deployments_checks_assignment() -> None:
    p = ns1_pod({"ovn.kubernetes.io/ip_pool": "10.16.0.5, 10.16.0.6"})
    plan = pl.plan_address_request(p, DEFAULT_NET, [], keep_vm_ip=False)
    assert plan.mode is AddressMode.POOL and plan.check_assigned
    assert plan.ips == ("10.16.0.5", "10.16.0.6")


@pytest.mark.parametrize(
    ("name", "ips"),
    [("web-0", ("10.16.0.5",)), ("web-1", ("10.16.0.6",)), ("web-2", ()), ("web-x", ())],
)
def test_pool_plan_for_statefulsets_indexes_by_ordinal(name: str, ips: tuple[str, ...]) -> None:
    p = sts_pod(name, annotations={"ovn.kubernetes.io/ip_pool": "10.16.0.5,10.16.0.6"})
    plan = pl.plan_address_request(p, DEFAULT_NET, [], keep_vm_ip=False)
    assert plan.mode is AddressMode.POOL and not plan.check_assigned
    assert plan.ips == ips


def test_validate_pod_ip_against_node_addresses() -> None:
    nodes = [node("n1", "10.16.0.9"), node("n2", "10.16.0.7", "fd00::7")]
    assert pl.validate_pod_ip(DEFAULT, "10.16.0.5", "", nodes) == (True, True)
    assert pl.validate_pod_ip(DEFAULT, "10.16.0.9", "", nodes) == (False, True)
    assert pl.validate_pod_ip(DEFAULT, "10.16.0.5", "fd00::7", nodes) == (True, False)
    underlay = subnet("u", "10.16.0.0/16", vlan="v10")
    assert pl.validate_pod_ip(underlay, "10.16.0.9", "", nodes) == (True, True)
    custom_vpc = subnet("c", "10.16.0.0/16", vpc="vpc1")
    assert pl.validate_pod_ip(custom_vpc, "10.16.0.9", "", nodes) == (True, True)
    # kube-ovn GetNodeInternalIP quirks
    assert pl.get_node_internal_ip(node("a", "1.1.1.1", "2.2.2.2")) == ("1.1.1.1", "2.2.2.2")
    assert pl.get_node_internal_ip(node("b", "fd00::1", "1.1.1.1")) == ("", "")


# --- annotations after allocation ------------------------------------------------------------


def test_build_pod_annotations_overlay() -> None:
    alloc = pl.build_pod_allocation(
        DEFAULT_NET, DEFAULT, v4="10.16.0.5", v6="", mac="00:00:00:AA:BB:CC"
    )
    out = pl.build_pod_annotations({"keep": "me"}, DEFAULT_NET, alloc, pod_nic_type="veth-pair")
    assert out == {
        "keep": "me",
        "ovn.kubernetes.io/ip_address": "10.16.0.5",
        "ovn.kubernetes.io/mac_address": "00:00:00:AA:BB:CC",
        "ovn.kubernetes.io/cidr": "10.16.0.0/16",
        "ovn.kubernetes.io/gateway": "10.16.0.1",
        "ovn.kubernetes.io/logical_switch": "ovn-default",
        "ovn.kubernetes.io/allocated": "true",
        "ovn.kubernetes.io/network_type": "geneve",
        "ovn.kubernetes.io/logical_router": "ovn-cluster",
        "ovn.kubernetes.io/pod_nic_type": "veth-pair",
    }


def test_build_pod_annotations_dual_stack_and_vm() -> None:
    dual = subnet("dual", "10.16.0.0/16,fd00::/64", gateway="10.16.0.1,fd00::1")
    net = PodNet(ProviderType.ORIGINAL, "ovn", dual, True)
    alloc = pl.build_pod_allocation(net, dual, v4="10.16.0.5", v6="fd00::5", mac="m", vm_name="vm1")
    out = alloc.to_annotations()
    assert out["ovn.kubernetes.io/ip_address"] == "10.16.0.5,fd00::5"
    assert out["ovn.kubernetes.io/cidr"] == "10.16.0.0/16,fd00::/64"
    assert out["ovn.kubernetes.io/virtualmachine"] == "vm1"


def test_build_pod_annotations_vlan() -> None:
    underlay = subnet("u", "192.168.10.0/24", vlan="vlan10")
    net = PodNet(ProviderType.ORIGINAL, "ovn", underlay, True)
    alloc = pl.build_pod_allocation(
        net, underlay, v4="192.168.10.5", v6="", mac="m", vlan=Vlan("vlan10", 10, "phys-net")
    )
    out = alloc.to_annotations()
    assert out["ovn.kubernetes.io/network_type"] == "vlan"
    assert out["ovn.kubernetes.io/vlan_id"] == "10"
    assert out["ovn.kubernetes.io/provider_network"] == "phys-net"
    assert "ovn.kubernetes.io/logical_router" not in out
    with pytest.raises(ResourceNotReadyError) as info:
        pl.build_pod_allocation(net, underlay, v4="192.168.10.5", v6="", mac="m")
    assert info.value.reason == "GetVlanInfoFailed"
    # IPAM-only nets never read the vlan
    ipam_net = PodNet(ProviderType.IPAM, "mv.ns1", underlay)
    ipam_alloc = pl.build_pod_allocation(ipam_net, underlay, v4="192.168.10.5", v6="", mac="m")
    assert ipam_alloc.vlan_id is None and ipam_alloc.network_type == "vlan"


# --- IP CR -----------------------------------------------------------------------------------


def test_build_ip_cr_for_a_pod() -> None:
    cr = pl.build_ip_cr(
        pod_name="web-0",
        ip="10.16.0.5,fd00::5",
        mac="m",
        subnet="ovn-default",
        namespace="shop",
        node_name="n1",
        provider="ovn",
        pod_type="StatefulSet",
        node_switch="join",
    )
    assert cr == {
        "apiVersion": "kubeovn.io/v1",
        "kind": "IP",
        "metadata": {
            "name": "web-0.shop",
            "labels": {"ovn.kubernetes.io/subnet": "ovn-default", "ovn-default": ""},
        },
        "spec": {
            "podName": "web-0",
            "namespace": "shop",
            "subnet": "ovn-default",
            "attachSubnets": [],
            "nodeName": "n1",
            "ipAddress": "10.16.0.5,fd00::5",
            "v4IpAddress": "10.16.0.5",
            "v6IpAddress": "fd00::5",
            "attachIps": [],
            "macAddress": "m",
            "attachMacs": [],
            "podType": "StatefulSet",
        },
    }


def test_build_ip_cr_for_attachment_and_node() -> None:
    att = pl.build_ip_cr(
        pod_name="p",
        ip="172.18.0.5",
        mac="m",
        subnet="attach",
        namespace="ns1",
        node_name="",
        provider="net1.ns1.ovn",
        pod_type="",
        node_switch="join",
    )
    assert att["metadata"]["name"] == "p.ns1.net1.ns1.ovn"
    assert att["spec"]["v6IpAddress"] == ""
    node_cr = pl.build_ip_cr(
        pod_name="x",
        ip="100.64.0.2",
        mac="m",
        subnet="join",
        namespace="",
        node_name="n1",
        provider="ovn",
        pod_type="",
        node_switch="join",
    )
    assert node_cr["metadata"]["name"] == "node-n1"
    assert node_cr["spec"]["podName"] == "n1"


# --- routing helpers -------------------------------------------------------------------------


def test_routing_helpers() -> None:
    hops = ["100.64.0.2", "fd00:100::2"]
    assert pl.src_ip_route_pairs("10.16.0.5,fd00::5", hops) == [
        ("10.16.0.5", "100.64.0.2"),
        ("fd00::5", "fd00:100::2"),
    ]
    assert pl.external_gateway_next_hop({"external-gw-addr": "172.56.0.1/16"}) == "172.56.0.1"
    with pytest.raises(ResourceNotReadyError, match="no available gateway nic address"):
        pl.external_gateway_next_hop({})
    with pytest.raises(ResourceNotReadyError):
        pl.external_gateway_next_hop(None)


# --- port spec and update plan ---------------------------------------------------------------


def test_build_port_spec_single_and_dual() -> None:
    p = ns1_pod(
        {
            "ovn.kubernetes.io/port_security": "true",
            "ovn.kubernetes.io/security_groups": "sg1, sg2",
        }
    )
    spec = pl.build_port_spec(
        p, DEFAULT_NET, DEFAULT, v4="10.16.0.5", v6="", mac="m", keep_vm_ip=False
    )
    assert spec == PortSpec(
        name="p.ns1",
        switch="ovn-default",
        mac="m",
        ips=("10.16.0.5",),
        cidrs=("10.16.0.0/16",),
        pod_name="p",
        pod_namespace="ns1",
        port_security=True,
        security_groups=("sg1", "sg2"),
    )
    assert pl.security_groups_to_sync(p, DEFAULT_NET) == ("sg1", "sg2")
    dual = subnet("dual", "10.16.0.0/16,fd00::/64", gateway="10.16.0.1,fd00::1")
    net = PodNet(ProviderType.ORIGINAL, "net1.ns1.ovn", dual)
    spec = pl.build_port_spec(
        ns1_pod(), net, dual, v4="10.16.0.5", v6="fd00::5", mac="m", keep_vm_ip=False
    )
    assert spec.name == "p.ns1.net1.ns1.ovn"
    assert spec.ips == ("10.16.0.5", "fd00::5") and spec.cidrs == ("10.16.0.0/16", "fd00::/64")
    assert not spec.port_security and spec.security_groups == ()
    assert (
        pl.security_groups_to_sync(ns1_pod({"ovn.kubernetes.io/security_groups": "a"}), DEFAULT_NET)
        == ()
    )


def test_build_port_spec_names_vm_ports_after_the_vm() -> None:
    vm = pod(
        "virt-launcher-vm1-x", "ns1", owner=("kubevirt.io/v1", "VirtualMachineInstance", "vm1")
    )
    spec = pl.build_port_spec(
        vm, DEFAULT_NET, DEFAULT, v4="10.16.0.5", v6="", mac="m", keep_vm_ip=True
    )
    assert (spec.name, spec.pod_name) == ("vm1.ns1", "vm1")


ALLOCATED = {
    "ovn.kubernetes.io/allocated": "true",
    "ovn.kubernetes.io/ip_address": "10.16.0.5,fd00::5",
    "ovn.kubernetes.io/mac_address": "00:00:00:AA:BB:CC",
}
DUAL = subnet("ovn-default", "10.16.0.0/16,fd00::/64", gateway="10.16.0.1,fd00::1")
DUAL_NETS = [PodNet(ProviderType.ORIGINAL, "ovn", DUAL, True)]
NODE = node("n1", "192.168.0.2", tunnel_ip="100.64.0.2,fd00:100::2")


def plan(
    annotations: dict[str, str],
    *,
    on: Subnet = DUAL,
    node: Node | None = NODE,
    eip_snat: bool = True,
    gw: dict[str, str] | None = None,
) -> rs.PodRows:
    cfg = rs.RoutingConfig(
        router="ovn-cluster", node_switch="join", enable_eip_snat=eip_snat, external_gw_config=gw
    )
    return rs.pod_rows(ns1_pod(annotations, node_name="n1"), on, node, cfg)


def reroutes(got: rs.PodRows) -> list[tuple[int, str, tuple[str, ...]]]:
    return [(p.priority, p.match, p.nexthops) for p in got.policies if p.action == "reroute"]


def test_pod_rows_distributed_route_via_node() -> None:
    got = plan(ALLOCATED)
    v4, v6 = rp.set_name("ovn-default", "n1", 4), rp.set_name("ovn-default", "n1", 6)
    assert reroutes(got) == [
        (29000, f"ip4.src == ${v4}", ("100.64.0.2",)),
        (29000, f"ip6.src == ${v6}", ("fd00:100::2",)),
    ]
    assert [(name, ip) for name, ip, _ in got.members] == [(v4, "10.16.0.5"), (v6, "fd00::5")]
    assert got.members[0][2]["node"] == "n1"
    assert got.nats == () and got.complete
    # its node unknown (or without a join address): nothing yet, and not complete
    missing = plan(ALLOCATED, node=None)
    assert (missing.members, missing.complete) == ((), False)


def test_pod_rows_eip_snat_use_the_external_gateway() -> None:
    ann = {**ALLOCATED, "ovn.kubernetes.io/eip": "172.56.0.9"}
    got = plan(ann, node=None, gw={"external-gw-addr": "172.56.0.1/16"})
    assert reroutes(got) == [(29250, "ip4.src == 10.16.0.5", ("172.56.0.1",))]
    assert got.members == ()
    assert got.nats == (NatChange("dnat_and_snat", "10.16.0.5", "172.56.0.9"),)
    assert not plan(ann).complete  # no external gateway ConfigMap yet
    # a distributed external gateway puts dnat_and_snat on the pod's port, with its MAC
    distributed = plan(ann, gw={"external-gw-addr": "172.56.0.1", "type": "distributed"})
    assert distributed.nats[0] == NatChange(
        "dnat_and_snat", "10.16.0.5", "172.56.0.9", "00:00:00:AA:BB:CC", "p.ns1"
    )
    # without --enable-eip-snat the annotation is ignored: node routes as usual
    assert len(plan(ann, eip_snat=False).members) == 2


def test_pod_rows_north_gateway_and_centralized() -> None:
    north = {**ALLOCATED, "ovn.kubernetes.io/north_gateway": "10.16.0.254"}
    got = plan(north, node=None, eip_snat=False)
    assert reroutes(got) == [(29250, "ip4.src == 10.16.0.5", ("10.16.0.254",))]
    assert got.members == ()
    central = subnet(
        "c", "10.16.0.0/16,fd00::/64", gateway="10.16.0.1,fd00::1", gatewayType="centralized"
    )
    got = plan(ALLOCATED, on=central, node=None, eip_snat=False)
    # the subnet key reroutes the whole CIDR; the pod has no row of its own
    assert (got.policies, got.members, got.nats, got.complete) == ((), (), (), True)


def test_only_overlay_subnets_of_the_default_vpc_are_routed() -> None:
    cfg = rs.RoutingConfig(router="ovn-cluster", node_switch="join")
    assert rs.routed_subnet(DUAL, cfg)
    assert not rs.routed_subnet(subnet("u", "10.16.0.0/16", vlan="v"), cfg)
    assert not rs.routed_subnet(subnet("v", "10.16.0.0/16", vpc="vpc1"), cfg)


def test_needs_update() -> None:
    assert pl.needs_update(ns1_pod(ALLOCATED), NOW)
    assert not pl.needs_update(ns1_pod({**ALLOCATED, "ovn.kubernetes.io/routed": "true"}), NOW)
    assert not pl.needs_update(ns1_pod(ALLOCATED, deletion_timestamp=NOW), NOW)
    assert not pl.needs_update(ns1_pod(ALLOCATED, phase="Succeeded", restart_policy="Never"), NOW)
    with pytest.raises(RetryableError, match="no address has been allocated to ns1/p"):
        pl.needs_update(ns1_pod({}), NOW)


def test_pod_rows_dual_stack_eip_snat_pair_by_family() -> None:
    got = plan(
        {
            **ALLOCATED,
            "ovn.kubernetes.io/eip": "172.56.0.9",
            "ovn.kubernetes.io/snat": "fd00:56::9",
        },
        gw={"external-gw-addr": "172.56.0.1/16,fd00:56::1/64"},
    )
    assert reroutes(got) == [
        (29250, "ip4.src == 10.16.0.5", ("172.56.0.1",)),
        (29250, "ip6.src == fd00::5", ("fd00:56::1",)),
    ]
    assert got.nats == (
        NatChange("dnat_and_snat", "10.16.0.5", "172.56.0.9"),
        NatChange("snat", "fd00::5", "fd00:56::9"),
    )
    assert pl.external_gateway_next_hop({"external-gw-addr": "172.56.0.1/16"}) == "172.56.0.1"
