"""The pure planner of the routing reconciler (controller/pod_logic/routing_state.py): desired
rows per key, read-back, and the diff one transaction applies."""

from __future__ import annotations

from datetime import timedelta

from controller.core import router_policy as rp
from controller.core.model import FrozenDict, Node, Pod, Subnet
from controller.ovn.api import AddressSetInfo, NatChange, NatRule, RouterPolicy, StaticRoute
from controller.pod_logic import node_policies as np_plan
from controller.pod_logic import routing_state as rs
from controller.testing import builders

NOW = builders.NOW
LR = "ovn-cluster"
CFG = rs.RoutingConfig(router=LR, node_switch="join")
EIP_CFG = rs.RoutingConfig(
    router=LR,
    node_switch="join",
    enable_eip_snat=True,
    external_gw_config={"external-gw-addr": "172.56.0.1/16"},
)
DIST = Subnet("ovn-default", "10.16.0.0/16")
CENT = Subnet("ovn-default", "10.16.0.0/16", gateway_type="centralized", gateway_node="n1,n2")


def node(name: str, join: str, ready: bool = True) -> Node:
    return Node(name, annotations=FrozenDict({"ovn.kubernetes.io/ip_address": join}), ready=ready)


N1, N2 = node("n1", "100.64.0.2"), node("n2", "100.64.0.3")


def pod(name: str, ip: str, on: str = "n1", **ann: str) -> Pod:
    annotations = builders.allocated(ip, "00:00:00:00:00:01", "ovn-default")
    annotations.update({f"ovn.kubernetes.io/{k}": v for k, v in ann.items()})
    raw = builders.pod(name, "default", annotations=annotations, node=on, phase="Running")
    return Pod.from_dict(raw)


def node_rows(
    pods: list[Pod], subnet: Subnet = DIST, n: Node = N1, cfg: rs.RoutingConfig = CFG
) -> rs.NodeDesired:
    return rs.desired_node_rows(subnet, n.name, n, pods, cfg, NOW)


def as_actual(desired: rs.Rows, subnet: str = "ovn-default", on: str = "n1") -> rs.Rows:
    """What the NB holds once `desired` was applied, read back."""
    policies = list(desired.policies.values())
    sets = [AddressSetInfo(name, tuple(sorted(e)), ids) for name, (e, ids) in desired.sets.items()]
    nats = [NatRule(LR, n.type, n.external_ip, n.logical_ip) for n in desired.nats.values()]
    ips = {n.logical_ip for n in desired.nats.values()}
    return rs.actual_rows(subnet, on, policies, sets, nats, [], ips)


def test_a_distributed_pod_is_in_its_nodes_set_under_the_nodes_reroute() -> None:
    got = node_rows([pod("a", "10.16.0.5"), pod("b", "10.16.0.6", on="n2")])
    name = rp.set_name("ovn-default", "n1", 4)
    assert list(got.rows.sets) == [name]
    assert got.rows.sets[name][0] == {"10.16.0.5"}
    (policy,) = got.rows.policies.values()
    assert (policy.priority, policy.match, policy.nexthops) == (
        29000,
        f"ip4.src == ${name}",
        ("100.64.0.2",),
    )
    assert got.routed == {"default/a"}
    assert got.rows.stale_routes == {"10.16.0.5"}


def test_routed_annotation_is_not_trusted_and_dead_pods_get_nothing() -> None:
    preset = pod("a", "10.16.0.5", routed="true")
    dead = Pod.from_dict(
        builders.pod(
            "d",
            "default",
            annotations=builders.allocated("10.16.0.7", "00:00:00:00:00:02", "ovn-default"),
            node="n1",
            phase="Failed",
            restartPolicy="Never",
        )
    )
    got = node_rows([preset, dead])
    assert got.routed == {"default/a"}
    assert next(iter(got.rows.sets.values()))[0] == {"10.16.0.5"}


def test_a_centralized_subnet_has_no_per_node_rows_and_one_subnet_reroute() -> None:
    assert node_rows([pod("a", "10.16.0.5")], subnet=CENT).rows == rs.Rows(
        stale_routes={"10.16.0.5"}
    )
    got = rs.desired_subnet_rows(CENT, {"n1": N1, "n2": N2}, CFG)
    assert got.gateway == "n1"
    assert [(p.match, p.nexthops) for p in got.rows.policies.values() if p.priority == 29000] == [
        ("ip4.src == 10.16.0.0/16", ("100.64.0.2",))
    ]
    # a NotReady node is no gateway; none usable: no reroute, the caller keeps the old one
    not_ready = rs.desired_subnet_rows(
        CENT, {"n1": node("n1", "100.64.0.2", ready=False), "n2": N2}, CFG
    )
    assert not_ready.gateway == "n2"
    assert rs.desired_subnet_rows(CENT, {}, CFG).gateway == ""


def test_switching_to_centralized_removes_the_node_set_and_reroute_in_one_change() -> None:
    before = node_rows([pod("a", "10.16.0.5")])
    after = node_rows([pod("a", "10.16.0.5")], subnet=CENT)
    change = rs.diff_rows(after.rows, as_actual(before.rows))
    assert [s.delete for s in change.sets] == [True]
    assert [m for _, m in change.delete_policies] == [
        f"ip4.src == ${rp.set_name('ovn-default', 'n1', 4)}"
    ]
    assert change.policies == ()


