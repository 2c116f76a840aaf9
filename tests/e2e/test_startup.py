"""Start-up and the minimal support controllers against the emulator and a real NB database."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import pytest

from controller.app import Controller
from controller.config import parse_args
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION,
    EXCLUDE_IPS_ANNOTATION,
    GATEWAY_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
)
from controller.ovn.api import OvnTimeoutError
from controller.ovn.impl_idl import OvsdbappNbClient
from tests.e2e.conftest import Cluster, StartController, launch_controller
from tests.e2e.helpers import (
    NODE,
    annotations_of,
    annotations_once,
    get_or_none,
    http_get,
    node,
    running,
    wait_for,
)
from tests.e2e.workloads import lsp

pytestmark = pytest.mark.e2e


def test_bootstrap_support_controllers_and_probes(
    cluster: Cluster, start_controller: StartController
) -> None:
    server, store = cluster.server, cluster.server.store
    store.create("namespaces", {"metadata": {"name": "team-a"}})
    ctl = running(start_controller())

    # default Vpc with its status, both subnets, their switches attached to the router
    vpc = store.get("vpcs", None, "ovn-cluster")
    assert vpc["status"]["router"] == "ovn-cluster"
    assert vpc["status"]["defaultLogicalSwitch"] == "ovn-default"
    assert vpc["status"]["default"] is True
    default = store.get("subnets", None, "ovn-default")
    assert default["spec"]["cidrBlock"] == "10.16.0.0/16"
    assert default["spec"]["default"] is True
    assert "10.16.0.1" in default["spec"]["excludeIps"]
    join = store.get("subnets", None, "join")
    assert join["spec"]["cidrBlock"] == "100.64.0.0/16"
    wait_for(
        lambda: {"ovn-default", "join"} <= set(cluster.nb.list_logical_switches()),
        message="default and join switches",
    )
    for switch in ("ovn-default", "join"):
        port = wait_for(partial(cluster.nb.get_port, f"{switch}-ovn-cluster"))
        assert port.addresses == ("router",)

    # namespaces use the default subnet
    for ns in ("default", "team-a"):
        ann = wait_for(
            partial(annotations_once, server, "namespaces", None, ns, LOGICAL_SWITCH_ANNOTATION),
            message=f"namespace {ns} annotated",
        )
        assert ann[LOGICAL_SWITCH_ANNOTATION] == "ovn-default"
        assert ann[CIDR_ANNOTATION] == "10.16.0.0/16"
        assert ann[EXCLUDE_IPS_ANNOTATION] == "10.16.0.1"

    # the node got a join address, a port and an IP CR
    node_ann = annotations_of(server, "nodes", None, NODE)
    assert node_ann[ALLOCATED_ANNOTATION] == "true"
    assert node_ann[LOGICAL_SWITCH_ANNOTATION] == "join"
    assert node_ann[CIDR_ANNOTATION] == "100.64.0.0/16"
    assert node_ann[GATEWAY_ANNOTATION] == "100.64.0.1"
    node_ip, node_mac = node_ann[IP_ADDRESS_ANNOTATION], node_ann[MAC_ADDRESS_ANNOTATION]
    assert node_ip == "100.64.0.2"  # lowest free after the excluded gateway
    port = lsp(cluster, f"node-{NODE}")
    assert port.switch == "join"
    assert port.addresses == (f"{node_mac.lower()} {node_ip}",)
    ip_cr = store.get("ips", None, f"node-{NODE}")
    assert ip_cr["spec"]["ipAddress"] == node_ip and ip_cr["spec"]["namespace"] == ""
    assert ctl.ipam.get_ip_owner(node_ip, "join") == f"node-{NODE}"

    # subnet status follows IPAM usage
    status = wait_for(
        lambda: (
            store.get("subnets", None, "join").get("status", {}).get("v4usingIPs") == 1
            and store.get("subnets", None, "join")["status"]
        )
    )
    assert status["v4availableIPs"] == 65534 - 2  # minus gateway and the node

    # optional API groups are discovered: the emulator serves multus and kubevirt
    assert {"nads", "vms", "statefulsets", "configmaps"} <= set(ctl.informers)
    assert not ctl.cluster.api_group_exists("nosuch.example.io", "v1")

    # probes and metrics
    base = f"http://127.0.0.1:{ctl.metrics_port}"
    assert http_get(f"{base}/readyz")[0] == 200
    assert http_get(f"{base}/healthz")[0] == 200
    code, text = http_get(f"{base}/metrics")
    assert code == 200
    for needle in (
        'subnet_available_ip_count{protocol="IPv4",subnet_cidr="100.64.0.0/16",subnet_name="join"}',
        'subnet_used_ip_count{protocol="IPv4",subnet_cidr="100.64.0.0/16",subnet_name="join"} 1.0',
        'workqueue_adds_total{name="AddPod"}',
        'workqueue_depth{name="UpdatePodSecurity"}',
        "rest_client_requests_total{",
        "ovs_client_request_latency_milliseconds_bucket{",
    ):
        assert needle in text, needle


def test_subnet_namespace_and_node_lifecycle(
    cluster: Cluster, start_controller: StartController
) -> None:
    server, store = cluster.server, cluster.server.store
    store.create("namespaces", {"metadata": {"name": "team-b"}})
    ctl = running(start_controller())

    store.create(
        "subnets",
        {
            "metadata": {"name": "sub-b"},
            "spec": {"cidrBlock": "10.77.0.0/24", "namespaces": ["team-b"]},
        },
    )
    # formatted (gateway defaulted and excluded), registered, switched, and the namespace bound
    spec = wait_for(
        lambda: (
            store.get("subnets", None, "sub-b")["spec"].get("gateway")
            and store.get("subnets", None, "sub-b")["spec"]
        )
    )
    assert spec["gateway"] == "10.77.0.1" and spec["excludeIps"] == ["10.77.0.1"]
    assert spec["provider"] == "ovn" and spec["vpc"] == "ovn-cluster"
    wait_for(lambda: "sub-b" in cluster.nb.list_logical_switches(), message="switch sub-b")
    assert ctl.ipam.has_subnet("sub-b")
    wait_for(
        lambda: (
            annotations_of(server, "namespaces", None, "team-b").get(LOGICAL_SWITCH_ANNOTATION)
            == "sub-b"
        ),
        message="team-b bound to sub-b",
    )
    assert annotations_of(server, "namespaces", None, "team-b")[CIDR_ANNOTATION] == "10.77.0.0/24"
    # the conditions and the usage counters are two writes of the status, in either order
    status = wait_for(
        lambda: (
            (st := store.get("subnets", None, "sub-b").get("status") or {})
            and "v4availableIPs" in st
            and st
        ),
        message="sub-b's addresses counted in its status",
    )
    assert status["v4availableIPs"] == 253 and status["v4usingIPs"] == 0

    # deleting the subnet unbinds the namespace and removes the switch
    store.delete("subnets", None, "sub-b")
    wait_for(
        lambda: (
            annotations_of(server, "namespaces", None, "team-b").get(LOGICAL_SWITCH_ANNOTATION)
            == "ovn-default"
        ),
        message="team-b back on ovn-default",
    )
    wait_for(lambda: "sub-b" not in cluster.nb.list_logical_switches(), message="switch gone")
    assert not ctl.ipam.has_subnet("sub-b")

    # a second node is allocated; deleting it releases everything
    store.create("nodes", node("node2", "172.18.0.3"))
    ip = wait_for(lambda: annotations_of(server, "nodes", None, "node2").get(IP_ADDRESS_ANNOTATION))
    assert ip != annotations_of(server, "nodes", None, NODE)[IP_ADDRESS_ANNOTATION]
    lsp(cluster, "node-node2")
    store.delete("nodes", None, "node2")
    wait_for(lambda: cluster.nb.get_port("node-node2") is None, message="node port deleted")
    wait_for(lambda: get_or_none(server, "ips", None, "node-node2") is None, message="IP CR gone")
    assert ctl.ipam.get_pod_address("node-node2") == []

    # a malformed subnet is a Warning Event on it (cluster-scoped: namespace "default") and is
    # not retried; fixing its spec is an update, which converges it
    store.create("subnets", {"metadata": {"name": "sub-bad"}, "spec": {"cidrBlock": "10.78.0/24"}})
    [event] = wait_for(
        lambda: [
            e
            for e in store.list("events", "default")
            if e["involvedObject"]["name"] == "sub-bad"
            and e["reason"] == "ValidateLogicalSwitchFailed"
        ],
        message="ValidateLogicalSwitchFailed event",
    )
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Subnet"
    assert event["source"] == {"component": "ovn-controller", "host": NODE}  # KUBE_NODE_NAME
    assert ctl.subnet_controller is not None
    assert ctl.subnet_controller.queues.add.num_requeues("sub-bad") == 0
    assert not ctl.ipam.has_subnet("sub-bad")
    store.patch("subnets", None, "sub-bad", {"spec": {"cidrBlock": "10.78.0.0/24"}})
    wait_for(lambda: "sub-bad" in cluster.nb.list_logical_switches(), message="switch sub-bad")


def test_support_controllers_can_be_switched_off(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(
        start_controller(
            "--enable-subnet-controller=false",
            "--enable-namespace-controller=false",
            "--enable-node-controller=false",
        )
    )
    assert (ctl.subnet_controller, ctl.namespace_controller, ctl.node_controller) == (
        None,
        None,
        None,
    )
    # bootstrap still ran and IPAM knows the subnets, but nobody annotates namespaces or nodes
    assert ctl.ipam.has_subnet("ovn-default") and ctl.ipam.has_subnet("join")
    wait_for(
        lambda: {"ovn-default", "join"} <= set(cluster.nb.list_logical_switches()),
        message="default and join switches",
    )
    assert LOGICAL_SWITCH_ANNOTATION not in annotations_of(
        cluster.server, "namespaces", None, "default"
    )
    assert ALLOCATED_ANNOTATION not in annotations_of(cluster.server, "nodes", None, NODE)
    assert ctl.registry.get_sample_value("workqueue_adds_total", {"name": "AddNamespace"}) is None


def test_the_load_scope_spans_caches_ipam_and_gc_and_ends_before_the_workers(
    cluster: Cluster,
) -> None:
    # the process pauses the garbage collector in it and freezes its heap after it
    # (controller.runtime.pygc): entered before the informers run, left once the caches are
    # loaded and the start-up's addresses held, before any worker starts
    store = cluster.server.store
    held = {
        "metadata": {
            "name": "kept",
            "namespace": "default",
            "annotations": {
                ALLOCATED_ANNOTATION: "true",
                LOGICAL_SWITCH_ANNOTATION: "ovn-default",
                IP_ADDRESS_ANNOTATION: "10.16.0.9",
                MAC_ADDRESS_ANNOTATION: "00:00:00:00:00:09",
                CIDR_ANNOTATION: "10.16.0.0/16",
                GATEWAY_ANNOTATION: "10.16.0.1",
            },
        },
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "i"}]},
    }
    store.create("pods", held)
    seen: list[tuple[str, bool, bool, int]] = []
    holder: list[Controller] = []

    def observe(moment: str) -> None:
        ctl = holder[0]
        synced = all(i.has_synced() for i in ctl.informers.values())
        addresses = len(ctl.ipam.get_pod_address("default/kept"))
        seen.append((moment, ctl.workers_started.is_set(), synced, addresses))

    @contextmanager
    def scope() -> Iterator[None]:
        observe("enter")
        yield
        observe("exit")

    env = {"POD_NAME": "controller-a", "KUBE_NAMESPACE": "kube-system", "KUBE_NODE_NAME": NODE}
    ctl = Controller(
        parse_args(cluster.argv(), env), startup_wait=10.0, status_delay=0.1, load_scope=scope
    )
    holder.append(ctl)
    try:
        running(ctl.start())
        assert seen == [("enter", False, False, 0), ("exit", False, True, 1)]
    finally:
        ctl.stop()


@pytest.mark.emulator_only("the NB side is the same on both planes")
def test_the_nb_dump_comes_in_on_its_own_thread(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the election and the informers' lists run while the dump is held up; the bootstrap
    # waits for it, and until then the replica says why it is not ready
    entered, release = threading.Event(), threading.Event()
    real_sync = OvsdbappNbClient._sync

    def held(self: OvsdbappNbClient) -> None:
        entered.set()
        release.wait(30)
        real_sync(self)

    monkeypatch.setattr(OvsdbappNbClient, "_sync", held)
    ctl = launch_controller(cluster)
    try:
        wait_for(entered.is_set, message="the dump started")
        assert ctl.ready() == (False, "OVN NB: initial sync")
        wait_for(
            lambda: ctl.leading.is_set() and all(i.has_synced() for i in ctl.informers.values()),
            message="leading, caches synced",
        )
        assert not ctl.workers_started.is_set()
        release.set()
        running(ctl)
        assert ctl.ready() == (True, "ok")
    finally:
        release.set()
        ctl.stop()


@pytest.mark.emulator_only("the NB side is the same on both planes")
def test_a_dump_that_does_not_come_ends_the_process(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(self: OvsdbappNbClient) -> None:
        raise OvnTimeoutError("cannot connect to OVN NB within 1s")

    monkeypatch.setattr(OvsdbappNbClient, "_sync", fails)
    ctl = launch_controller(cluster)
    try:
        assert ctl.wait(30) == 1
        assert not ctl.workers_started.is_set()
    finally:
        ctl.stop()
