"""controller.core.network_attachment: multus selection annotations and NAD configs."""

from __future__ import annotations

import pytest

from controller.core.errors import InvalidPodNetworkError
from controller.core.model import NetworkSelectionElement as Sel
from controller.core.network_attachment import (
    NetConf,
    ipam_provider_name,
    is_default_net,
    is_ovn_network,
    load_net_conf,
    ovn_provider_name,
    parse_pod_network_annotation,
)
from controller.testing.builders import MACVLAN_CONF, OVN_CONF, OVN_CONFLIST


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("net1", [Sel("net1", "pod-ns")]),
        ("other/net1", [Sel("net1", "other")]),
        ("net1@eth1", [Sel("net1", "pod-ns", "eth1")]),
        (
            " other/net1@eth1 , net2 ",
            [Sel("net1", "other", "eth1"), Sel("net2", "pod-ns")],
        ),
        ('[{"name": "net1"}]', [Sel("net1", "pod-ns")]),
        (
            '[{"name": "net1", "namespace": "other", "interface": "eth9",'
            ' "ips": ["10.0.0.5", "fd00::/64"], "mac": "00:00:00:00:00:01"}]',
            [Sel("net1", "other", "eth9", ("10.0.0.5", "fd00::/64"), "00:00:00:00:00:01")],
        ),
        ('[{"name": "net1", "interfaceRequest": "old0"}]', [Sel("net1", "pod-ns", "old0")]),
    ],
)
def test_parse_forms(value: str, expected: list[Sel]) -> None:
    assert parse_pod_network_annotation(value, "pod-ns") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "empty"),
        ("a/b/c", "failed at '/'"),
        ("net@a@b", "failed at '@'"),
        ("Net1", "failed to parse network name: Net1"),
        ("ns_1/net1", "failed to parse network name: ns_1"),
        ("net1,,net2", "empty name"),
        ("[{", "as JSON"),
        ('{"name": "x"}', "must be a list"),
        ("[1]", "element 0 is not an object"),
        ('[{"name": 5}]', "'name' must be a string"),
        ('[{"name": "x", "ips": "10.0.0.1"}]', "'ips' must be a list"),
        ('[{"name": "x", "mac": "zz"}]', "failed to parse mac address 'zz'"),
        ('[{"name": "x", "ips": ["10.0.0.300"]}]', "failed to parse IP address"),
        ('[{"name": "x", "ips": ["10.0.0.0/99"]}]', "failed to parse IP address"),
    ],
)
def test_parse_errors(value: str, message: str) -> None:
    with pytest.raises(InvalidPodNetworkError) as info:
        parse_pod_network_annotation(value, "ns")
    assert message in str(info.value)


def test_load_net_conf_single_and_list() -> None:
    assert load_net_conf(OVN_CONF) == NetConf(type="kube-ovn")
    macvlan = load_net_conf(MACVLAN_CONF)
    assert (macvlan.type, macvlan.ipam_type) == ("macvlan", "kube-ovn")
    conflist = load_net_conf(OVN_CONFLIST)
    assert conflist.plugin_types == ("kube-ovn", "portmap") and conflist.name == "l"
    assert is_ovn_network(load_net_conf(OVN_CONF))
    assert is_ovn_network(conflist)
    assert not is_ovn_network(macvlan)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("not json", "error unmarshalling"),
        ("[]", "must be a JSON object"),
        ('{"name": "x"}', "'type' or 'plugins'"),
        ('{"plugins": []}', "'type' or 'plugins'"),
        ('{"plugins": [1]}', "plugins[0] must be an object"),
        ('{"type": 1}', "'type' must be a string"),
        ('{"type": "x", "ipam": "kube-ovn"}', "'ipam' must be an object"),
    ],
)
def test_load_net_conf_errors(config: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        load_net_conf(config)
    assert message in str(info.value)


def test_default_net_and_provider_names() -> None:
    sel = Sel("net1", "ns1")
    assert is_default_net("net1", sel)
    assert is_default_net("ns1/net1", sel)
    assert not is_default_net("other/net1", sel)
    assert not is_default_net("", sel)
    assert ovn_provider_name(sel) == "net1.ns1.ovn"
    assert ipam_provider_name(sel) == "net1.ns1"
