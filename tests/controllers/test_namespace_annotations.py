"""desired_namespace_annotations: the subnets a namespace is bound to, as kube-ovn annotates it."""

from __future__ import annotations

import pytest

from controller.controllers.namespace import desired_namespace_annotations
from controller.core.constants import (
    CIDR_ANNOTATION,
    EXCLUDE_IPS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.core.errors import ResourceNotReadyError
from controller.testing.builders import subnet
from controller.view import CachedObject


def test_namespace_annotations_bound_subnets_sorted_else_default() -> None:
    default = CachedObject.of(subnet("ovn-default", "10.16.0.0/16"))
    subnets = [
        CachedObject.of(subnet("zeta", "10.3.0.0/24", namespaces=["a"])),
        CachedObject.of(
            subnet(
                "alpha", "10.2.0.0/24", namespaces=["a", "b"], excludeIps=["10.2.0.10..10.2.0.20"]
            )
        ),
    ]
    ann = desired_namespace_annotations("a", subnets, default)
    assert ann[LOGICAL_SWITCH_ANNOTATION] == "alpha,zeta"
    assert ann[CIDR_ANNOTATION] == "10.2.0.0/24;10.3.0.0/24"
    assert ann[EXCLUDE_IPS_ANNOTATION] == "10.2.0.10..10.2.0.20,10.2.0.1;10.3.0.1"
    assert desired_namespace_annotations("c", subnets, default)[LOGICAL_SWITCH_ANNOTATION] == (
        "ovn-default"
    )
    with pytest.raises(ResourceNotReadyError):
        desired_namespace_annotations("c", subnets, None)
