"""The contract of the router-policy and address-set verbs, for both NbClient implementations.

Every test runs against the fake and the real client (rows read back with ovn-nbctl for the
real one): one row per (router, priority, match), rewritten in place; address-set entries
added and removed one by one, canonical; nothing to change means no transaction at all.
"""

from __future__ import annotations

import pytest

from controller.ovn.api import AddressSetInfo, InvalidRequestError, OvnNotFoundError, RouterPolicy
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.testing.fake_nb import FakeNbClient
from tests.ovn.conftest import Subject

pytestmark = pytest.mark.timeout(60)

LR = "ovn-cluster"
IDS = {"vendor": "kube-ovn", "subnet": "ovn-default"}


@pytest.fixture
def s(subject: Subject) -> Subject:
    subject.nb.ensure_logical_router(LR)
    return subject


def test_policy_is_one_row_per_priority_and_match(s: Subject) -> None:
    s.nb.add_router_policy(LR, 31000, "ip4.dst == 10.16.0.0/16", "allow", (), IDS)
    s.nb.add_router_policy(LR, 31000, " ip4.dst == 10.16.0.0/16 ", "allow", (), IDS)
    s.nb.add_router_policy(LR, 29000, "ip4.src == $a_ip4", "reroute", ["100.64.0.2"], IDS)
    assert s.view.router_policies(LR) == [
        (29000, "ip4.src == $a_ip4", "reroute", ["100.64.0.2"]),
        (31000, "ip4.dst == 10.16.0.0/16", "allow", []),
    ]
    # the nexthop moves in place; external_ids are merged
    s.nb.add_router_policy(LR, 29000, "ip4.src == $a_ip4", "reroute", ["100.64.0.3"], {"x": "1"})
    assert s.nb.list_router_policies(LR) == [
        RouterPolicy(LR, 31000, "ip4.dst == 10.16.0.0/16", "allow", (), IDS),
        RouterPolicy(LR, 29000, "ip4.src == $a_ip4", "reroute", ("100.64.0.3",), {**IDS, "x": "1"}),
    ]
    assert s.view.router_policies(LR)[0][3] == ["100.64.0.3"]
    s.nb.delete_router_policy(LR, 29000, "ip4.src == $a_ip4")
    s.nb.delete_router_policy(LR, 29000, "ip4.src == $a_ip4")  # already gone
    s.nb.delete_router_policy("nope", 29000, "ip4.src == $a_ip4")
    assert s.view.router_policies(LR) == [(31000, "ip4.dst == 10.16.0.0/16", "allow", [])]


def test_policy_errors(s: Subject) -> None:
    with pytest.raises(OvnNotFoundError):
        s.nb.add_router_policy("nope", 31000, "ip4.dst == 10.0.0.0/8", "allow")
    bad = [
        (40000, "ip4", "allow", ()),
        (-1, "ip4", "allow", ()),
        (100, "", "allow", ()),
        (100, "ip4", "bogus", ()),
        (100, "ip4", "reroute", ()),
        (100, "ip4", "allow", ("100.64.0.1",)),
        (100, "ip4", "reroute", ("not-an-ip",)),
        (100, "ip4", "reroute", ("100.64.0.1", "fd00::1")),
    ]
    for priority, match, action, hops in bad:
        with pytest.raises(InvalidRequestError):
            s.nb.add_router_policy(LR, priority, match, action, hops)
    assert s.nb.list_router_policies(LR) == []


