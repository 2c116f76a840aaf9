"""Routing follows every change of the topology after pods were routed: a subnet's gateway type,
a node's join address or registration, a pod re-created on another node, a StatefulSet pod moved
to another subnet, the readiness of a centralized gateway, a malformed Subnet next to sound ones.

Each scenario changes the cluster through the API and then waits, with a deadline, for the
egress of every pod address to be what the topology says (`tests.e2e.routing_state`): exactly
one reroute policy matches a packet from the address to the outside, and it names the join
address of the pod's node (distributed gateway) or of the subnet's gateway node (centralized).
Rows are found by what they match, never by their names. The controller runs with a gc interval
far beyond the test (`FLAGS`), so what converges here converges without a gc pass, unless the
scenario is about gc itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    ROUTED_ANNOTATION,
    SNAT_ANNOTATION,
)
from controller.testing import builders
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import HANDMADE_STS, NODE, get_or_none, running, wait_for
from tests.e2e.routing_state import (
    Snapshot,
    egress,
    egress_becomes,
    gc_finds_nothing,
    gc_passes,
    gc_runs,
    join_ip,
    leftovers,
    make_ready,
    no_routing_rows,
    ready_node,
    reroutes,
    routing_sets_holding,
    stray_sets,
    until,
)
from tests.e2e.workloads import (
    allocated,
    delete_pod,
    gone,
    graceful,
    quiet,
    routed,
    settled,
    statefulset,
    virtual_machine,
)

pytestmark = [pytest.mark.e2e]

NS = "default"
NODE2 = "node2"
NODE2_IP = "172.18.0.3"
#: No periodic gc pass during a test: convergence must come from the events themselves.
FLAGS = ("--gc-interval=3600",)
#: A gc pass every second, for the scenarios about what gc does.
GC_FLAGS = ("--gc-interval=1",)
ROUTER = "ovn-cluster"
FAULTS = "deterministic relist through the emulator's fault injection"
EXTERNAL_GW = {
    "metadata": {"name": "ovn-external-gw-config", "namespace": "kube-system"},
    "data": {"enable-external-gw": "true", "external-gw-addr": "172.56.0.1/16"},
}


# --- building blocks ---------------------------------------------------------------------------


def two_nodes(cluster: Cluster) -> None:
    """node1 (the cluster's) and node2, both Ready (a real API server drops the status of a
    create: it is set through the status subresource, as a kubelet does)."""
    store = cluster.server.store
    store.create("nodes", ready_node(NODE2, NODE2_IP))
    make_ready(store, NODE)
    make_ready(store, NODE2)


def start(cluster: Cluster, start_controller: StartController, *flags: str) -> Controller:
    ctl = running(start_controller(*flags))
    join_ip(cluster.server, NODE)
    join_ip(cluster.server, NODE2)
    return ctl


def make_subnet(ctl: Controller, cluster: Cluster, name: str, cidr: str, **spec: Any) -> None:
    cluster.server.store.create("subnets", builders.subnet(name, cidr, **spec))
    until(lambda: ctl.ipam.has_subnet(name), f"subnet {name} registered")


def add_pod(
    cluster: Cluster,
    name: str,
    node: str,
    subnet: str = "",
    extra: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    grace: int = 0,
) -> dict[str, Any]:
    ann = {LOGICAL_SWITCH_ANNOTATION: subnet} if subnet else {}
    ann.update(extra or {})
    return cluster.server.store.create(
        "pods",
        builders.pod(
            name,
            NS,
            annotations=ann or None,
            node=node,
            owner=owner,
            terminationGracePeriodSeconds=grace,
        ),
    )


def ip_of(cluster: Cluster, name: str) -> str:
    return routed(cluster, name)[IP_ADDRESS_ANNOTATION]


def routed_uid(cluster: Cluster, name: str, uid: str) -> str:
    """The address of pod `name` with `uid` once it is routed."""

    def done() -> str | None:
        obj = get_or_none(cluster.server, "pods", NS, name)
        if obj is None or obj["metadata"]["uid"] != uid:
            return None
        ann = obj["metadata"].get("annotations") or {}
        return ann.get(IP_ADDRESS_ANNOTATION) if ann.get(ROUTED_ANNOTATION) == "true" else None

    return wait_for(done, message=f"pod {name} ({uid}) routed")


def nats_of(cluster: Cluster, ip: str) -> list[tuple[str, str]]:
    from tests.e2e.nbrows import nb_rows

    return [
        (n["type"], n["external_ip"])
        for n in nb_rows(cluster.nb_server.remote, "NAT")
        if n["logical_ip"] == ip
    ]


class PodWatchOutage:
    """While open, the controller's pod informer can neither list nor watch: changes made
    meanwhile reach it in one relist afterwards (a successor already in place of a deleted pod
    is an update of the cached object, not a delete followed by an add)."""

    def __init__(self, cluster: Cluster) -> None:
        self.faults = cluster.emulator.faults

    def __enter__(self) -> PodWatchOutage:
        self.faults.fail_next(None, 503, resource="pods", verb="list")
        self.faults.fail_next(None, 503, resource="pods", verb="watch")
        self.faults.expire_watches("pods")
        return self

    def __exit__(self, *exc: object) -> None:
        self.faults.clear()


# --- gateway type switches ---------------------------------------------------------------------


def test_distributed_to_centralized_moves_every_pod_to_the_gateway(
    cluster: Cluster, start_controller: StartController
) -> None:
    """Pods of a distributed subnet on two nodes each leave through their own node; once the
    subnet is switched to a centralized gateway on node2, both leave through node2 alone, and
    no routing set lists their addresses any more."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    runs = gc_runs(ctl)
    make_subnet(ctl, cluster, "dtc", "10.71.0.0/24", gatewayType="distributed")
    add_pod(cluster, "dtc-a", NODE, "dtc")
    add_pod(cluster, "dtc-b", NODE2, "dtc")
    a, b = ip_of(cluster, "dtc-a"), ip_of(cluster, "dtc-b")
    j1, j2 = join_ip(cluster.server, NODE), join_ip(cluster.server, NODE2)
    remote = cluster.nb_server.remote
    egress_becomes(remote, {a: j1, b: j2}, message="distributed: each pod via its node")

    cluster.server.store.patch(
        "subnets", None, "dtc", {"spec": {"gatewayType": "centralized", "gatewayNode": NODE2}}
    )
    egress_becomes(remote, {a: j2, b: j2}, message="centralized: every pod via node2")
    assert stray_sets(remote, {a: j2, b: j2}) == {}
    settled(cluster, *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


def test_centralized_to_distributed_puts_every_pod_back_on_its_node(
    cluster: Cluster, start_controller: StartController
) -> None:
    """Pods of a centralized subnet leave through the gateway node; once the subnet is switched
    to a distributed gateway, every running pod leaves through its own node again."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    runs = gc_runs(ctl)
    make_subnet(ctl, cluster, "ctd", "10.72.0.0/24", gatewayType="centralized", gatewayNode=NODE2)
    add_pod(cluster, "ctd-a", NODE, "ctd")
    add_pod(cluster, "ctd-b", NODE2, "ctd")
    a, b = ip_of(cluster, "ctd-a"), ip_of(cluster, "ctd-b")
    j1, j2 = join_ip(cluster.server, NODE), join_ip(cluster.server, NODE2)
    remote = cluster.nb_server.remote
    egress_becomes(remote, {a: j2, b: j2}, message="centralized: every pod via node2")

    cluster.server.store.patch("subnets", None, "ctd", {"spec": {"gatewayType": "distributed"}})
    egress_becomes(remote, {a: j1, b: j2}, message="distributed: each pod via its node")
    settled(cluster, *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


# --- pods ---------------------------------------------------------------------------------------


@pytest.mark.emulator_only(FAULTS)
def test_pod_recreated_on_another_node_leaves_nothing_on_the_old_node(
    cluster: Cluster, start_controller: StartController
) -> None:
    """A pod deleted on node1 and re-created under its name on node2 before the controller saw
    the delete (one relist shows only the successor) leaves through node2 alone: nothing of
    node1 still matches its address, nor the old one's."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    runs = gc_runs(ctl)
    add_pod(cluster, "mover", NODE)
    old_ip = ip_of(cluster, "mover")
    j1, j2 = join_ip(cluster.server, NODE), join_ip(cluster.server, NODE2)
    remote = cluster.nb_server.remote
    egress_becomes(remote, {old_ip: j1}, message="mover via node1")

    with PodWatchOutage(cluster):
        cluster.server.store.delete("pods", NS, "mover")
        uid = add_pod(cluster, "mover", NODE2)["metadata"]["uid"]
    new_ip = routed_uid(cluster, "mover", uid)
    egress_becomes(remote, {new_ip: j2}, message="the successor via node2 alone")
    if old_ip != new_ip:
        no_routing_rows(remote, [old_ip])
    settled(cluster, *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


def test_ambiguous_subnet_and_node_names_keep_both_pairs_routed(
    cluster: Cluster, start_controller: StartController
) -> None:
    """Subnet "prod" with a pod on node "db-node1" and subnet "prod-db" with a pod on node
    "node1": each pod leaves through its own node, and still does after gc passes."""
    store = cluster.server.store
    make_ready(store, NODE)
    store.create("nodes", ready_node("db-node1", "172.18.0.10"))
    ctl = running(start_controller(*GC_FLAGS))
    make_subnet(ctl, cluster, "prod", "10.73.0.0/24")
    make_subnet(ctl, cluster, "prod-db", "10.74.0.0/24")
    add_pod(cluster, "p-prod", "db-node1", "prod")
    add_pod(cluster, "p-prod-db", NODE, "prod-db")
    a, b = ip_of(cluster, "p-prod"), ip_of(cluster, "p-prod-db")
    want = {a: join_ip(cluster.server, "db-node1"), b: join_ip(cluster.server, NODE)}
    remote = cluster.nb_server.remote
    egress_becomes(remote, want, message="each pair via its own node")
    gc_passes(ctl, 3)
    assert egress(remote, want) == {ip: [(hop,)] for ip, hop in want.items()}
    settled(cluster, *GC_FLAGS)


def test_user_preset_routed_annotation_is_not_trusted(
    cluster: Cluster, start_controller: StartController
) -> None:
    """A pod whose creator already set `ovn.kubernetes.io/routed: "true"` gets its address
    routed through its node anyway, and the audit finds nothing."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    add_pod(cluster, "prerouted", NODE2, extra={ROUTED_ANNOTATION: "true"})
    ip = allocated(cluster, "prerouted")[IP_ADDRESS_ANNOTATION]
    egress_becomes(
        cluster.nb_server.remote, {ip: join_ip(cluster.server, NODE2)}, message="routed anyway"
    )
    settled(cluster, *FLAGS)
    gc_finds_nothing(ctl)


# --- nodes --------------------------------------------------------------------------------------


def test_node_join_address_change_moves_its_pods_next_hop(
    cluster: Cluster, start_controller: StartController
) -> None:
    """node2's join address changes (its annotation is set to another address of the join
    subnet): its pods' egress and the route to its InternalIP name the new address."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    runs = gc_runs(ctl)
    add_pod(cluster, "jc-a", NODE)
    add_pod(cluster, "jc-b", NODE2)
    a, b = ip_of(cluster, "jc-a"), ip_of(cluster, "jc-b")
    j1, j2 = join_ip(cluster.server, NODE), join_ip(cluster.server, NODE2)
    remote = cluster.nb_server.remote
    egress_becomes(remote, {a: j1, b: j2})

    moved = "100.64.0.200"
    assert moved != j2
    cluster.server.store.patch(
        "nodes", None, NODE2, {"metadata": {"annotations": {IP_ADDRESS_ANNOTATION: moved}}}
    )
    until(lambda: join_ip(cluster.server, NODE2) == moved, "node2 keeps its new join address")
    egress_becomes(remote, {a: j1, b: moved}, message="node2's pods via its new address")
    top = reroutes(Snapshot.read(remote), b, dst=NODE2_IP)
    assert top and top[0].nexthops == (moved,), top
    settled(cluster, *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


@pytest.mark.emulator_only("a node deleted under running pods (a real plane's pod GC)")
def test_node_deleted_and_reregistered_routes_its_pods_again(
    cluster: Cluster, start_controller: StartController
) -> None:
    """node2 is deleted and registers again while its pod keeps running: the pod leaves
    through node2's (new) join address again."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    runs = gc_runs(ctl)
    add_pod(cluster, "rr-b", NODE2)
    b = ip_of(cluster, "rr-b")
    remote = cluster.nb_server.remote
    egress_becomes(remote, {b: join_ip(cluster.server, NODE2)})

    store = cluster.server.store
    store.delete("nodes", None, NODE2)
    until(lambda: cluster.nb.get_port(f"node-{NODE2}") is None, "node2's join port deleted")
    store.create("nodes", ready_node(NODE2, NODE2_IP))
    j2 = join_ip(cluster.server, NODE2)
    egress_becomes(remote, {b: j2}, message="node2's pod via its join address again")
    settled(cluster, *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def handled(
    ctl: Controller, resource: str, key: str, seen: Callable[[dict[str, Any]], bool]
) -> None:
    """Wait until the controller has acted on a change: its cache holds `key` as `seen`
    accepts, every event handler has handled it, then nothing is owed on any queue. Only then
    does "the NB did not change" mean the controller decided so."""
    informer = ctl.informers[resource]
    wait_for(
        lambda: seen(informer.get_indexer().get_by_key(key) or {}),
        message=f"the controller's cache sees the change to {resource} {key}",
    )
    wait_for(informer.notifications_handled, message=f"{resource} handlers ran")
    quiet(ctl)


def test_centralized_gateway_is_a_ready_node_and_moves_when_deleted(
    cluster: Cluster, start_controller: StartController
) -> None:
    """A centralized subnet lists gw-a (NotReady) then gw-b: its pods leave through gw-b. gw-a
    becoming Ready does not move the gateway back; deleting gw-b moves it to gw-a."""
    store = cluster.server.store
    make_ready(store, NODE)
    store.create("nodes", ready_node("gw-a", "172.18.0.11", ready=False))
    store.create("nodes", ready_node("gw-b", "172.18.0.12"))
    ctl = running(start_controller(*FLAGS))
    runs = gc_runs(ctl)
    ja, jb = join_ip(cluster.server, "gw-a"), join_ip(cluster.server, "gw-b")
    make_subnet(
        ctl, cluster, "gws", "10.75.0.0/24", gatewayType="centralized", gatewayNode="gw-a,gw-b"
    )
    add_pod(cluster, "gws-a", NODE, "gws")
    ip = ip_of(cluster, "gws-a")
    remote = cluster.nb_server.remote
    egress_becomes(remote, {ip: jb}, message="via the Ready gateway gw-b")

    make_ready(store, "gw-a")
    handled(ctl, "nodes", "gw-a", _ready)
    assert egress(remote, [ip]) == {ip: [(jb,)]}, "the gateway moved back to gw-a"
    store.delete("nodes", None, "gw-b")
    egress_becomes(remote, {ip: ja}, message="via gw-a once gw-b is gone")
    settled(cluster, *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


def test_centralized_subnet_status_names_the_active_gateway(
    cluster: Cluster, start_controller: StartController
) -> None:
    """kube-ovn v1.8 records a centralized subnet's active gateway node in
    `status.activateGateway`, the Ready node its pods leave through."""
    store = cluster.server.store
    make_ready(store, NODE)
    store.create("nodes", ready_node("st-a", "172.18.0.13", ready=False))
    store.create("nodes", ready_node("st-b", "172.18.0.14"))
    ctl = running(start_controller(*FLAGS))
    make_subnet(
        ctl, cluster, "sts-gw", "10.76.0.0/24", gatewayType="centralized", gatewayNode="st-a,st-b"
    )

    def active() -> str:
        obj = get_or_none(cluster.server, "subnets", None, "sts-gw") or {}
        return str((obj.get("status") or {}).get("activateGateway") or "")

    until(lambda: active() == "st-b", "status.activateGateway is st-b")


# --- StatefulSet pod moved to another subnet ----------------------------------------------------


@pytest.mark.emulator_only(f"{HANDMADE_STS}; {FAULTS}")
def test_statefulset_pod_moved_to_another_subnet_leaves_no_old_rows(
    cluster: Cluster, start_controller: StartController
) -> None:
    """A StatefulSet's SNAT pod is replaced by one on another subnet before the controller saw
    the delete (one relist): the old address has no reroute, set entry or NAT rule left, and
    the new one is routed and NATed."""
    store = cluster.server.store
    two_nodes(cluster)
    store.create("configmaps", EXTERNAL_GW)
    ctl = start(cluster, start_controller, "--enable-eip-snat=true", *FLAGS)
    runs = gc_runs(ctl)
    make_subnet(ctl, cluster, "moved-to", "10.77.0.0/24")
    owner = statefulset(cluster, "mv", 1, template_annotations={SNAT_ANNOTATION: "172.56.0.210"})
    add_pod(cluster, "mv-0", NODE, extra={SNAT_ANNOTATION: "172.56.0.210"}, owner=owner)
    old_ip = ip_of(cluster, "mv-0")
    remote = cluster.nb_server.remote
    egress_becomes(remote, {old_ip: "172.56.0.1"})
    until(lambda: ("snat", "172.56.0.210") in nats_of(cluster, old_ip), "old SNAT in place")

    store.patch(
        "statefulsets",
        NS,
        "mv",
        {
            "spec": {
                "template": {"metadata": {"annotations": {LOGICAL_SWITCH_ANNOTATION: "moved-to"}}}
            }
        },
    )
    with PodWatchOutage(cluster):
        store.delete("pods", NS, "mv-0")
        uid = add_pod(
            cluster,
            "mv-0",
            NODE2,
            "moved-to",
            extra={SNAT_ANNOTATION: "172.56.0.210"},
            owner=owner,
        )["metadata"]["uid"]
    new_ip = routed_uid(cluster, "mv-0", uid)
    assert new_ip.startswith("10.77.0."), new_ip
    egress_becomes(remote, {new_ip: "172.56.0.1"})
    no_routing_rows(remote, [old_ip])
    until(lambda: nats_of(cluster, old_ip) == [], "the old address's NAT removed")
    assert ("snat", "172.56.0.210") in nats_of(cluster, new_ip)
    settled(cluster, "--enable-eip-snat=true", *FLAGS)
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


def test_v18_subnet_wide_routes_are_migrated_at_start(
    cluster: Cluster, start_controller: StartController
) -> None:
    """A centralized subnet as kube-ovn v1.8 routed it (a src-ip static route of its whole CIDR
    via each gateway node's join address, ECMP; kube-ovn v1.8.18 pkg/controller/subnet.go
    reconcileGateway through pkg/ovs/ovn-nbctl.go AddStaticRoute) is adopted by a controller
    start: the subnet-wide routes go, and the pods leave through the gateway's reroute alone."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    make_subnet(
        ctl, cluster, "legacy", "10.84.0.0/24", gatewayType="centralized", gatewayNode=NODE2
    )
    add_pod(cluster, "legacy-a", NODE, "legacy")
    add_pod(cluster, "legacy-b", NODE2, "legacy")
    a, b = ip_of(cluster, "legacy-a"), ip_of(cluster, "legacy-b")
    j1, j2 = join_ip(cluster.server, NODE), join_ip(cluster.server, NODE2)
    remote = cluster.nb_server.remote
    egress_becomes(remote, {a: j2, b: j2})
    ctl.stop()
    for hop in (j1, j2):
        nbctl(
            remote, "--ecmp", "--policy=src-ip", "lr-route-add", "ovn-cluster", "10.84.0.0/24", hop
        )
    assert subnet_routes(remote, "10.84.0.0/24"), "the v1.8 routes are in place"

    ctl = start(cluster, start_controller, *FLAGS)
    until(lambda: not subnet_routes(remote, "10.84.0.0/24"), "the v1.8 subnet-wide routes gone")
    egress_becomes(remote, {a: j2, b: j2}, message="via the gateway's reroute alone")
    settled(cluster, *FLAGS)
    gc_finds_nothing(ctl)


def nbctl(remote: str, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["ovn-nbctl", f"--db={remote}", "--timeout=10", *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=15,
    ).stdout


def subnet_routes(remote: str, cidr: str) -> list[dict[str, Any]]:
    """The src-ip static routes of `cidr` on the cluster router."""
    from tests.e2e.nbrows import nb_rows

    return [
        r
        for r in nb_rows(remote, "Logical_Router_Static_Route")
        if r.get("ip_prefix") == cidr and r.get("policy") in ("src-ip", ["src-ip"])
    ]


@pytest.mark.emulator_only("hand-made KubeVirt launcher pods on a node without a kubelet")
def test_vm_live_migration_keeps_the_targets_nat_and_reroute(
    cluster: Cluster, start_controller: StartController
) -> None:
    """Under --keep-vm-ip a VM with an SNAT address live-migrates: its target launcher pod on
    node2 runs beside the source on node1 with the VM's address; once the source launcher is
    deleted (kubelet-confirmed), the VM keeps its port, its SNAT rule and its reroute to the
    external gateway. The inspection is off, so a port lost on the way is not re-made."""
    flags = ("--keep-vm-ip=true", "--enable-eip-snat=true", "--inspect-interval=3600", *FLAGS)
    store = cluster.server.store
    two_nodes(cluster)
    store.create("configmaps", EXTERNAL_GW)
    graceful(cluster)
    ctl = start(cluster, start_controller, *flags)
    owner = virtual_machine(cluster, "vm-live")
    snat = {SNAT_ANNOTATION: "172.56.0.220"}
    add_pod(cluster, "virt-launcher-vm-live-src", NODE, extra=snat, owner=owner, grace=1)
    ip = ip_of(cluster, "virt-launcher-vm-live-src")
    add_pod(cluster, "virt-launcher-vm-live-dst", NODE2, extra=snat, owner=owner, grace=1)
    assert ip_of(cluster, "virt-launcher-vm-live-dst") == ip
    remote = cluster.nb_server.remote
    egress_becomes(remote, {ip: "172.56.0.1"})

    delete_pod(cluster, "virt-launcher-vm-live-src")
    gone(cluster, "pods", "virt-launcher-vm-live-src", NS)
    quiet(ctl)
    assert cluster.nb.get_port(f"vm-live.{NS}") is not None, "the VM's port was deleted"
    egress_becomes(remote, {ip: "172.56.0.1"}, message="the VM keeps its reroute")
    assert ("snat", "172.56.0.220") in nats_of(cluster, ip)
    settled(cluster, *flags)
    gc_finds_nothing(ctl)


# --- robustness ---------------------------------------------------------------------------------


def subnet_warnings(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.server.store.list("events", None)
        if e["involvedObject"].get("kind") == "Subnet"
        and e["involvedObject"]["name"] == name
        and e["type"] == "Warning"
    ]


def _inject_orphan(remote: str, set_name: str, address: str) -> None:
    nbctl(remote, "add", "Address_Set", set_name, "addresses", address)


@pytest.mark.emulator_only("a Subnet the real API server's schema would refuse")
@pytest.mark.routing_drift_expected("plants orphan set entries for routing gc to remove")
def test_malformed_subnet_does_not_stop_routing_gc_of_the_others(
    cluster: Cluster, start_controller: StartController
) -> None:
    """With a routed subnet whose object became malformed in the cache, an orphan entry in a
    sound subnet's routing set is still collected, as it is without the malformed one."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *GC_FLAGS)
    make_subnet(ctl, cluster, "warped", "10.78.0.0/24")
    make_subnet(ctl, cluster, "sound", "10.79.0.0/24")
    add_pod(cluster, "warped-a", NODE, "warped")
    add_pod(cluster, "sound-a", NODE, "sound")
    ip_of(cluster, "warped-a")
    sound = ip_of(cluster, "sound-a")
    remote = cluster.nb_server.remote
    egress_becomes(remote, {sound: join_ip(cluster.server, NODE)})
    (set_name,) = routing_sets_holding(Snapshot.read(remote), sound)

    # positive control: an orphan entry goes while every subnet is sound
    _inject_orphan(remote, set_name, "10.79.0.250")
    until(lambda: not leftovers(remote, ["10.79.0.250"]), "orphan collected (control)", timeout=20)

    # a string where kube-ovn wants a list: the subnet controller refuses it with a Warning
    cluster.server.store.patch("subnets", None, "warped", {"spec": {"excludeIps": "10.78.0.9"}})
    until(lambda: bool(subnet_warnings(cluster, "warped")), "the malformed subnet refused")
    _inject_orphan(remote, set_name, "10.79.0.251")
    until(
        lambda: not leftovers(remote, ["10.79.0.251"]),
        "orphan collected beside the malformed subnet",
        timeout=20,
    )
    assert egress(remote, [sound]) == {sound: [(join_ip(cluster.server, NODE),)]}


def test_pod_delete_with_its_subnet_gone_finishes(
    cluster: Cluster, start_controller: StartController
) -> None:
    """A pod deleted right after its Subnet: its port, IP CR and routing rows go, and no delete
    is left pending. (This passes on main too: the Subnet's delete drops it from IPAM before the
    pod's delete is retried; the endless re-queue needs IPAM to keep a Subnet the cache lost,
    which nothing outside the controller can arrange.)"""
    ctl = running(start_controller(*FLAGS))
    make_subnet(ctl, cluster, "fleeting", "10.80.0.0/24")
    add_pod(cluster, "fleeting-a", NODE, "fleeting")
    ip = ip_of(cluster, "fleeting-a")
    store = cluster.server.store
    store.delete("subnets", None, "fleeting")
    store.delete("pods", NS, "fleeting-a")
    until(lambda: cluster.nb.get_port(f"fleeting-a.{NS}") is None, "the pod's port deleted")
    until(
        lambda: get_or_none(cluster.server, "ips", None, f"fleeting-a.{NS}") is None,
        "the pod's IP CR deleted",
    )
    no_routing_rows(cluster.nb_server.remote, [ip])
    pods = ctl.pod_controller
    assert pods is not None
    until(lambda: not pods.pending_deletes(), "no delete pending")
    gc_finds_nothing(ctl)
    assert get_or_none(cluster.server, "pods", NS, "fleeting-a") is None


# --- churn --------------------------------------------------------------------------------------

CHURN_PODS = 10
CHURN_ROUNDS = 20


@pytest.mark.emulator_only("200 pod creations: the real plane's variant would not keep it quick")
def test_churn_with_the_same_names_over_two_nodes_converges_without_gc(
    cluster: Cluster, start_controller: StartController
) -> None:
    """20 rounds of deleting every pod and re-creating it at once under its name on the other
    node: when the last pod is routed, the audit is clean within seconds and every pod leaves
    through its own node alone, with no gc pass run meanwhile."""
    two_nodes(cluster)
    ctl = start(cluster, start_controller, *FLAGS)
    runs = gc_runs(ctl)
    store = cluster.server.store
    names = [f"churn-{i}" for i in range(CHURN_PODS)]
    hops = {NODE: join_ip(cluster.server, NODE), NODE2: join_ip(cluster.server, NODE2)}
    placed: dict[str, tuple[str, str]] = {}  # name -> (uid, node)
    for round_ in range(CHURN_ROUNDS):
        for name in placed:
            store.delete("pods", NS, name)
        for i, name in enumerate(names):
            node = (NODE, NODE2)[(round_ + i) % 2]
            placed[name] = (add_pod(cluster, name, node)["metadata"]["uid"], node)
        ips = {name: routed_uid(cluster, name, uid) for name, (uid, _) in placed.items()}
    settled_within(cluster, 10.0, *FLAGS)
    want = {ips[name]: hops[node] for name, (_, node) in placed.items()}
    assert egress(cluster.nb_server.remote, want) == {ip: [(hop,)] for ip, hop in want.items()}
    assert gc_runs(ctl) == runs
    gc_finds_nothing(ctl)


def settled_within(cluster: Cluster, timeout: float, *flags: str) -> None:
    """`check --strict` is clean within `timeout` seconds (re-run until then)."""
    from tests.e2e.helpers import audit_clean

    wait_for(
        lambda: audit_clean(cluster.argv(*flags)),
        timeout=timeout,
        message="check --strict clean",
        interval=0.3,
    )
