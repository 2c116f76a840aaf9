"""pod_logic.plan_net_allocation: the add's plan of one network, decided without any I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller import pod_logic as pl
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import Pod, PodNet, ProviderType
from controller.pod_logic import AddressMode
from controller.testing.models import pod, sts_pod, subnet, vm_pod

DEFAULT = subnet("ovn-default", "10.16.0.0/16")
NS_SUBNET = subnet("ns-sub", "10.17.0.0/16")
ATTACH = subnet("att", "10.19.0.0/16", provider="att.default")

OVN = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
IPAM_ONLY = PodNet(ProviderType.IPAM, "att.default", ATTACH)
NS_NETS = (PodNet(ProviderType.ORIGINAL, "ovn", NS_SUBNET, True),)


@dataclass(frozen=True)
class Case:
    """A pod and network, and the parts of the plan the case is about."""

    pod: Pod
    net: PodNet = OVN
    keep_vm_ip: bool = False
    expect: dict[str, Any] = field(default_factory=dict)


def _get(plan: pl.NetAllocationPlan, name: str) -> Any:
    if name == "mode":
        return plan.request.mode
    if name in ("subnets", "ips", "mac", "check_assigned"):
        value = getattr(plan.request, name)
        return tuple(s.name for s in value) if name == "subnets" else value
    return getattr(plan, name)


CASES = {
    "random draws in the network's own subnet, port may be reused": Case(
        pod("p1"),
        expect={
            "mode": AddressMode.RANDOM,
            "subnets": ("ovn-default",),
            "key": "default/p1",
            "port_name": "p1.default",
            "writes_port": True,
            "may_reuse_port": True,
            "wanted_subnets": frozenset({"ovn-default"}),
            "vm_name": "",
            "pod_type": "",
        },
    ),
    "a lone MAC is asked for with a random address": Case(
        pod("p1", annotations={"ovn.kubernetes.io/mac_address": "00:00:00:aa:bb:cc"}),
        expect={"mode": AddressMode.RANDOM, "mac": "00:00:00:aa:bb:cc"},
    ),
    "static address: namespace subnets first, then the network's own": Case(
        pod(
            "p1",
            annotations={
                "ovn.kubernetes.io/ip_address": "10.17.0.9",
                "ovn.kubernetes.io/mac_address": "00:00:00:aa:bb:cc",
            },
        ),
        expect={
            "mode": AddressMode.STATIC,
            "subnets": ("ns-sub", "ovn-default"),
            "ips": ("10.17.0.9",),
            "mac": "00:00:00:aa:bb:cc",
            "may_reuse_port": False,
            "wanted_subnets": frozenset({"ns-sub", "ovn-default"}),
            "refusal": None,
        },
    ),
    "ip_pool of a plain pod skips addresses other keys hold": Case(
        pod("p1", annotations={"ovn.kubernetes.io/ip_pool": "10.16.0.7,10.16.0.8"}),
        expect={
            "mode": AddressMode.POOL,
            "ips": ("10.16.0.7", "10.16.0.8"),
            "check_assigned": True,
        },
    ),
    "ip_pool of a StatefulSet pod: the entry of its ordinal": Case(
        sts_pod("web-1", annotations={"ovn.kubernetes.io/ip_pool": "10.16.0.7,10.16.0.8"}),
        expect={
            "mode": AddressMode.POOL,
            "ips": ("10.16.0.8",),
            "check_assigned": False,
            "pod_type": "StatefulSet",
        },
    ),
    "ip_pool of a StatefulSet pod past the pool: nothing to try": Case(
        sts_pod("web-5", annotations={"ovn.kubernetes.io/ip_pool": "10.16.0.7"}),
        expect={"mode": AddressMode.POOL, "ips": ()},
    ),
    "a VM pod under keep-vm-ip is keyed and named by its VM": Case(
        vm_pod(),
        keep_vm_ip=True,
        expect={
            "key": "default/vm1",
            "owner_name": "vm1",
            "port_name": "vm1.default",
            "vm_name": "vm1",
            "pod_type": "VirtualMachine",
        },
    ),
    "a VM pod without keep-vm-ip is keyed by its own name": Case(
        vm_pod("virt-launcher-vm1-x"),
        expect={
            "key": "default/virt-launcher-vm1-x",
            "port_name": "virt-launcher-vm1-x.default",
            "vm_name": "",
        },
    ),
    "an IPAM-only attachment writes no port and syncs no group": Case(
        pod(
            "p1",
            annotations={
                "att.default.kubernetes.io/port_security": "true",
                "att.default.kubernetes.io/security_groups": "sg1",
            },
        ),
        net=IPAM_ONLY,
        expect={
            "port_name": "p1.default.att.default",
            "writes_port": False,
            "may_reuse_port": False,
            "security_groups": (),
        },
    ),
    "security groups are synced only with port security": Case(
        pod(
            "p1",
            annotations={
                "ovn.kubernetes.io/port_security": "true",
                "ovn.kubernetes.io/security_groups": "sg1,sg2",
            },
        ),
        expect={"security_groups": ("sg1", "sg2")},
    ),
    "security groups without port security are not synced": Case(
        pod("p1", annotations={"ovn.kubernetes.io/security_groups": "sg1"}),
        expect={"security_groups": ()},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_plan(case: Case) -> None:
    plan = pl.plan_net_allocation(case.pod, case.net, NS_NETS, keep_vm_ip=case.keep_vm_ip)

    assert plan.net is case.net
    for name, expected in case.expect.items():
        assert _get(plan, name) == expected, name


def test_a_static_network_or_broadcast_address_is_the_plans_refusal() -> None:
    network = pod("p1", annotations={"ovn.kubernetes.io/ip_address": "10.16.0.0"})

    plan = pl.plan_net_allocation(network, OVN, (), keep_vm_ip=False)

    assert isinstance(plan.refusal, InvalidPodNetworkError)
    assert "network number" in str(plan.refusal)


def test_leftovers_of_this_network_outside_the_plan_are_stale() -> None:
    leftover = [(OVN, "other"), (OVN, "ovn-default"), (IPAM_ONLY, "elsewhere")]

    plan = pl.plan_net_allocation(pod("p1"), OVN, (), keep_vm_ip=False, leftover=leftover)

    # only this network's allocation in a subnet the plan does not name; the attachment's
    # leftover is its own plan's business
    assert plan.stale == ((OVN, "other"),)


def test_the_other_networks_subnets_are_wanted_too() -> None:
    plan = pl.plan_net_allocation(pod("p1"), OVN, (), keep_vm_ip=False, others=frozenset({"att"}))

    assert plan.wanted_subnets == frozenset({"ovn-default", "att"})


@pytest.mark.parametrize(
    ("annotations", "needed"),
    [
        ({}, False),
        ({"ovn.kubernetes.io/mac_address": "00:00:00:aa:bb:cc"}, False),
        ({"ovn.kubernetes.io/ip_address": "10.16.0.9"}, True),
        ({"ovn.kubernetes.io/ip_pool": "10.16.0.9"}, True),
    ],
)
def test_only_static_and_pool_requests_read_the_namespace_subnets(
    annotations: dict[str, str], needed: bool
) -> None:
    assert pl.needs_namespace_subnets(pod("p1", annotations=annotations), OVN) is needed


def test_the_plan_is_a_frozen_value() -> None:
    plan = pl.plan_net_allocation(pod("p1"), OVN, (), keep_vm_ip=False)

    assert plan == pl.plan_net_allocation(pod("p1"), OVN, (), keep_vm_ip=False)
    with pytest.raises(AttributeError):
        plan.port_name = "x"  # type: ignore[misc]