def test_address_set_entries_add_and_remove(s: Subject) -> None:
    s.nb.add_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.2"], IDS)
    s.nb.add_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.3", "10.16.0.2/32"], IDS)
    s.nb.add_address_set_addresses("kubeovn.a.n1_ip6", ["fd00::0002"], {**IDS, "af": "6"})
    assert s.view.address_set("kubeovn.a.n1_ip4") == ["10.16.0.2", "10.16.0.3"]
    assert s.view.address_set("kubeovn.a.n1_ip6") == ["fd00::2"]
    assert s.nb.list_address_sets({"af": "6"}) == [
        AddressSetInfo("kubeovn.a.n1_ip6", ("fd00::2",), {**IDS, "af": "6"})
    ]
    assert [a.name for a in s.nb.list_address_sets(IDS)] == ["kubeovn.a.n1_ip4", "kubeovn.a.n1_ip6"]
    s.nb.remove_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.2"])
    s.nb.remove_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.2"])  # not there any more
    s.nb.remove_address_set_addresses("nope", ["10.16.0.2"])
    assert s.view.address_set("kubeovn.a.n1_ip4") == ["10.16.0.3"]
    s.nb.remove_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.3"])
    assert s.view.address_set("kubeovn.a.n1_ip4") == []  # an empty set stays until deleted
    s.nb.delete_address_set("kubeovn.a.n1_ip4")
    s.nb.delete_address_set("kubeovn.a.n1_ip4")
    assert s.view.address_set("kubeovn.a.n1_ip4") is None


def test_address_set_errors(s: Subject) -> None:
    for name in ("", "1abc", "a-b", "a b", "$a"):
        with pytest.raises(InvalidRequestError):
            s.nb.add_address_set_addresses(name, ["10.16.0.2"])
    with pytest.raises(InvalidRequestError):
        s.nb.add_address_set_addresses("ok", ["not-an-ip"])
    assert s.view.address_set("ok") is None


def test_nothing_to_change_is_no_transaction(s: Subject) -> None:
    calls: list[str] = []
    nb = s.nb
    if isinstance(nb, FakeNbClient):
        before = sum(nb.requests.values())

        def transactions() -> int:
            return sum(nb.requests.values()) - before
    else:
        assert isinstance(nb, OvsdbappNbClient)
        nb._on_request = lambda method, _t, _ok: calls.append(method)

        def transactions() -> int:
            return len(calls)

    s.nb.add_router_policy(LR, 31000, "ip4.dst == 10.16.0.0/16", "allow", (), IDS)
    s.nb.add_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.2"], IDS)
    s.nb.add_static_route("src-ip", "10.16.0.9", "100.64.0.2", LR)
    assert transactions() == 3
    for _ in range(2):
        s.nb.add_router_policy(LR, 31000, "ip4.dst == 10.16.0.0/16", "allow", (), IDS)
        s.nb.add_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.2"], IDS)
        s.nb.remove_address_set_addresses("kubeovn.a.n1_ip4", ["10.16.0.7"])
        s.nb.delete_router_policy(LR, 29000, "ip4.src == $x_ip4")
        s.nb.delete_static_route("10.16.0.3", LR)
        s.nb.delete_address_set("nope")
    assert transactions() == 3


