"""check_pod_request: what the add refuses before allocating (pure), and the IP CR owner rule
the write shares (kube/api.ip_owner_conflict)."""

from __future__ import annotations

import pytest

from controller import pod_logic as pl
from controller.core.errors import InvalidPodNetworkError, RetryableError
from controller.core.model import Pod, PodNet, ProviderType, Subnet
from controller.kube.api import ip_owner_conflict
from controller.pod_logic.request_check import owns_other
from controller.testing.models import pod, subnet

DEFAULT = subnet("ovn-default", "10.16.0.0/16")
DUAL = subnet("dual", "10.40.0.0/16,fd00:40::/112")
JOIN = subnet("join", "100.64.0.0/16")
ATTACH = subnet("attach", "172.18.0.0/16", provider="net1.ns1.ovn")
IPAM_ONLY = subnet("macvlan-sub", "172.19.0.0/16", provider="mv.ns1")
VALIDATE = "ValidatePodNetworkFailed"


def net(s: Subnet, provider: str = "ovn", kind: ProviderType = ProviderType.ORIGINAL) -> PodNet:
    return PodNet(kind, provider, s, provider == "ovn")


def refusals(
    p: Pod,
    nets: list[PodNet],
    *,
    candidates: tuple[Subnet, ...] = (),
    owners: dict[str, tuple[str, str]] | None = None,
) -> list[pl.Refusal]:
    return pl.check_pod_request(
        p,
        nets,
        lambda n: candidates or (n.subnet,),
        node_switch="join",
        pod_name=p.name,
        ip_cr_owner=(owners or {}).get,
    )


def test_a_clean_request_has_no_refusal() -> None:
    p = pod("p", "ns1", annotations={"ovn.kubernetes.io/ip_address": "10.16.0.9"})
    assert refusals(p, [net(DEFAULT)]) == []


@pytest.mark.parametrize(
    ("named", "permanent"), [(True, True), (False, False)], ids=["named", "from-namespace"]
)
def test_node_switch(named: bool, permanent: bool) -> None:
    p = pod("p", "ns1", annotations={"ovn.kubernetes.io/logical_switch": "join"} if named else {})
    (refusal,) = refusals(p, [net(JOIN)])
    assert (refusal.reason, refusal.permanent) == (VALIDATE, permanent)
    error = pl.refusal_error([refusal])
    assert isinstance(error, InvalidPodNetworkError if permanent else RetryableError)


def test_the_v6_gateway_of_a_dual_subnet_in_any_spelling() -> None:
    p = pod("p", "ns1", annotations={"ovn.kubernetes.io/ip_address": "10.40.0.9,FD00:40:0::1"})
    (refusal,) = refusals(p, [net(DUAL)])
    assert "is the gateway of subnet dual" in refusal.message


def test_a_pool_gateway_of_a_later_candidate_subnet() -> None:
    p = pod("p", "ns1", annotations={"ovn.kubernetes.io/ip_pool": "10.16.0.7, 10.40.0.1"})
    (refusal,) = refusals(p, [net(DEFAULT)], candidates=(DEFAULT, DUAL))
    assert refusal.message == "10.40.0.1 in ovn.kubernetes.io/ip_pool is the gateway of subnet dual"


def test_attachment_keys_are_checked_too() -> None:
    provider = "net1.ns1.ovn"
    p = pod(
        "p",
        "ns1",
        annotations={
            f"{provider}.kubernetes.io/ip_address": "172.18.0.1",
            f"{provider}.kubernetes.io/mac_address": "ff:ff:ff:ff:ff:ff",
        },
    )
    got = [r.message for r in refusals(p, [net(ATTACH, provider)])]
    assert got == [
        f"172.18.0.1 in {provider}.kubernetes.io/ip_address is the gateway of subnet attach",
        f"ff:ff:ff:ff:ff:ff in {provider}.kubernetes.io/mac_address is a multicast MAC address,"
        " an interface cannot take it",
    ]


def test_security_groups_only_matter_with_port_security_on_an_ovn_net() -> None:
    bad = {"ovn.kubernetes.io/security_groups": "ok,Not_OK"}
    assert refusals(pod("p", "ns1", annotations=bad), [net(DEFAULT)]) == []
    on = {**bad, "ovn.kubernetes.io/port_security": "true"}
    (refusal,) = refusals(pod("p", "ns1", annotations=on), [net(DEFAULT)])
    assert (
        refusal.message
        == "'Not_OK' in ovn.kubernetes.io/security_groups cannot name a security group"
    )
    ipam = {f"mv.ns1.kubernetes.io/{k.split('/')[1]}": v for k, v in on.items()}
    assert (
        refusals(pod("p", "ns1", annotations=ipam), [net(IPAM_ONLY, "mv.ns1", ProviderType.IPAM)])
        == []
    )


def test_an_ip_cr_of_another_owner_is_retried_with_acquire_address_failed() -> None:
    p = pod("web", "default")
    owners = {"web.default": ("default", "other")}
    (refusal,) = refusals(p, [net(DEFAULT)], owners=owners)
    assert (refusal.reason, refusal.permanent) == ("AcquireAddressFailed", False)
    assert refusals(p, [net(DEFAULT)], owners={"web.default": ("default", "web")}) == []


@pytest.mark.parametrize(
    ("name", "owner", "other"),
    [
        ("node-n1", ("", "n1"), True),  # a node's
        ("a.b", ("ns", "x"), True),  # another pod's
        ("a.b", ("b", "a"), False),  # its own
        ("a.b", ("", ""), False),  # names nobody
        ("a.b", ("", "a"), False),  # no namespace, not a node's name
    ],
)
def test_owns_other_and_the_write_agree(name: str, owner: tuple[str, str], other: bool) -> None:
    assert owns_other(name, owner, ("b", "a")) is other
    existing = {"metadata": {"name": name}, "spec": {"namespace": owner[0], "podName": owner[1]}}
    desired = {"metadata": {"name": name}, "spec": {"namespace": "b", "podName": "a"}}
    assert (ip_owner_conflict(existing, desired) is not None) is other
    # a node's own body may always repair its record
    node_body = {"metadata": {"name": name}, "spec": {"namespace": "", "podName": "n1"}}
    assert ip_owner_conflict(existing, node_body) is None
