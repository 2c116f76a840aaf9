"""validate_static_request: a fixed address must be a usable host of its subnet (not its network
number or broadcast) before anything is allocated."""

from __future__ import annotations

import pytest

from controller import pod_logic as pl
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import Subnet
from controller.testing.models import subnet

DEFAULT = subnet("ovn-default", "10.16.0.0/16")
OTHER = subnet("other", "10.18.0.0/24")
DUAL = subnet("dual", "10.20.0.0/24,fd00::/120")


@pytest.mark.parametrize(
    ("ip", "subnets", "message"),
    [
        ("10.16.0.0", (DEFAULT,), "network number"),
        ("10.16.255.255", (DEFAULT,), "broadcast"),
        ("10.18.0.255", (DEFAULT, OTHER), "broadcast"),
        ("10.20.0.5,fd00::", (DUAL,), "network number"),
    ],
)
def test_validate_static_request_rejects(
    ip: str, subnets: tuple[Subnet, ...], message: str
) -> None:
    request = pl.AddressRequest(pl.AddressMode.STATIC, "ns/p", subnets, (ip,))
    with pytest.raises(InvalidPodNetworkError, match=message) as info:
        pl.validate_static_request(request)
    assert info.value.reason == "ValidatePodNetworkFailed"


@pytest.mark.parametrize(
    "request_",
    [
        pl.AddressRequest(pl.AddressMode.STATIC, "ns/p", (DEFAULT,), ("10.16.0.5",)),
        pl.AddressRequest(pl.AddressMode.STATIC, "ns/p", (OTHER,), ("10.16.0.0",)),  # not inside
        pl.AddressRequest(pl.AddressMode.POOL, "ns/p", (DEFAULT,), ("10.16.0.0",)),
        pl.AddressRequest(pl.AddressMode.RANDOM, "ns/p", (DEFAULT,)),
    ],
)
def test_validate_static_request_accepts(request_: pl.AddressRequest) -> None:
    pl.validate_static_request(request_)
