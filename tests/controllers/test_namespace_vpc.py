"""desired_namespace_annotations: a custom VPC's namespace uses the VPC's default subnet."""

from __future__ import annotations

import pytest

from controller.controllers.namespace import desired_namespace_annotations
from controller.core.errors import ResourceNotReadyError
from controller.core.model import Vpc
from controller.view import CachedObject

DEFAULT = CachedObject.of(
    {"metadata": {"name": "ovn-default"}, "spec": {"cidrBlock": "10.16.0.0/16"}}
)
VPC_SUB = CachedObject.of({"metadata": {"name": "vpc1-sub"}, "spec": {"cidrBlock": "10.93.0.0/24"}})
VPC = Vpc.from_dict(
    {
        "metadata": {"name": "vpc1"},
        "spec": {"namespaces": ["team-v"]},
        "status": {"defaultLogicalSwitch": "vpc1-sub"},
    }
)


def test_namespace_of_custom_vpc_uses_the_vpc_default_subnet_rule() -> None:
    got = desired_namespace_annotations("team-v", [DEFAULT, VPC_SUB], DEFAULT, [VPC])
    assert got["ovn.kubernetes.io/logical_switch"] == "vpc1-sub"
    assert got["ovn.kubernetes.io/cidr"] == "10.93.0.0/24"
    other = desired_namespace_annotations("other", [DEFAULT, VPC_SUB], DEFAULT, [VPC])
    assert other["ovn.kubernetes.io/logical_switch"] == "ovn-default"
    with pytest.raises(ResourceNotReadyError):
        desired_namespace_annotations("team-v", [DEFAULT], DEFAULT, [VPC])
    # a subnet binding the namespace wins over its VPC
    bound = CachedObject.of(
        {"metadata": {"name": "b"}, "spec": {"cidrBlock": "10.94.0.0/24", "namespaces": ["team-v"]}}
    )
    got = desired_namespace_annotations("team-v", [DEFAULT, VPC_SUB, bound], DEFAULT, [VPC])
    assert got["ovn.kubernetes.io/logical_switch"] == "b"
