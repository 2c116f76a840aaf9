"""The pure helpers added to pod_logic for the handlers (needs_add_after_edit,
validate_static_request, inspect_pod skipping terminating pods)."""

from __future__ import annotations

import pytest

from controller import pod_logic as pl
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import PodNet, ProviderType, Subnet
from controller.testing.builders import NOW
from controller.testing.models import pod, subnet

DEFAULT = subnet("ovn-default", "10.16.0.0/16")
OTHER = subnet("other", "10.18.0.0/24")
DUAL = subnet("dual", "10.20.0.0/24,fd00::/120")


def test_needs_add_after_edit() -> None:
    old = pod("p", annotations={"ovn.kubernetes.io/ip_address": "bad"})
    fixed = pod("p", annotations={"ovn.kubernetes.io/ip_address": "10.16.0.9"})
    assert pl.needs_add_after_edit(old, fixed, NOW)
    assert not pl.needs_add_after_edit(fixed, fixed, NOW)  # nothing changed
    allocated = pod("p", annotations={"ovn.kubernetes.io/allocated": "true", "x": "y"})
    assert not pl.needs_add_after_edit(fixed, allocated, NOW)  # our own patch
    attached = pod("p", annotations={"n.ns.ovn.kubernetes.io/allocated": "true"})
    assert not pl.needs_add_after_edit(fixed, attached, NOW)
    dead = pod("p", annotations={"a": "b"}, phase="Failed", restart_policy="Never")
    assert not pl.needs_add_after_edit(old, dead, NOW)
    terminating = pod("p", annotations={"a": "b"}, deletion_timestamp=NOW)
    assert not pl.needs_add_after_edit(old, terminating, NOW)
    host = pod("p", annotations={"a": "b"}, host_network=True)
    assert not pl.needs_add_after_edit(old, host, NOW)
    # Inspection cleared an attachment's mark while the default network stays allocated.
    both = pod(
        "p",
        annotations={
            "ovn.kubernetes.io/allocated": "true",
            "n.ns.ovn.kubernetes.io/allocated": "true",
        },
    )
    default_only = pod("p", annotations={"ovn.kubernetes.io/allocated": "true"})
    assert pl.needs_add_after_edit(both, default_only, NOW)
    assert not pl.needs_add_after_edit(default_only, both, NOW)


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


def test_inspect_pod_skips_terminating_pods() -> None:
    net = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
    annotations = {"ovn.kubernetes.io/allocated": "true"}
    live = pod("p", annotations=annotations, node_name="n1")
    assert pl.inspect_pod(live, [net], lambda _: False, NOW, keep_vm_ip=False).lost_providers
    terminating = pod("p", annotations=annotations, node_name="n1", deletion_timestamp=NOW)
    assert pl.inspect_pod(terminating, [net], lambda _: False, NOW, keep_vm_ip=False) == (
        pl.InspectResult()
    )


def test_inspect_pod_reroutes_only_pods_with_the_ovn_network() -> None:
    # handleUpdatePod only routes the `ovn` network (and refuses a pod without it): a pod whose
    # default network is replaced by an attachment must not be re-queued for routes every pass
    att = PodNet(ProviderType.ORIGINAL, "net1.ns.ovn", OTHER, True)
    override = pod("p", annotations={"net1.ns.ovn.kubernetes.io/allocated": "true"}, node_name="n1")
    assert pl.inspect_pod(override, [att], lambda _: True, NOW, keep_vm_ip=False) == (
        pl.InspectResult()
    )
    ovn = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
    both = pod(
        "p",
        annotations={
            "net1.ns.ovn.kubernetes.io/allocated": "true",
            "ovn.kubernetes.io/allocated": "true",
        },
        node_name="n1",
    )
    result = pl.inspect_pod(both, [att, ovn], lambda _: True, NOW, keep_vm_ip=False)
    assert result.needs_update