def test_a_pod_gone_from_the_node_leaves_its_set() -> None:
    before = node_rows([pod("a", "10.16.0.5"), pod("b", "10.16.0.6")])
    # "a" re-created on n2 (the successor is what the cache holds now)
    after = node_rows([pod("a", "10.16.0.5", on="n2"), pod("b", "10.16.0.6")])
    change = rs.diff_rows(after.rows, as_actual(before.rows))
    assert [(s.add, s.remove, s.delete) for s in change.sets] == [((), ("10.16.0.5",), False)]


def test_a_join_address_change_rewrites_the_reroute() -> None:
    before = node_rows([pod("a", "10.16.0.5")])
    after = node_rows([pod("a", "10.16.0.5")], n=node("n1", "100.64.0.99"))
    change = rs.diff_rows(after.rows, as_actual(before.rows))
    assert [p.nexthops for p in change.policies] == [("100.64.0.99",)]
    assert change.sets == ()


def test_a_node_without_join_address_routes_nothing_yet() -> None:
    got = node_rows([pod("a", "10.16.0.5")], n=Node("n1"))
    assert got.routed == frozenset() and got.rows.sets == {}


def test_eip_pods_get_their_own_reroute_and_nat_kept_while_another_pod_claims_them() -> None:
    src = pod("virt-launcher-src", "10.16.0.5", eip="172.56.0.9")
    before = node_rows([src], cfg=EIP_CFG)
    assert [(p.priority, p.match) for p in before.rows.policies.values()] == [
        (29250, "ip4.src == 10.16.0.5")
    ]
    assert before.rows.nats == {
        ("dnat_and_snat", "10.16.0.5"): NatChange("dnat_and_snat", "10.16.0.5", "172.56.0.9")
    }
    # the source is gone from n1; the migration target on n2 holds the address and wants the same
    dst = pod("virt-launcher-dst", "10.16.0.5", on="n2", eip="172.56.0.9")
    target = rs.pod_rows(dst, DIST, N2, EIP_CFG)
    actual = as_actual(before.rows)
    actual.nats = dict(before.rows.nats)
    kept = rs.diff_rows(node_rows([], cfg=EIP_CFG).rows, actual, lambda ip: target)
    assert kept.delete_policies == () and kept.nats == ()
    gone = rs.diff_rows(node_rows([], cfg=EIP_CFG).rows, actual, lambda ip: rs.PodRows())
    assert gone.delete_policies == ((29250, "ip4.src == 10.16.0.5"),)
    assert gone.nats == (NatChange("dnat_and_snat", "10.16.0.5", ""),)


def test_rows_of_other_keys_and_owners_are_not_read_as_the_keys() -> None:
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet="ovn-default", node="n2")
    policies = [
        RouterPolicy(LR, 29000, "ip4.src == $x", "reroute", ("1.1.1.1",), ids),
        RouterPolicy(LR, 100, "ip4.src == 10.0.0.1", "drop", (), {"vendor": "other"}),
    ]
    sets = [AddressSetInfo("x", ("10.16.0.5",), ids), AddressSetInfo("y", (), {"vendor": "other"})]
    routes = [
        StaticRoute(LR, "10.16.0.5", "100.64.0.2", "src-ip"),
        StaticRoute(LR, "10.16.0.5", "1.1.1.1"),
    ]
    got = rs.actual_rows("ovn-default", "n1", policies, sets, [], routes, {"10.16.0.5"})
    assert got.policies == {} and got.sets == {}
    assert got.stale_routes == {"10.16.0.5"}


def test_a_terminating_pod_past_its_grace_is_not_routed() -> None:
    raw = builders.pod(
        "a",
        "default",
        annotations=builders.allocated("10.16.0.5", "00:00:00:00:00:01", "ovn-default"),
        node="n1",
        phase="Running",
        deletion_timestamp=builders.timestamp(NOW - timedelta(seconds=60)),
        grace_period=30,
    )
    assert not rs.routable(Pod.from_dict(raw), NOW)


def test_a_family_the_join_network_lacks_is_not_routed_and_does_not_hold_the_pod_back() -> None:
    dual = pod("a", "10.16.0.5,fd00::5")
    got = rs.pod_rows(dual, Subnet("ovn-default", "10.16.0.0/16,fd00::/64"), N1, CFG)
    assert [ip for _, ip, _ in got.members] == ["10.16.0.5"]
    assert got.complete


# --- kube-ovn v1.8's per-node dst-ip static routes ---------------------------------------------


def with_internal(n: Node, *ips: str) -> Node:
    return Node(n.name, annotations=n.annotations, ready=n.ready, internal_ips=ips)


