"""format_subnet_spec: a Subnet's spec completed with kube-ovn's defaults, or refused."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.errors import MalformedObjectError
from controller.core.subnet_spec import format_subnet_spec


def test_format_subnet_spec_defaults_and_excludes_the_gateway_once() -> None:
    spec = format_subnet_spec("s", {"cidrBlock": "10.1.0.5/24", "excludeIps": ["10.1.0.9"]})
    assert spec["cidrBlock"] == "10.1.0.0/24"
    assert spec["gateway"] == "10.1.0.1"
    assert spec["excludeIps"] == ["10.1.0.9", "10.1.0.1"]
    assert (spec["protocol"], spec["provider"], spec["vpc"]) == ("IPv4", "ovn", "ovn-cluster")
    assert format_subnet_spec("s", spec) == spec  # idempotent


def test_format_subnet_spec_dual_stack() -> None:
    spec = format_subnet_spec("s", {"cidrBlock": "10.1.0.0/24,fd00::/120"})
    assert spec["gateway"] == "10.1.0.1,fd00::1"
    assert spec["excludeIps"] == ["10.1.0.1", "fd00::1"]
    assert spec["protocol"] == "Dual"


@pytest.mark.parametrize(
    "spec",
    [{}, {"cidrBlock": "10.1.0.0/33"}, {"cidrBlock": "10.1.0.0/24", "gateway": "10.2.0.1"}],
)
def test_format_subnet_spec_rejects_bad_input(spec: dict[str, Any]) -> None:
    with pytest.raises(MalformedObjectError):
        format_subnet_spec("bad", spec)
