"""audit() on hand-built snapshots: a clean cluster passes, each kind of damage is reported
(and nothing else is), and what the flows legitimately leave behind is not."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from controller.audit.audit import (
    KIND_ADDRESS_OUTSIDE_SUBNET,
    KIND_ANNOTATION_MISMATCH,
    KIND_DUPLICATE_ADDRESS,
    KIND_DUPLICATE_MAC,
    KIND_IP_CR_MISMATCH,
    KIND_IP_CR_MISSING,
    KIND_IPAM_DISAGREES,
    KIND_LSP_ADDRESS_MISMATCH,
    KIND_LSP_MISMATCH,
    KIND_LSP_MISSING,
    KIND_MALFORMED,
    KIND_NAT_MISSING,
    KIND_ORPHAN_IP_CR,
    KIND_ORPHAN_LSP,
    KIND_ORPHAN_NAT,
    KIND_ORPHAN_ROUTE,
    KIND_POD_NOT_ALLOCATED,
    KIND_POD_NOT_ROUTED,
    KIND_ROUTE_DUPLICATE,
    KIND_ROUTE_MISMATCH,
    KIND_ROUTE_MISSING,
    KIND_ROUTE_STALE,
    AuditReport,
    audit,
)
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.constants import VENDOR
from controller.core.model import OwnerReference, Pod, StatefulSet, Subnet, VirtualMachine
from controller.core.object_fields import FrozenDict
from controller.ovn.api import NatRule, PortInfo, RouterPolicy, StaticRoute
from tests.audit.helpers import DEFAULT, NOW, ROUTER, Cluster, clean_cluster, mac

CONFIG = Config()


def run(c: Cluster, config: Config = CONFIG) -> AuditReport:
    return audit(c.snapshot(), config)


def test_clean_cluster_is_settled() -> None:
    report = run(clean_cluster())
    assert report.settled and report.ok, report.render()
    assert report.render().startswith("cluster audit: OK (checked 2 pods, 5 ports, 3 IP CRs")


# --- damage: each mutation must produce exactly these kinds ----------------------------------


def _annotate(c: Cluster, key: str, **changes: str) -> None:
    pod = c.pods[key]
    annotations = pod.annotations.to_dict()
    annotations.update(changes)
    c.pods[key] = dataclasses.replace(pod, annotations=FrozenDict(annotations))


def _set_port(c: Cluster, name: str, **changes: Any) -> None:
    c.ports[name] = dataclasses.replace(c.ports[name], **changes)


def gateway_wrong(c: Cluster) -> None:
    _annotate(c, "default/a", **{"ovn.kubernetes.io/gateway": "10.16.0.254"})


def routed_without_node(c: Cluster) -> None:
    c.add_pod("c", "10.16.0.4", mac(4), node="", objects=False)
    c.ip_cr("c.default", "c", "default", "10.16.0.4", mac(4), "ovn-default")
    c.port("c.default", "ovn-default", mac(4), "10.16.0.4", pod="default/c")


def outside_subnet(c: Cluster) -> None:
    c.add_pod("c", "10.17.0.5", mac(4))


def network_address(c: Cluster) -> None:
    c.add_pod("c", "10.16.0.0", mac(4))


def duplicate_ip(c: Cluster) -> None:
    c.add_pod("c", "10.16.0.2", mac(4))  # a's address


def duplicate_mac(c: Cluster) -> None:
    c.add_pod("c", "10.16.0.4", mac(2))  # a's MAC


def kept_sts_ip_reused(c: Cluster) -> None:
    # kube-ovn #2344/#4304: a StatefulSet's kept IP CR and a new pod hold the same address
    c.ip_cr(
        "web-0.default",
        "web-0",
        "default",
        "10.16.0.3",
        mac(9),
        "ovn-default",
        pod_type="StatefulSet",
    )


def ip_cr_missing(c: Cluster) -> None:
    del c.ips["a.default"]


def ip_cr_wrong(c: Cluster) -> None:
    c.ips["a.default"]["spec"]["ipAddress"] = "10.16.0.9"


def ip_cr_wrong_mac(c: Cluster) -> None:
    c.ips["a.default"]["spec"]["macAddress"] = mac(9)


def ip_cr_wrong_labels(c: Cluster) -> None:
    c.ips["a.default"]["metadata"]["labels"] = {"ovn.kubernetes.io/subnet": "join", "join": ""}


def node_ip_cr_wrong(c: Cluster) -> None:
    c.ips["node-n1"]["spec"]["podName"] = "n2"


def node_outside_join(c: Cluster) -> None:
    node = c.nodes["n1"]
    annotations = {**node.annotations, "ovn.kubernetes.io/ip_address": "100.65.0.2"}
    c.nodes["n1"] = dataclasses.replace(node, annotations=FrozenDict(annotations))
    c.ips["node-n1"]["spec"]["ipAddress"] = "100.65.0.2"
    c.port("node-n1", "join", mac(1), "100.65.0.2", pod="")


def orphan_lsp_without_addresses(c: Cluster) -> None:
    c.ports["half.default"] = PortInfo("half.default", "ovn-default", (), (), {"vendor": VENDOR})


def lsp_missing(c: Cluster) -> None:
    del c.ports["a.default"]


def lsp_wrong_address(c: Cluster) -> None:
    _set_port(c, "a.default", addresses=(f"{mac(2)} 10.16.0.9",))


def lsp_stale_port_security(c: Cluster) -> None:
    _set_port(c, "a.default", port_security=(f"{mac(2)} 10.16.0.9",))


def lsp_wrong_owner(c: Cluster) -> None:
    _set_port(c, "a.default", external_ids={"vendor": VENDOR, "pod": "default/zzz"})


def lsp_wrong_switch(c: Cluster) -> None:
    c.add_subnet(Subnet("other", "10.16.0.0/16", "10.16.0.1", vpc="vpc1"))
    _set_port(c, "a.default", switch="other")


def orphan_lsp(c: Cluster) -> None:
    c.port("gone.default", "ovn-default", mac(7), "10.16.0.7", pod="default/gone")


def orphan_node_port(c: Cluster) -> None:
    c.port("node-n2", "join", mac(7), "100.64.0.7", pod="")


def orphan_ip_cr(c: Cluster) -> None:
    c.ip_cr("gone.default", "gone", "default", "10.16.0.7", mac(7), "ovn-default")


def orphan_route(c: Cluster) -> None:
    c.routes.append(StaticRoute(ROUTER, "10.16.0.77", "100.64.0.2", "src-ip"))


def orphan_route_with_mask(c: Cluster) -> None:
    c.routes.append(StaticRoute(ROUTER, "10.16.0.77/32", "100.64.0.2", "src-ip"))


def route_missing(c: Cluster) -> None:
    c.unroute("10.16.0.2")
    c.sets.setdefault("kubeovn.spare_ip4", set()).add("10.16.0.2")  # not its node's set


def route_policy_missing(c: Cluster) -> None:
    c.policies.clear()


def route_wrong_nexthop(c: Cluster) -> None:
    c.policies = {
        k: dataclasses.replace(p, nexthops=("100.64.0.9",)) for k, p in c.policies.items()
    }


def route_doubled(c: Cluster) -> None:
    c.own_policy("10.16.0.2", "172.18.0.100", "default/a")


def route_stale_v18(c: Cluster) -> None:
    c.routes.append(StaticRoute(ROUTER, "10.16.0.2", "100.64.0.2", "src-ip"))


def orphan_set_entry(c: Cluster) -> None:
    next(iter(c.sets.values())).add("10.16.0.78")


def orphan_pod_policy(c: Cluster) -> None:
    c.own_policy("10.16.0.79", "172.18.0.100", "default/gone")


def orphan_nat(c: Cluster) -> None:
    c.nats.append(NatRule(ROUTER, "dnat_and_snat", "172.19.0.5", "10.16.0.66"))


def eip_without_nat(c: Cluster) -> None:
    _annotate(c, "default/a", **{"ovn.kubernetes.io/eip": "172.19.0.10"})
    c.unroute("10.16.0.2")
    c.own_policy("10.16.0.2", "172.18.0.254", "default/a")


def bad_subnet(c: Cluster) -> None:
    c.subnets["bad"] = Subnet("bad", "10.300.0.0/16", "10.300.0.1")


def pod_deleted_while_controller_down(c: Cluster) -> None:
    # kube-ovn #4304: the pod is gone, its port, IP CR and route are not
    del c.pods["default/b"]


def dead_pod_left_objects(c: Cluster) -> None:
    pod = c.pods["default/b"]
    c.pods["default/b"] = dataclasses.replace(pod, phase="Succeeded", restart_policy="Never")


def malformed_ip_cr(c: Cluster) -> None:
    c.ips["x"] = {"metadata": {"name": "x"}, "spec": {"ipAddress": "garbage"}}


def not_allocated(c: Cluster) -> None:
    c.pods["default/c"] = Pod("default", "c", node_name="n1", phase="Pending")


def not_routed(c: Cluster) -> None:
    c.add_pod("c", "10.16.0.4", mac(4), routed=False)


def port_lost_and_being_reallocated(c: Cluster) -> None:
    # kube-ovn inspectPod found b's port missing and cleared allocated/routed; b is re-queued
    del c.ports["b.default"]
    pod = c.pods["default/b"]
    annotations = {
        k: v
        for k, v in pod.annotations.items()
        if k not in ("ovn.kubernetes.io/allocated", "ovn.kubernetes.io/routed")
    }
    c.pods["default/b"] = dataclasses.replace(pod, annotations=FrozenDict(annotations))


DAMAGE: list[tuple[Callable[[Cluster], None], set[str]]] = [
    (gateway_wrong, {KIND_ANNOTATION_MISMATCH}),
    (routed_without_node, {KIND_ANNOTATION_MISMATCH}),
    (outside_subnet, {KIND_ADDRESS_OUTSIDE_SUBNET, KIND_IPAM_DISAGREES}),
    (network_address, {KIND_ADDRESS_OUTSIDE_SUBNET, KIND_IPAM_DISAGREES}),
    (duplicate_ip, {KIND_DUPLICATE_ADDRESS, KIND_IPAM_DISAGREES}),
    (duplicate_mac, {KIND_DUPLICATE_MAC, KIND_IPAM_DISAGREES}),
    (kept_sts_ip_reused, {KIND_DUPLICATE_ADDRESS, KIND_IPAM_DISAGREES}),
    (ip_cr_missing, {KIND_IP_CR_MISSING}),
    (ip_cr_wrong, {KIND_IP_CR_MISMATCH}),
    (ip_cr_wrong_mac, {KIND_IP_CR_MISMATCH}),
    (ip_cr_wrong_labels, {KIND_IP_CR_MISMATCH}),
    (node_ip_cr_wrong, {KIND_IP_CR_MISMATCH}),
    (node_outside_join, {KIND_ADDRESS_OUTSIDE_SUBNET, KIND_IPAM_DISAGREES, KIND_ROUTE_MISMATCH}),
    (orphan_lsp_without_addresses, {KIND_ORPHAN_LSP}),
    (lsp_missing, {KIND_LSP_MISSING}),
    (lsp_wrong_address, {KIND_LSP_ADDRESS_MISMATCH}),
    (lsp_stale_port_security, {KIND_LSP_ADDRESS_MISMATCH}),
    (lsp_wrong_owner, {KIND_LSP_MISMATCH}),
    (lsp_wrong_switch, {KIND_LSP_MISMATCH}),
    (orphan_lsp, {KIND_ORPHAN_LSP}),
    (orphan_node_port, {KIND_ORPHAN_LSP}),
    (orphan_ip_cr, {KIND_ORPHAN_IP_CR}),
    (orphan_route, {KIND_ORPHAN_ROUTE}),
    (orphan_route_with_mask, {KIND_ORPHAN_ROUTE}),
    (route_missing, {KIND_ROUTE_MISSING, KIND_ROUTE_DUPLICATE}),
    (route_policy_missing, {KIND_ROUTE_MISSING}),
    (route_wrong_nexthop, {KIND_ROUTE_MISMATCH}),
    (route_doubled, {KIND_ROUTE_DUPLICATE}),
    (route_stale_v18, {KIND_ROUTE_STALE}),
    (orphan_set_entry, {KIND_ORPHAN_ROUTE}),
    (orphan_pod_policy, {KIND_ORPHAN_ROUTE}),
    (orphan_nat, {KIND_ORPHAN_NAT}),
    (eip_without_nat, {KIND_NAT_MISSING}),
    (bad_subnet, {KIND_IPAM_DISAGREES}),
    (pod_deleted_while_controller_down, {KIND_ORPHAN_LSP, KIND_ORPHAN_IP_CR, KIND_ORPHAN_ROUTE}),
    (dead_pod_left_objects, {KIND_ORPHAN_LSP, KIND_ORPHAN_IP_CR, KIND_ORPHAN_ROUTE}),
    (malformed_ip_cr, {KIND_MALFORMED, KIND_ORPHAN_IP_CR}),
]


@pytest.mark.parametrize(("damage", "kinds"), DAMAGE, ids=[d.__name__ for d, _ in DAMAGE])
def test_damage_is_reported(damage: Callable[[Cluster], None], kinds: set[str]) -> None:
    c = clean_cluster()
    damage(c)
    report = run(c)
    assert not report.ok
    assert set(report.kinds()) == kinds, report.render()
    for kind in kinds:
        assert f"\n{kind} (" in report.render()


@pytest.mark.parametrize(
    ("damage", "kind", "pod"),
    [
        (not_allocated, KIND_POD_NOT_ALLOCATED, "c"),
        (not_routed, KIND_POD_NOT_ROUTED, "c"),
        (port_lost_and_being_reallocated, KIND_POD_NOT_ALLOCATED, "b"),
    ],
)
def test_unconverged_pods_are_pending_not_findings(
    damage: Callable[[Cluster], None], kind: str, pod: str
) -> None:
    c = clean_cluster()
    damage(c)
    report = run(c)
    assert report.ok and not report.settled, report.render()
    assert [f.kind for f in report.pending] == [kind]
    assert report.pending[0].object == f"pod default/{pod}"
    assert "pending (not converged yet):" in report.render()


def test_duplicate_report_names_every_holder_and_source() -> None:
    c = clean_cluster()
    duplicate_ip(c)
    report = run(c)
    dup = [f for f in report.findings if f.kind == KIND_DUPLICATE_ADDRESS]
    assert len(dup) == 1
    assert dup[0].object == "10.16.0.2 in ovn-default"
    assert dup[0].message == ("held by a.default [ip-cr, lsp, pod], c.default [ip-cr, lsp, pod]")
    ipam = [f for f in report.findings if f.kind == KIND_IPAM_DISAGREES]
    assert len(ipam) == 1 and "already assigned to default/a" in ipam[0].message


# --- what the flows legitimately leave behind ------------------------------------------------


def kept_address(c: Cluster, name: str, n: int, pod_type: str) -> None:
    """A kept StatefulSet/VM address in the default subnet: its IP CR and its port, no pod."""
    ip = f"10.16.0.{n}"
    c.ip_cr(f"{name}.default", name, "default", ip, mac(n), "ovn-default", pod_type=pod_type)
    c.port(f"{name}.default", "ovn-default", mac(n), ip, pod=f"default/{name}")


def kept_sts_without_pod(c: Cluster) -> None:
    kept_address(c, "web-0", 9, "StatefulSet")


def dead_sts_pod(c: Cluster) -> None:
    c.add_pod(
        "web-1",
        "10.16.0.10",
        mac(10),
        sts="web",
        phase="Failed",
        restart_policy="Never",
        routed=False,
    )


def terminating_pod(c: Cluster) -> None:
    pod = c.pods["default/b"]
    c.pods["default/b"] = dataclasses.replace(
        pod, deletion_timestamp=NOW - timedelta(seconds=5), deletion_grace_period_seconds=30
    )


def host_network_pod(c: Cluster) -> None:
    c.pods["default/h"] = Pod("default", "h", host_network=True, node_name="n1")


def dead_pod_cleaned(c: Cluster) -> None:
    c.add_pod(
        "job", "10.16.0.20", mac(20), phase="Succeeded", restart_policy="Never", objects=False
    )


def ipam_only_attachment(c: Cluster) -> None:
    s = Subnet("macvlan", "172.17.0.0/16", "172.17.0.1", provider="macvlan.default")
    c.subnets[s.name] = s
    _annotate(
        c,
        "default/a",
        **{
            "macvlan.default.kubernetes.io/allocated": "true",
            "macvlan.default.kubernetes.io/ip_address": "172.17.0.2",
            "macvlan.default.kubernetes.io/mac_address": mac(30),
            "macvlan.default.kubernetes.io/cidr": s.cidr_block,
            "macvlan.default.kubernetes.io/gateway": s.gateway,
            "macvlan.default.kubernetes.io/logical_switch": s.name,
            "k8s.v1.cni.cncf.io/networks": "macvlan",
        },
    )
    c.ip_cr(
        "a.default.macvlan.default",
        "a",
        "default",
        "172.17.0.2",
        mac(30),
        "macvlan",
        provider="macvlan.default",
        node="n1",
    )


def ovn_attachment(c: Cluster) -> None:
    s = Subnet("attach", "10.20.0.0/16", "10.20.0.1", provider="attach.default.ovn")
    c.add_subnet(s)
    p = "attach.default.ovn"
    _annotate(
        c,
        "default/a",
        **{
            f"{p}.kubernetes.io/allocated": "true",
            f"{p}.kubernetes.io/ip_address": "10.20.0.2",
            f"{p}.kubernetes.io/mac_address": mac(31),
            f"{p}.kubernetes.io/cidr": s.cidr_block,
            f"{p}.kubernetes.io/gateway": s.gateway,
            f"{p}.kubernetes.io/logical_switch": s.name,
        },
    )
    name = f"a.default.{p}"
    c.ip_cr(name, "a", "default", "10.20.0.2", mac(31), "attach", provider=p, node="n1")
    c.port(name, "attach", mac(31), "10.20.0.2", pod="default/a")


def centralized_subnet(c: Cluster) -> None:
    s = Subnet(
        "central",
        "10.30.0.0/16",
        "10.30.0.1",
        gateway_type="centralized",
        gateway_node="n1",
        activate_gateway="n1",
    )
    c.add_subnet(s)
    c.add_pod("c", "10.30.0.2", mac(4), subnet=s)
    c.unroute("10.30.0.2")  # no set entry: the subnet-wide reroute to its gateway routes it
    c.nodes["n1"] = dataclasses.replace(c.nodes["n1"], ready=True)
    match = rp.src_match(s.cidr_block)
    ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=s.name)
    c.policies[(rp.GATEWAY_PRIORITY, match)] = RouterPolicy(
        ROUTER, rp.GATEWAY_PRIORITY, match, "reroute", ("100.64.0.2",), ids
    )


def custom_vpc_overlapping_cidr(c: Cluster) -> None:
    s = Subnet("vpc1-net", "10.16.0.0/16", "10.16.0.1", vpc="vpc1")
    c.add_subnet(s)
    c.add_pod("c", "10.16.0.2", mac(2), subnet=s)  # a's address and MAC, another VPC
    c.unroute("10.16.0.2")  # handleUpdatePod routes only the default VPC
    c.route("10.16.0.2", "ovn-default", "n1", "100.64.0.2")  # a's entry stays


def dual_stack(c: Cluster) -> None:
    s = Subnet("dual", "10.40.0.0/16,fd00:40::/112", "10.40.0.1,fd00:40::1")
    c.add_subnet(s)
    c.add_pod("d", "10.40.0.2,fd00:40::2", mac(5), subnet=s, routed=False, node="")


def eip_pod(c: Cluster) -> None:
    _annotate(c, "default/a", **{"ovn.kubernetes.io/eip": "172.19.0.10"})
    c.nats.append(NatRule(ROUTER, "dnat_and_snat", "172.19.0.10", "10.16.0.2"))
    c.unroute("10.16.0.2")
    c.own_policy("10.16.0.2", "172.18.0.254", "default/a")


def vlan_pod_has_no_route(c: Cluster) -> None:
    s = Subnet("vlan1", "192.168.10.0/24", "192.168.10.1", vlan="v1")
    c.add_subnet(s)
    c.add_pod("v", "192.168.10.2", mac(6), subnet=s)
    c.unroute("192.168.10.2")


def port_security(c: Cluster) -> None:
    _set_port(c, "a.default", port_security=(f"{mac(2).upper()} 10.16.0.2",))
    s = Subnet("dual", "10.40.0.0/16,fd00:40::/112", "10.40.0.1,fd00:40::1")
    c.add_subnet(s)
    c.add_pod("d", "10.40.0.2,fd00:40::2", mac(5), subnet=s, routed=False, node="")
    _set_port(c, "d.default", port_security=(f"{mac(5)} 10.40.0.2/16 fd00:40::2/112",))


def localnet_port(c: Cluster) -> None:
    c.ports["localnet.vlan1"] = PortInfo(
        "localnet.vlan1", "vlan1", ("unknown",), (), {"vendor": VENDOR}
    )


LEGIT: list[Callable[[Cluster], None]] = [
    kept_sts_without_pod,
    dead_sts_pod,
    terminating_pod,
    host_network_pod,
    dead_pod_cleaned,
    ipam_only_attachment,
    ovn_attachment,
    centralized_subnet,
    custom_vpc_overlapping_cidr,
    dual_stack,
    eip_pod,
    vlan_pod_has_no_route,
    localnet_port,
    port_security,
]


@pytest.mark.parametrize("legit", LEGIT, ids=[f.__name__ for f in LEGIT])
def test_legitimate_states_are_not_reported(legit: Callable[[Cluster], None]) -> None:
    c = clean_cluster()
    legit(c)
    report = run(c)
    assert report.settled, report.render()


def test_vm_pods_share_the_vm_address_under_keep_vm_ip() -> None:
    c = clean_cluster()
    vmi = (OwnerReference("kubevirt.io/v1", "VirtualMachineInstance", "vm1", controller=True),)
    for name in ("virt-launcher-vm1-aaaaa", "virt-launcher-vm1-bbbbb"):  # a live migration
        pod = c.add_pod(name, "10.16.0.8", mac(8), objects=False, routed=False, node="")
        c.pods[pod.key] = dataclasses.replace(pod, owner_references=vmi)
    kept_address(c, "vm1", 8, "VirtualMachine")

    assert run(c, Config(enable_keep_vm_ip=True)).settled
    # without keep-vm-ip, each launcher pod is its own owner: the same address twice
    assert KIND_DUPLICATE_ADDRESS in run(c).kinds()


def test_render_groups_by_kind_with_counts() -> None:
    c = clean_cluster()
    orphan_lsp(c)
    c.port("gone2.default", "ovn-default", mac(8), "10.16.0.8", pod="default/gone2")
    orphan_route(c)
    text = run(c).render()
    lines = text.splitlines()
    assert lines[0].startswith("cluster audit: 3 finding(s), 0 pending (checked ")
    assert lines[1] == "orphan-lsp (2):"
    assert lines[2].startswith("  port gone.default: kube-ovn port (default/gone")
    assert lines[3].startswith("  port gone2.default: ")
    assert lines[4] == "orphan-route (1):"
    assert lines[5] == (
        "  route 10.16.0.77: src-ip route via 100.64.0.2 on ovn-cluster: no alive pod has "
        "10.16.0.77"
    )


def test_snapshot_problems_are_reported() -> None:
    snap = dataclasses.replace(clean_cluster().snapshot(), problems=("Pod 'x': field bad",))
    report = audit(snap, CONFIG)
    assert [(f.kind, f.object, f.message) for f in report.findings] == [
        (KIND_MALFORMED, "Pod 'x'", "field bad")
    ]


def test_default_subnet_is_the_helper_default() -> None:
    # guards the builder: the pods of clean_cluster() live in the default subnet
    assert {
        p.annotations["ovn.kubernetes.io/logical_switch"] for p in clean_cluster().pods.values()
    } == {DEFAULT.name}


# --- kept StatefulSet / VM addresses, when their owners were read ----------------------------


def _kept_web_1(c: Cluster) -> None:
    kept_address(c, "web-1", 9, "StatefulSet")


@pytest.mark.parametrize(
    ("statefulsets", "kept"),
    [
        (None, True),  # owners not read: trust the IP CR's podType
        ([StatefulSet("default", "web", replicas=2)], True),
        ([StatefulSet("default", "web", replicas=1)], False),  # scaled below ordinal 1
        ([StatefulSet("default", "web", replicas=2, deletion_timestamp=NOW)], False),
        ([], False),  # the StatefulSet is gone
        ([StatefulSet("other", "web", replicas=2)], False),  # same name, another namespace
    ],
)
def test_kept_statefulset_address_needs_its_statefulset(
    statefulsets: list[StatefulSet] | None, kept: bool
) -> None:
    c = clean_cluster()
    c.statefulsets = statefulsets
    _kept_web_1(c)
    report = run(c)
    if kept:
        assert report.settled, report.render()
    else:
        assert set(report.kinds()) == {KIND_ORPHAN_IP_CR, KIND_ORPHAN_LSP}, report.render()
        assert "scaled below this ordinal" in report.render()


def test_dead_statefulset_pod_keeps_its_address_only_while_the_statefulset_wants_it() -> None:
    c = clean_cluster()
    dead_sts_pod(c)  # web-1, Failed, restartPolicy Never, objects present
    c.statefulsets = [StatefulSet("default", "web", replicas=2)]
    assert run(c).settled
    c.statefulsets = [StatefulSet("default", "web", replicas=1)]
    assert set(run(c).kinds()) == {KIND_ORPHAN_IP_CR, KIND_ORPHAN_LSP}


def test_kept_vm_address_needs_its_vm() -> None:
    c = clean_cluster()
    kept_address(c, "vm1", 8, "VirtualMachine")
    config = Config(enable_keep_vm_ip=True)
    c.vms = [VirtualMachine("default", "vm1")]
    assert run(c, config).settled
    c.vms = [VirtualMachine("default", "vm1", deletion_timestamp=NOW)]
    assert set(run(c, config).kinds()) == {KIND_ORPHAN_IP_CR, KIND_ORPHAN_LSP}
    c.vms = []
    assert "VirtualMachine is gone" in run(c, config).render()


def test_kept_statefulset_pod_terminating_past_its_grace_keeps_its_route() -> None:
    # A scheduled sts pod whose node never confirms the delete: the controller keeps its whole
    # network (no delete runs, as in kube-ovn) while the StatefulSet wants the ordinal, route
    # included; the route is an orphan only once the ordinal is no longer wanted.
    c = clean_cluster()
    pod = c.add_pod("web-1", "10.16.0.10", mac(10), sts="web")
    c.pods["default/web-1"] = dataclasses.replace(
        pod, deletion_timestamp=NOW - timedelta(seconds=60), deletion_grace_period_seconds=30
    )
    c.statefulsets = [StatefulSet("default", "web", replicas=2)]
    assert run(c).settled, run(c).render()
    c.statefulsets = [StatefulSet("default", "web", replicas=1)]
    assert KIND_ORPHAN_ROUTE in run(c).kinds()