def node_policy_change(n: Node | None, name: str, routes: list[StaticRoute]) -> rs.RoutingChange:
    """The node policy key's change against an NB holding `routes` and, for a node that is
    gone, the policy it had (172.18.0.11 via 100.64.0.2)."""
    desired = np_plan.desired_node_policies(name, n, CFG)
    had = (
        []
        if n is not None
        else [
            RouterPolicy(
                LR,
                rp.NODE_PRIORITY,
                "ip4.dst == 172.18.0.11",
                "reroute",
                ("100.64.0.2",),
                rp.ids(rp.KIND_NODE, 4, node=name),
            )
        ]
    )
    actual = rs.actual_rows("", name, had, (), (), (), ())
    return np_plan.diff_node_policies(desired, actual, routes)


def test_a_nodes_v18_dst_route_goes_with_the_policy_written() -> None:
    n1 = with_internal(N1, "172.18.0.11")
    routes = [
        StaticRoute(LR, "172.18.0.11", "100.64.0.2"),  # v1.8.18 handleAddNode's
        StaticRoute(LR, "172.18.0.11/32", "100.64.0.2", ""),
        StaticRoute(LR, "172.18.0.12", "100.64.0.2"),  # another prefix
        StaticRoute(LR, "172.18.0.11", "10.0.0.1"),  # another next hop
        StaticRoute(LR, "172.18.0.11", "100.64.0.2", "src-ip"),
        StaticRoute(LR, "0.0.0.0/0", "100.64.0.1"),
    ]
    change = node_policy_change(n1, "n1", routes)
    assert [p.match for p in change.policies] == ["ip4.dst == 172.18.0.11"]
    assert change.delete_dst_routes == (
        ("172.18.0.11", "100.64.0.2"),
        ("172.18.0.11/32", "100.64.0.2"),
    )
    assert change.delete_src_routes == ()


def test_no_v18_route_no_route_change() -> None:
    n1 = with_internal(N1, "172.18.0.11")
    routes = [StaticRoute(LR, "0.0.0.0/0", "100.64.0.1"), StaticRoute(LR, "::/0", "fd00::1")]
    assert node_policy_change(n1, "n1", routes).delete_dst_routes == ()


def test_a_gone_nodes_v18_route_goes_by_the_next_hop_its_policy_named() -> None:
    routes = [
        StaticRoute(LR, "172.18.0.11", "100.64.0.2"),
        StaticRoute(LR, "172.18.0.30", "100.64.0.2"),  # v1.8 deleted by next hop alone
        StaticRoute(LR, "172.18.0.12", "100.64.0.3"),  # another node's
        StaticRoute(LR, "0.0.0.0/0", "100.64.0.2"),
        StaticRoute(LR, "10.16.0.5", "100.64.0.2", "src-ip"),
    ]
    change = node_policy_change(None, "n1", routes)
    assert change.delete_policies == ((rp.NODE_PRIORITY, "ip4.dst == 172.18.0.11"),)
    assert change.delete_dst_routes == (
        ("172.18.0.11", "100.64.0.2"),
        ("172.18.0.30", "100.64.0.2"),
    )


def test_an_ipv6_nodes_v18_route_goes_by_its_128_prefix_and_the_default_stays() -> None:
    n6 = Node(
        "n1",
        annotations=FrozenDict({"ovn.kubernetes.io/ip_address": "100.64.0.2,fd00:100:64::2"}),
        internal_ips=("172.18.0.11", "fc00:f853:ccd:e793::3"),
    )
    routes = [
        StaticRoute(LR, "fc00:f853:ccd:e793::3/128", "fd00:100:64::2"),
        StaticRoute(LR, "fc00:f853:ccd:e793::/64", "fd00:100:64::2"),
        StaticRoute(LR, "::/0", "fd00:100:64::2"),
    ]
    change = node_policy_change(n6, "n1", routes)
    assert sorted(p.match for p in change.policies) == [
        "ip4.dst == 172.18.0.11",
        "ip6.dst == fc00:f853:ccd:e793::3",
    ]
    assert change.delete_dst_routes == (("fc00:f853:ccd:e793::3/128", "fd00:100:64::2"),)


def test_only_overlay_ovn_subnets_of_the_default_vpc_are_routed() -> None:
    """kube-ovn v1.8.18 pkg/controller/subnet.go handleAddOrUpdateSubnet writes nothing on a
    router for a subnet whose provider is not OVN's (an IPAM-only attachment's)."""
    subnets = [
        Subnet("default", "10.16.0.0/16"),
        Subnet("ovn-attachment", "10.16.0.0/16", provider="net1.default.ovn"),
        Subnet("ipam-only", "10.16.0.0/16", provider="mv.default"),
        Subnet("custom-vpc", "10.16.0.0/16", vpc="tenant"),
        Subnet("underlay", "10.16.0.0/16", vlan="vlan10"),
    ]
    routed = {s.name: rs.routed_subnet(s, CFG) for s in subnets}
    assert routed == {
        "default": True,
        "ovn-attachment": True,
        "ipam-only": False,
        "custom-vpc": False,
        "underlay": False,
    }
    assert rs.desired_subnet_rows(Subnet("mv", "10.16.0.0/16", provider="mv.default"), {}, CFG) == (
        rs.SubnetDesired(rs.Rows(), "", False)
    )