def test_apply_routing_is_one_transaction_for_a_keys_rows(s: Subject) -> None:
    from controller.ovn.api import NatChange, RoutingChange, SetChange

    gw = {**IDS, "node": "n1", "kube-ovn-route": "gateway"}
    s.nb.add_static_route("src-ip", "10.16.0.5", "100.64.0.2", LR)
    s.nb.add_static_route("src-ip", "10.16.0.0/16", "100.64.0.9", LR)  # v1.8 centralized
    s.nb.add_address_set_addresses("old_ip4", ["10.16.0.6"], gw)
    s.nb.add_router_policy(LR, 29000, "ip4.src == $old_ip4", "reroute", ["100.64.0.2"], gw)
    change = RoutingChange(
        policies=(RouterPolicy(LR, 29000, "ip4.src == $new_ip4", "reroute", ("100.64.0.2",), gw),),
        delete_policies=((29000, "ip4.src == $old_ip4"),),
        sets=(
            SetChange("new_ip4", ("10.16.0.5", "10.16.0.6"), (), gw),
            SetChange("old_ip4", delete=True),
        ),
        nats=(NatChange("snat", "10.16.0.5", "172.18.0.100"),),
        delete_src_routes=("10.16.0.5", "10.16.0.0/16"),
    )
    s.nb.apply_routing(LR, change)
    assert s.nb.list_router_policies(LR) == [
        RouterPolicy(LR, 29000, "ip4.src == $new_ip4", "reroute", ("100.64.0.2",), gw)
    ]
    assert s.nb.list_address_sets({}) == [AddressSetInfo("new_ip4", ("10.16.0.5", "10.16.0.6"), gw)]
    assert [(n.type, n.logical_ip, n.external_ip) for n in s.nb.list_nat_rules(LR)] == [
        ("snat", "10.16.0.5", "172.18.0.100")
    ]
    assert s.nb.list_static_routes(LR) == []
    # applied again: nothing differs, no transaction; entries removed, a NAT cleared
    if isinstance(s.nb, FakeNbClient):
        before = sum(s.nb.requests.values())
        s.nb.apply_routing(LR, change)
        assert sum(s.nb.requests.values()) == before
    s.nb.apply_routing(
        LR,
        RoutingChange(
            sets=(SetChange("new_ip4", (), ("10.16.0.6",), gw),),
            nats=(NatChange("snat", "10.16.0.5", ""),),
        ),
    )
    assert s.nb.list_address_sets({})[0].addresses == ("10.16.0.5",)
    assert s.nb.list_nat_rules(LR) == []
    # a bad row refuses the whole change
    with pytest.raises(InvalidRequestError):
        s.nb.apply_routing(
            LR,
            RoutingChange(
                sets=(
                    SetChange("new_ip4", ("10.16.0.7",), (), gw),
                    SetChange("bad-name", ("1.1.1.1",)),
                ),
            ),
        )
    assert s.nb.list_address_sets({})[0].addresses == ("10.16.0.5",)


def test_apply_routing_removes_dst_routes_by_prefix_and_next_hop(s: Subject) -> None:
    """A kube-ovn v1.8 node route (`<InternalIP>` via the join address) goes with the policy
    that replaces it; a route at the prefix via another hop, or of another policy, stays."""
    from controller.ovn.api import RoutingChange, StaticRoute

    ids = {"vendor": "kube-ovn", "node": "n1", "kube-ovn-route": "node"}
    s.nb.add_static_route("", "172.18.0.11", "100.64.0.2", LR)
    s.nb.add_static_route("", "172.18.0.12/32", "100.64.0.2", LR)
    s.nb.add_static_route("", "172.18.0.13", "10.0.0.1", LR)
    s.nb.add_static_route("src-ip", "172.18.0.11", "100.64.0.2", LR)
    s.nb.add_static_route("", "0.0.0.0/0", "100.64.0.1", LR)
    change = RoutingChange(
        policies=(
            RouterPolicy(LR, 30000, "ip4.dst == 172.18.0.11", "reroute", ("100.64.0.2",), ids),
        ),
        delete_dst_routes=(
            ("172.18.0.11/32", "100.64.0.2"),
            ("172.18.0.12", "100.64.0.2"),
            ("172.18.0.13", "100.64.0.2"),  # another hop: stays
        ),
    )
    s.nb.apply_routing(LR, change)
    assert [p.match for p in s.nb.list_router_policies(LR)] == ["ip4.dst == 172.18.0.11"]
    assert s.nb.list_static_routes(LR) == [
        StaticRoute(LR, "0.0.0.0/0", "100.64.0.1"),
        StaticRoute(LR, "172.18.0.11", "100.64.0.2", "src-ip"),
        StaticRoute(LR, "172.18.0.13", "10.0.0.1"),
    ]
    if isinstance(s.nb, FakeNbClient):
        before = sum(s.nb.requests.values())
        s.nb.apply_routing(LR, change)
        assert sum(s.nb.requests.values()) == before
    with pytest.raises(InvalidRequestError):
        s.nb.apply_routing(LR, RoutingChange(delete_dst_routes=(("nope", "100.64.0.2"),)))
