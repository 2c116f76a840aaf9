"""The kubeovn.io CRDs: behind `crds.install`, kept on uninstall, schemas that fit real objects.

Sample objects are validated against each CRD's openAPIV3Schema with unknown fields refused (see
`crd_validator`): the API server would prune such a field silently, so a field the controller
writes that the schema lacks must fail here.
"""

from __future__ import annotations

import copy
from typing import Any

import helm_python
import jsonschema
import pytest

from controller import pod_logic
from controller.controllers.security_group import wanted_status
from controller.core.security_group import plan_security_group
from tests.chart.helpers import Rendered, crd_validator, render

CRDS = {
    "ips.kubeovn.io",
    "subnets.kubeovn.io",
    "vlans.kubeovn.io",
    "vpcs.kubeovn.io",
    "security-groups.kubeovn.io",
    # not read by this controller; kube-ovn v1.8.18's CNI daemon and controller wait for them
    "provider-networks.kubeovn.io",
    "vpc-nat-gateways.kubeovn.io",
}
WITH_STATUS = CRDS - {"ips.kubeovn.io"}


def _crds(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in rendered.of_kind("CustomResourceDefinition")}


def _validator(rendered: Rendered, name: str) -> jsonschema.Draft4Validator:
    return crd_validator(_crds(rendered)[name])


def test_crds_installed_by_default_and_kept(default_render: Rendered) -> None:
    crds = _crds(default_render)
    assert set(crds) == CRDS
    for name, crd in crds.items():
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        spec = crd["spec"]
        assert spec["group"] == "kubeovn.io"
        assert spec["scope"] == "Cluster"
        assert name == f"{spec['names']['plural']}.kubeovn.io"
        (version,) = spec["versions"]
        assert version["name"] == "v1"
        assert version["served"] is True
        assert version["storage"] is True
        has_status = "status" in version.get("subresources", {})
        assert has_status == (name in WITH_STATUS), name


def test_crds_toggle(chart: helm_python.Chart) -> None:
    assert render(chart, {"crds": {"install": False}}).of_kind("CustomResourceDefinition") == []


def test_printer_columns_point_at_schema_fields(default_render: Rendered) -> None:
    for name, crd in _crds(default_render).items():
        (version,) = crd["spec"]["versions"]
        schema = version["schema"]["openAPIV3Schema"]
        for column in version.get("additionalPrinterColumns", []):
            node = schema
            for part in column["jsonPath"].lstrip(".").split("."):
                assert part in node.get("properties", {}), f"{name}: {column['jsonPath']}"
                node = node["properties"][part]


SUBNET = {
    "apiVersion": "kubeovn.io/v1",
    "kind": "Subnet",
    "metadata": {"name": "ovn-default"},
    "spec": {
        "default": True,
        "vpc": "ovn-cluster",
        "protocol": "Dual",
        "cidrBlock": "10.16.0.0/16,fd00:10:16::/64",
        "gateway": "10.16.0.1,fd00:10:16::1",
        "excludeIps": ["10.16.0.1", "fd00:10:16::1"],
        "provider": "ovn",
        "namespaces": ["default"],
        "gatewayType": "distributed",
        "natOutgoing": True,
        "private": False,
        "allowSubnets": [],
        "vlan": "",
        "logicalGateway": False,
        "policyRoutingPriority": 1000,
        "policyRoutingTableID": 1000,
    },
    "status": {
        "v4availableIPs": 65532,
        "v4usingIPs": 1,
        "v6availableIPs": 1.8446744073709552e19,
        "v6usingIPs": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Init",
                "message": "",
                "lastUpdateTime": "2026-11-30T05:00:00Z",
                "lastTransitionTime": "2026-11-30T05:00:00Z",
            }
        ],
    },
}

IP = {
    "apiVersion": "kubeovn.io/v1",
    "kind": "IP",
    "metadata": {
        "name": "web-0.default",
        "labels": {"ovn.kubernetes.io/subnet": "ovn-default", "ovn-default": ""},
    },
    "spec": {
        "podName": "web-0",
        "namespace": "default",
        "subnet": "ovn-default",
        "attachSubnets": [],
        "nodeName": "node1",
        "ipAddress": "10.16.0.5,fd00:10:16::5",
        "v4IpAddress": "10.16.0.5",
        "v6IpAddress": "fd00:10:16::5",
        "attachIps": [],
        "macAddress": "00:00:00:0a:0b:0c",
        "attachMacs": [],
        "containerID": "",
        "podType": "StatefulSet",
    },
}

VLAN = {
    "apiVersion": "kubeovn.io/v1",
    "kind": "Vlan",
    "metadata": {"name": "ovn-vlan"},
    "spec": {"id": 100, "provider": "provider"},
    "status": {"subnets": ["vlan-subnet"]},
}

VPC = {
    "apiVersion": "kubeovn.io/v1",
    "kind": "Vpc",
    "metadata": {"name": "ovn-cluster"},
    "spec": {
        "namespaces": ["default"],
        "staticRoutes": [{"policy": "policyDst", "cidr": "0.0.0.0/0", "nextHopIP": "10.0.0.1"}],
    },
    "status": {
        "default": True,
        "defaultLogicalSwitch": "ovn-default",
        "router": "ovn-cluster",
        "standby": True,
        "subnets": ["ovn-default", "join"],
        "tcpLoadBalancer": "cluster-tcp-loadbalancer",
    },
}

