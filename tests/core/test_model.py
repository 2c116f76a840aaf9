"""controller.core.model: tolerant from_dict, clear errors on malformed values, value semantics."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.core.errors import MalformedObjectError
from controller.core.model import (
    Namespace,
    NetworkAttachmentDefinition,
    Node,
    Pod,
    StatefulSet,
    Subnet,
    VirtualMachine,
    Vlan,
    Vpc,
)
from controller.core.object_fields import FrozenDict, format_time, parse_time

FULL_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-0",
        "namespace": "shop",
        "uid": "1234",
        "resourceVersion": "77",
        "annotations": {"ovn.kubernetes.io/allocated": "true"},
        "labels": {"app": "web"},
        "deletionTimestamp": "2026-01-01T12:00:00Z",
        "deletionGracePeriodSeconds": 30,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": "web",
                "uid": "u",
                "controller": True,
            }
        ],
    },
    "spec": {
        "nodeName": "node-a",
        "hostNetwork": False,
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 45,
    },
    "status": {
        "phase": "Running",
        "reason": "",
        "podIP": "10.16.0.5",
        "podIPs": [{"ip": "10.16.0.5"}, {"ip": "fd00::5"}],
        "hostIP": "192.168.0.10",
    },
}


def test_pod_from_full_dict() -> None:
    pod = Pod.from_dict(FULL_POD)
    assert pod.key == "shop/web-0"
    assert pod.uid == "1234"
    assert pod.resource_version == "77"
    assert pod.annotations == {"ovn.kubernetes.io/allocated": "true"}
    assert pod.labels["app"] == "web"
    assert pod.deletion_timestamp == datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert pod.deletion_grace_period_seconds == 30
    assert pod.node_name == "node-a"
    assert pod.restart_policy == "OnFailure"
    assert pod.termination_grace_period_seconds == 45
    assert pod.pod_ips == ("10.16.0.5", "fd00::5")
    assert pod.host_ip == "192.168.0.10"
    owner = pod.statefulset_owner()
    assert owner is not None and owner.name == "web" and owner.controller
    assert pod.vm_owner() is None


def test_pod_from_minimal_dict_uses_defaults() -> None:
    pod = Pod.from_dict({"metadata": {"name": "p", "namespace": "ns"}})
    assert pod.annotations == {}
    assert pod.restart_policy == "Always"
    assert pod.deletion_timestamp is None
    assert pod.termination_grace_period_seconds is None
    assert pod.owner_references == ()
    assert not pod.host_network
    # null values count as missing (the API server omits or nulls them)
    nulls = Pod.from_dict({"metadata": {"name": "p", "annotations": None}, "spec": None})
    assert nulls.annotations == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "Pod: expected an object, got list"),
        (
            {"metadata": {"name": "p", "annotations": {"a": 1}}},
            "metadata.annotations must be a map",
        ),
        ({"metadata": {"name": "p", "annotations": "x"}}, "metadata.annotations"),
        ({"metadata": {"name": 5}}, "field metadata.name must be a string"),
        ({"metadata": {"name": "p", "deletionTimestamp": "yesterday"}}, "RFC 3339"),
        ({"metadata": {"name": "p"}, "spec": {"hostNetwork": "yes"}}, "must be a boolean"),
        (
            {"metadata": {"name": "p"}, "spec": {"terminationGracePeriodSeconds": "30"}},
            "must be an integer",
        ),
        ({"metadata": {"name": "p", "ownerReferences": [7]}}, "ownerReferences[0]"),
        (
            {"metadata": {"name": "p", "ownerReferences": [{"kind": 3}]}},
            "ownerReferences[0].kind must be a string",
        ),
        ({"metadata": {"name": "p"}, "status": {"podIPs": ["x"]}}, "status.podIPs[0]"),
        ({"metadata": {"name": "p"}, "spec": []}, "spec"),
    ],
)
def test_pod_malformed_values_raise_clear_errors(raw: object, message: str) -> None:
    with pytest.raises(MalformedObjectError) as info:
        Pod.from_dict(raw)
    assert message in str(info.value)


def _variants() -> list[object]:
    """FULL_POD with each leaf replaced by odd values, each section nulled, emptied or broken."""
    base = copy.deepcopy(FULL_POD)
    del base["metadata"]["deletionTimestamp"]
    out: list[object] = [base, FULL_POD, {}, {"metadata": {}}, []]
    odd: list[object] = [None, "", "x", 0, 5, True, False, [], {}, ["x"], {"a": 1}, 1.5]
    for section in ("metadata", "spec", "status"):
        broken: list[object] = [None, {}, [], "x"]
        for value in broken:
            v = copy.deepcopy(base)
            v[section] = value
            out.append(v)
        for key in list(base[section]):
            for value in odd:
                v = copy.deepcopy(base)
                v[section][key] = value
                out.append(v)
    for i, ref_value in enumerate(odd):
        for key in ("apiVersion", "kind", "name", "uid", "controller"):
            v = copy.deepcopy(base)
            v["metadata"]["ownerReferences"][0][key] = ref_value
            out.append(v)
        v = copy.deepcopy(base)
        v["status"]["podIPs"] = [{"ip": ref_value}, ref_value]
        out.append(v)
        v = copy.deepcopy(base)
        v["metadata"]["annotations"] = {f"k{i}": ref_value}
        out.append(v)
    return out


def _outcome(parse: Callable[[Any], object], raw: object) -> tuple[str, object]:
    try:
        return "pod", parse(raw)
    except MalformedObjectError as e:
        return "error", str(e)


@pytest.mark.parametrize("raw", _variants())
def test_pod_fast_path_equals_the_general_reader(raw: object) -> None:
    assert _outcome(Pod.from_dict, raw) == _outcome(Pod.read, raw)


def test_pod_fast_path_takes_well_formed_pods() -> None:
    from controller.core import model

    pod = copy.deepcopy(FULL_POD)
    del pod["metadata"]["deletionTimestamp"]
    fast = model._pod_fast(pod)
    assert fast is not None and fast == Pod.read(pod)
    assert model._pod_fast({"metadata": {"name": "p", "namespace": "ns"}}) is not None


def test_malformed_error_names_the_object() -> None:
    with pytest.raises(MalformedObjectError, match="Pod 'web-0'"):
        Pod.from_dict({"metadata": {"name": "web-0"}, "spec": {"nodeName": 1}})


def test_pods_are_hashable_values() -> None:
    a = Pod.from_dict(FULL_POD)
    b = Pod.from_dict(copy.deepcopy(FULL_POD))
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert pickle.loads(pickle.dumps(a)) == a
    assert copy.deepcopy(a) == a


def test_frozen_dict() -> None:
    d = FrozenDict({"a": "1"})
    assert d == {"a": "1"} and d == FrozenDict({"a": "1"}) and d != FrozenDict({"a": "2"})
    assert hash(d) == hash(FrozenDict({"a": "1"}))
    with pytest.raises(TypeError):
        d["b"] = "2"  # type: ignore[index]  # read-only on purpose
    copy_ = d.to_dict()
    copy_["b"] = "2"
    assert "b" not in d
    assert repr(d) == "FrozenDict({'a': '1'})"


def test_subnet_defaults_like_format_subnet() -> None:
    s = Subnet.from_dict({"metadata": {"name": "s"}, "spec": {"cidrBlock": "10.0.0.0/24"}})
    assert (s.provider, s.vpc, s.gateway_type, s.protocol) == (
        "ovn",
        "ovn-cluster",
        "distributed",
        "IPv4",
    )
    assert s.v4_available_ips == 0.0
    dual = Subnet.from_dict(
        {"metadata": {"name": "d"}, "spec": {"cidrBlock": "10.0.0.0/24,fd00::/120"}}
    )
    assert dual.protocol == "Dual"


def test_subnet_full() -> None:
    s = Subnet.from_dict(
        {
            "metadata": {"name": "s1"},
            "spec": {
                "cidrBlock": "10.0.0.0/24",
                "gateway": "10.0.0.1",
                "excludeIps": ["10.0.0.1", "10.0.0.5..10.0.0.9"],
                "provider": "net1.ns1.ovn",
                "vpc": "vpc1",
                "vlan": "vlan10",
                "gatewayType": "centralized",
                "protocol": "IPv4",
                "namespaces": ["ns1"],
                "logicalGateway": True,
                "private": True,
                "default": False,
            },
            "status": {"v4availableIPs": 250, "v6availableIPs": 0, "v4usingIPs": 3.0},
        }
    )
    assert s.exclude_ips == ("10.0.0.1", "10.0.0.5..10.0.0.9")
    assert s.namespaces == ("ns1",)
    assert s.v4_available_ips == 250.0 and s.v4_using_ips == 3.0
    assert s.logical_gateway and s.private and s.vlan == "vlan10"


def test_subnet_malformed() -> None:
    with pytest.raises(MalformedObjectError, match=r"spec\.excludeIps must be a list of strings"):
        Subnet.from_dict({"metadata": {"name": "s"}, "spec": {"excludeIps": "10.0.0.1"}})
    with pytest.raises(MalformedObjectError, match=r"status\.v4availableIPs must be a number"):
        Subnet.from_dict({"metadata": {"name": "s"}, "status": {"v4availableIPs": "9"}})


def test_namespace_distinguishes_nil_annotations() -> None:
    assert not Namespace.from_dict({"metadata": {"name": "a"}}).has_annotations
    ns = Namespace.from_dict({"metadata": {"name": "a", "annotations": {}}})
    assert ns.has_annotations and ns.annotations == {}


def test_node_internal_ips_in_order() -> None:
    node = Node.from_dict(
        {
            "metadata": {
                "name": "n1",
                "annotations": {"ovn.kubernetes.io/ip_address": "100.64.0.2"},
            },
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": "n1"},
                    {"type": "InternalIP", "address": "192.168.0.2"},
                    {"type": "InternalIP", "address": "fd00::2"},
                ]
            },
        }
    )
    assert node.internal_ips == ("192.168.0.2", "fd00::2")
    assert node.annotations["ovn.kubernetes.io/ip_address"] == "100.64.0.2"
    with pytest.raises(MalformedObjectError, match=r"status.addresses\[0\].address"):
        Node.from_dict(
            {
                "metadata": {"name": "n"},
                "status": {"addresses": [{"type": "InternalIP", "address": None}]},
            }
        )


def test_vlan_reads_current_and_deprecated_fields() -> None:
    assert Vlan.from_dict({"metadata": {"name": "v"}, "spec": {"id": 10, "provider": "p"}}) == Vlan(
        "v", 10, "p"
    )
    old = Vlan.from_dict(
        {"metadata": {"name": "v"}, "spec": {"vlanId": 20, "providerInterfaceName": "eth1"}}
    )
    assert (old.id, old.provider) == (20, "eth1")
    with pytest.raises(MalformedObjectError, match=r"spec\.id must be an integer"):
        Vlan.from_dict({"metadata": {"name": "v"}, "spec": {"id": True}})


def test_vpc_nad_sts_vm() -> None:
    vpc = Vpc.from_dict(
        {
            "metadata": {"name": "ovn-cluster"},
            "status": {
                "router": "ovn-cluster",
                "defaultLogicalSwitch": "ovn-default",
                "default": True,
            },
        }
    )
    assert vpc.router == "ovn-cluster" and vpc.default_logical_switch == "ovn-default"
    nad = NetworkAttachmentDefinition.from_dict(
        {"metadata": {"name": "n", "namespace": "x"}, "spec": {"config": "{}"}}
    )
    assert (nad.namespace, nad.name, nad.config) == ("x", "n", "{}")
    sts = StatefulSet.from_dict({"metadata": {"name": "web", "namespace": "x"}})
    assert sts.replicas == 1  # the API server's default
    sts = StatefulSet.from_dict(
        {
            "metadata": {
                "name": "web",
                "namespace": "x",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {
                "replicas": 0,
                "template": {
                    "metadata": {"annotations": {"ovn.kubernetes.io/logical_switch": "s"}}
                },
            },
        }
    )
    assert sts.replicas == 0 and sts.deletion_timestamp is not None
    assert sts.template_annotations["ovn.kubernetes.io/logical_switch"] == "s"
    vm = VirtualMachine.from_dict({"metadata": {"name": "vm1", "namespace": "x"}})
    assert vm.deletion_timestamp is None and vm.template_annotations == {}


def test_time_parsing() -> None:
    assert parse_time("2026-01-01T00:00:00Z") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_time("2026-01-01T02:00:00+02:00") == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_time("2026-01-01T00:00:00.123456Z") is not None
    assert parse_time("2026-01-01T00:00:00") is None  # no zone
    assert parse_time("soon") is None
    assert format_time(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00Z"


def test_node_ready_follows_its_ready_condition() -> None:
    from controller.core.model import Node

    def node(conditions: object) -> Node:
        return Node.from_dict({"metadata": {"name": "n1"}, "status": {"conditions": conditions}})

    assert node([{"type": "Ready", "status": "True"}]).ready
    assert not node([{"type": "Ready", "status": "False"}]).ready
    assert not node([{"type": "MemoryPressure", "status": "True"}]).ready
    assert not node(None).ready


def test_subnet_reads_its_gateway_nodes_and_active_gateway() -> None:
    from controller.core.model import Subnet

    subnet = Subnet.from_dict(
        {
            "metadata": {"name": "s1"},
            "spec": {"cidrBlock": "10.1.0.0/16", "gatewayNode": "n1,n2"},
            "status": {"activateGateway": "n2"},
        }
    )
    assert (subnet.gateway_node, subnet.activate_gateway) == ("n1,n2", "n2")
