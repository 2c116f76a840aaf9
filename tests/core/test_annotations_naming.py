"""controller.core: annotations, naming, constants, errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core import annotations as ann
from controller.core import constants as c
from controller.core import errors, naming

PROVIDERS = ["ovn", "net1.ns1.ovn", "net2.ns1"]

text = st.text(min_size=0, max_size=20)


@st.composite
def allocations(draw: st.DrawFn) -> ann.PodNetworkAnnotations:
    return ann.PodNetworkAnnotations(
        ip_address=draw(text),
        mac_address=draw(text),
        cidr=draw(text),
        gateway=draw(text),
        logical_switch=draw(text),
        network_type=draw(st.sampled_from(["", "geneve", "vlan"])),
        allocated=draw(st.booleans()),
        logical_router=draw(text),
        vlan_id=draw(st.none() | st.integers(min_value=-(2**31), max_value=2**31)),
        provider_network=draw(text),
        virtualmachine=draw(text),
    )


@given(allocations(), st.sampled_from(PROVIDERS))
def test_allocation_round_trip(alloc: ann.PodNetworkAnnotations, provider: str) -> None:
    written = alloc.to_annotations(provider)
    assert all(k.startswith(f"{provider}.kubernetes.io/") for k in written)
    assert ann.PodNetworkAnnotations.from_annotations(written, provider) == alloc


def test_allocation_keys_match_the_cni_daemon_contract() -> None:
    alloc = ann.PodNetworkAnnotations(
        ip_address="10.16.0.5,fd00::5",
        mac_address="00:00:00:AA:BB:CC",
        cidr="10.16.0.0/16,fd00::/64",
        gateway="10.16.0.1,fd00::1",
        logical_switch="ovn-default",
        network_type="geneve",
        logical_router="ovn-cluster",
    )
    assert alloc.to_annotations() == {
        "ovn.kubernetes.io/ip_address": "10.16.0.5,fd00::5",
        "ovn.kubernetes.io/mac_address": "00:00:00:AA:BB:CC",
        "ovn.kubernetes.io/cidr": "10.16.0.0/16,fd00::/64",
        "ovn.kubernetes.io/gateway": "10.16.0.1,fd00::1",
        "ovn.kubernetes.io/logical_switch": "ovn-default",
        "ovn.kubernetes.io/network_type": "geneve",
        "ovn.kubernetes.io/logical_router": "ovn-cluster",
        "ovn.kubernetes.io/allocated": "true",
    }
    vlan = ann.PodNetworkAnnotations(
        "1.1.1.2",
        "m",
        "1.1.1.0/24",
        "1.1.1.1",
        "s",
        vlan_id=10,
        provider_network="phys",
        virtualmachine="vm1",
    )
    out = vlan.to_annotations("n.ns.ovn")
    assert out["n.ns.ovn.kubernetes.io/vlan_id"] == "10"
    assert out["n.ns.ovn.kubernetes.io/provider_network"] == "phys"
    assert out["n.ns.ovn.kubernetes.io/virtualmachine"] == "vm1"


def test_malformed_vlan_id_is_invalid_pod_network() -> None:
    with pytest.raises(errors.InvalidPodNetworkError, match="ten is not a valid"):
        ann.PodNetworkAnnotations.from_annotations({"ovn.kubernetes.io/vlan_id": "ten"})


def test_request_from_annotations() -> None:
    a = {
        "net1.ns1.ovn.kubernetes.io/ip_address": "10.0.0.5",
        "net1.ns1.ovn.kubernetes.io/mac_address": "00:00:00:00:00:01",
        "net1.ns1.ovn.kubernetes.io/ip_pool": " 10.0.0.6, 10.0.0.7 ,",
        "net1.ns1.ovn.kubernetes.io/port_security": "true",
        "net1.ns1.ovn.kubernetes.io/security_groups": "sg-a,sg-b",
        "ovn.kubernetes.io/ip_address": "ignored for another provider",
    }
    req = ann.PodNetworkRequest.from_annotations(a, "net1.ns1.ovn")
    assert req.ip_address == "10.0.0.5"
    assert req.ip_pool == ("10.0.0.6", "10.0.0.7")
    assert req.port_security and req.security_group_names() == ("sg-a", "sg-b")
    assert not req.is_random
    assert ann.PodNetworkRequest.from_annotations({}).is_random
    assert not ann.PodNetworkRequest.from_annotations(
        {"ovn.kubernetes.io/port_security": "True"}
    ).port_security


def test_apply_allocation_keeps_user_nic_type_and_other_keys() -> None:
    alloc = ann.PodNetworkAnnotations("10.16.0.5", "m", "10.16.0.0/16", "10.16.0.1", "ovn-default")
    out = ann.apply_allocation({"user": "x"}, alloc, pod_nic_type="veth-pair")
    assert out["user"] == "x" and out[c.POD_NIC_ANNOTATION] == "veth-pair"
    assert out[c.ALLOCATED_ANNOTATION] == "true"
    kept = ann.apply_allocation(
        {c.POD_NIC_ANNOTATION: "internal-port"}, alloc, pod_nic_type="veth-pair"
    )
    assert kept[c.POD_NIC_ANNOTATION] == "internal-port"


def test_state_helpers() -> None:
    a = {
        "ovn.kubernetes.io/allocated": "true",
        "ovn.kubernetes.io/routed": "true",
        "net1.ns1.ovn.kubernetes.io/allocated": "true",
        "net2.ns1.kubernetes.io/allocated": "false",
        ".kubernetes.io/allocated": "true",
    }
    assert ann.is_allocated(a) and ann.is_routed(a)
    assert ann.allocated_providers(a) == ["ovn", "net1.ns1.ovn"]
    assert ann.attachment_providers_to_release(a) == ["net1.ns1.ovn"]
    assert ann.allocation_state_keys("n.ns.ovn") == (
        "n.ns.ovn.kubernetes.io/allocated",
        "n.ns.ovn.kubernetes.io/routed",
    )
    assert ann.changed_keys({"a": "1"}, {"a": "2", "b": ""}, ["a", "b", "c"]) == ["a"]


# --- naming ----------------------------------------------------------------------------------


def test_port_names() -> None:
    assert naming.pod_name_to_port_name("web-0", "shop") == "web-0.shop"
    assert naming.pod_name_to_port_name("web-0", "shop", "ovn") == "web-0.shop"
    assert naming.pod_name_to_port_name("web-0", "shop", "net1.ns1.ovn") == (
        "web-0.shop.net1.ns1.ovn"
    )
    assert naming.node_port_name("node-a") == "node-node-a"
    assert naming.pod_key("ns", "p") == "ns/p" and naming.pod_key("", "n") == "n"


dns_label = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")


@given(dns_label, dns_label, st.sampled_from(PROVIDERS))
def test_port_name_structure(pod: str, ns: str, provider: str) -> None:
    name = naming.pod_name_to_port_name(pod, ns, provider)
    assert name.startswith(f"{pod}.{ns}")
    suffix = name[len(pod) + len(ns) + 1 :]
    assert suffix == ("" if provider == "ovn" else f".{provider}")


def test_ip_cr_names() -> None:
    assert naming.ip_cr_name("p", "ns", "ovn", subnet="ovn-default", node_switch="join") == "p.ns"
    assert (
        naming.ip_cr_name("p", "ns", "ovn", subnet="join", node_switch="join", node_name="n1")
        == "node-n1"
    )


# --- constants / errors ----------------------------------------------------------------------


def test_constants_agree_with_templates_and_ovn_package() -> None:
    assert c.VENDOR == "kube-ovn"
    pairs = [
        (c.ALLOCATED_ANNOTATION, c.ALLOCATED_ANNOTATION_TEMPLATE),
        (c.ROUTED_ANNOTATION, c.ROUTED_ANNOTATION_TEMPLATE),
        (c.IP_ADDRESS_ANNOTATION, c.IP_ADDRESS_ANNOTATION_TEMPLATE),
        (c.MAC_ADDRESS_ANNOTATION, c.MAC_ADDRESS_ANNOTATION_TEMPLATE),
        (c.CIDR_ANNOTATION, c.CIDR_ANNOTATION_TEMPLATE),
        (c.GATEWAY_ANNOTATION, c.GATEWAY_ANNOTATION_TEMPLATE),
        (c.IP_POOL_ANNOTATION, c.IP_POOL_ANNOTATION_TEMPLATE),
        (c.LOGICAL_SWITCH_ANNOTATION, c.LOGICAL_SWITCH_ANNOTATION_TEMPLATE),
        (c.LOGICAL_ROUTER_ANNOTATION, c.LOGICAL_ROUTER_ANNOTATION_TEMPLATE),
        (c.PORT_SECURITY_ANNOTATION, c.PORT_SECURITY_ANNOTATION_TEMPLATE),
        (c.INGRESS_RATE_ANNOTATION, c.INGRESS_RATE_ANNOTATION_TEMPLATE),
        (c.EGRESS_RATE_ANNOTATION, c.EGRESS_RATE_ANNOTATION_TEMPLATE),
    ]
    for fixed, template in pairs:
        assert c.annotation_key(template) == fixed
    assert c.annotation_key(c.VLAN_ID_ANNOTATION_TEMPLATE, "a.b") == "a.b.kubernetes.io/vlan_id"
    assert c.ALLOCATED_ANNOTATION.endswith(c.ALLOCATED_ANNOTATION_SUFFIX)
    assert c.POD_QUEUES == ("AddPod", "DeletePod", "UpdatePod", "UpdatePodSecurity")


def test_error_tree_and_reasons() -> None:
    invalid = errors.InvalidPodNetworkError("bad ip")
    assert isinstance(invalid, errors.PermanentError)
    assert isinstance(invalid, errors.ControllerError)
    assert invalid.reason == c.REASON_VALIDATE_POD_NETWORK_FAILED
    assert str(invalid) == "bad ip"
    not_ready = errors.ResourceNotReadyError("no subnet", reason="GetVlanInfoFailed", delay=2.0)
    assert isinstance(not_ready, errors.RetryableError)
    assert (not_ready.reason, not_ready.delay) == ("GetVlanInfoFailed", 2.0)
    assert errors.RetryableError("x").reason is None
    assert isinstance(errors.ConfigError("x"), ValueError)