SG_RULE = {
    "ipVersion": "ipv4",
    "protocol": "tcp",
    "priority": 10,
    "remoteType": "address",
    "remoteAddress": "10.0.0.0/24",
    "portRangeMin": 80,
    "portRangeMax": 443,
    "policy": "allow",
}
SECURITY_GROUP = {
    "apiVersion": "kubeovn.io/v1",
    "kind": "SecurityGroup",
    "metadata": {"name": "web"},
    "spec": {
        "allowSameGroupTraffic": True,
        "ingressRules": [SG_RULE],
        "egressRules": [
            {
                "ipVersion": "ipv6",
                "protocol": "icmp",
                "priority": 1,
                "remoteType": "securityGroup",
                "remoteSecurityGroup": "db",
                "policy": "drop",
            }
        ],
    },
    "status": {
        "portGroup": "ovn.sg.web",
        "allowSameGroupTraffic": True,
        "ingressMd5": "0f",
        "egressMd5": "1e",
        "ingressLastSyncSuccess": True,
        "egressLastSyncSuccess": True,
    },
}

SAMPLES = {
    "security-groups.kubeovn.io": SECURITY_GROUP,
    "subnets.kubeovn.io": SUBNET,
    "ips.kubeovn.io": IP,
    "vlans.kubeovn.io": VLAN,
    "vpcs.kubeovn.io": VPC,
}


@pytest.mark.parametrize(("crd", "sample"), SAMPLES.items(), ids=SAMPLES.keys())
def test_sample_objects_validate(
    default_render: Rendered, crd: str, sample: dict[str, Any]
) -> None:
    _validator(default_render, crd).validate(sample)


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `obj` with the dotted `path` set to `value` (None deletes it)."""
    out = copy.deepcopy(obj)
    *parents, leaf = path.split(".")
    node = out
    for part in parents:
        node = node[part]
    if value is None:
        del node[leaf]
    else:
        node[leaf] = value
    return out


BAD_OBJECTS = {
    "subnet-cidr-not-string": ("subnets.kubeovn.io", _with(SUBNET, "spec.cidrBlock", 10)),
    "subnet-exclude-not-list": ("subnets.kubeovn.io", _with(SUBNET, "spec.excludeIps", "a")),
    "subnet-misspelt-field": ("subnets.kubeovn.io", _with(SUBNET, "spec.cidr", "10.0.0.0/8")),
    "subnet-reserved-table": (
        "subnets.kubeovn.io",
        _with(SUBNET, "spec.policyRoutingTableID", 254),
    ),
    "subnet-priority-range": ("subnets.kubeovn.io", _with(SUBNET, "spec.policyRoutingPriority", 0)),
    "subnet-status-counts": ("subnets.kubeovn.io", _with(SUBNET, "status.v4usingIPs", "1")),
    "ip-unknown-spec-field": ("ips.kubeovn.io", _with(IP, "spec.ip", "10.16.0.5")),
    "ip-attach-not-list": ("ips.kubeovn.io", _with(IP, "spec.attachIps", "")),
    "ip-wrong-kind": ("ips.kubeovn.io", _with(IP, "kind", "Ip")),
    "vlan-id-range": ("vlans.kubeovn.io", _with(VLAN, "spec.id", 4096)),
    "vlan-without-provider": ("vlans.kubeovn.io", _with(VLAN, "spec.provider", None)),
    "vpc-standby-not-bool": ("vpcs.kubeovn.io", _with(VPC, "status.standby", "true")),
    "sg-priority-not-int": (
        "security-groups.kubeovn.io",
        _with(SECURITY_GROUP, "spec.allowSameGroupTraffic", "yes"),
    ),
    "sg-misspelt-status": (
        "security-groups.kubeovn.io",
        _with(SECURITY_GROUP, "status.portgroup", "ovn.sg.web"),
    ),
}


@pytest.mark.parametrize(("crd", "obj"), BAD_OBJECTS.values(), ids=BAD_OBJECTS.keys())
def test_bad_objects_are_rejected(default_render: Rendered, crd: str, obj: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        _validator(default_render, crd).validate(obj)


def test_ip_objects_the_controller_builds_validate(default_render: Rendered) -> None:
    validator = _validator(default_render, "ips.kubeovn.io")
    for subnet, pod_type in (("ovn-default", ""), ("join", ""), ("ovn-default", "StatefulSet")):
        ip_cr = pod_logic.build_ip_cr(
            pod_name="web-0",
            ip="10.16.0.5,fd00:10:16::5",
            mac="00:00:00:0a:0b:0c",
            subnet=subnet,
            namespace="default",
            node_name="node1",
            provider="ovn",
            pod_type=pod_type,
            node_switch="join",
        )
        validator.validate(ip_cr)


def test_security_group_status_the_controller_writes_validates(default_render: Rendered) -> None:
    validator = _validator(default_render, "security-groups.kubeovn.io")
    bad = {**SG_RULE, "protocol": "sctp"}
    spec = {"ingressRules": [SG_RULE, bad], "allowSameGroupTraffic": False}
    plan = plan_security_group("web", spec)
    for synced in (True, False):
        status = wanted_status(plan, None, "2026-01-01T00:00:00Z", synced, "NB down")
        assert status is not None
        validator.validate({**SECURITY_GROUP, "spec": spec, "status": status})
