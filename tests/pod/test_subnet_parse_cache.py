"""The pod controller parses each subnet once per (name, resourceVersion): a subnet that changes
(a new resourceVersion) is seen as changed, one that does not is answered the same every time."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.errors import ControllerError
from tests.pod.env import Env, raw_pod

LS = "ovn.kubernetes.io/logical_switch"
VALIDATE = "ValidatePodNetworkFailed"


def _versioned(name: str, version: str, cidr: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": version},
        "spec": {"cidrBlock": cidr, "gateway": "10.81.0.1", "excludeIps": ["10.81.0.1"]},
        "status": {"v4availableIPs": 100, "v6availableIPs": 100},
    }


def test_a_malformed_subnet_is_reported_on_every_run_of_the_same_version(env: Env) -> None:
    env.subnets.add(_versioned("typo", "7", ["10.81.0.0/24"]))
    env.create_pod(raw_pod("p", annotations={LS: "typo"}))
    for _ in range(2):
        with pytest.raises(ControllerError) as info:
            env.controller.handle_add_pod("default/p")
        assert info.value.reason == VALIDATE
        assert "spec.cidrBlock must be a string" in str(info.value)
    assert env.reasons() == [VALIDATE]  # the recorder folds the repeat into one Event


def test_a_fixed_subnet_under_a_new_resource_version_heals_the_pod(env: Env) -> None:
    env.subnets.add(_versioned("typo", "7", ["10.81.0.0/24"]))
    env.create_pod(raw_pod("p", annotations={LS: "typo"}))
    with pytest.raises(ControllerError):
        env.controller.handle_add_pod("default/p")

    fixed = _versioned("typo", "8", "10.81.0.0/24")
    env.subnets.update(fixed)
    env.ipam.add_or_update_subnet("typo", "10.81.0.0/24", ["10.81.0.1"])
    env.nb.ensure_logical_switch("typo", "ovn-cluster", "10.81.0.0/24", "10.81.0.1", {})
    env.controller.handle_add_pod("default/p")
    annotations = env.annotations("default/p")
    assert annotations["ovn.kubernetes.io/allocated"] == "true"
    assert annotations[LS] == "typo"
    assert annotations["ovn.kubernetes.io/ip_address"].startswith("10.81.0.")
