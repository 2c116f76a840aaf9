"""Egress on the wire after the topology changed under routed pods: which node a pod's packets to
the outside leave through, and with which source address, once a subnet switches its gateway
type, a pod is re-created under its name on another node, or a node's join address changes.

Each node's namespace owns the same "outside" address (IPv4 and IPv6) with a TCP listener that
answers "<node> <source address it saw>", so one connection tells the node the packet left
through and that it still carried the pod's own address. After each change the test polls,
with a deadline, until every pod's answer is the one the topology calls for.

The module runs its own bed (emulator, NB, controller with a gc interval far beyond the tests,
data plane), so that what it changes (a gateway, a node's join address) cannot leak into other
packet tests, and so that whatever converges here converges without a gc pass.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from controller.sandbox.processes import stop_process
from controller.testing import builders
from controller.testing import wait as waiting
from tests.dataplane.helpers import DUAL_STACK, NODE2, Net, WiredPod, open_net
from tests.e2e.conftest import launch_controller, open_cluster
from tests.e2e.helpers import NODE, get_or_none, running, wait_for
from tests.e2e.routing_state import OUTSIDE, gc_runs

pytestmark = pytest.mark.timeout(300)

FLAGS = ("--gc-interval=3600", *DUAL_STACK)
PORT = 8001
NS = "default"
#: How long the data plane may take to follow a change (NB write, northd, ovn-controller).
CONVERGE = 20.0
LISTENER = """
import socket, sys
name, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((address, port))
s.listen(16)
sys.stdout.write("ready\\n")
sys.stdout.flush()
while True:
    c, peer = s.accept()
    c.sendall(f"{name} {peer[0]}".encode())
    c.close()
"""


@pytest.fixture(scope="module")
def bed() -> Iterator[Net]:
    with open_cluster() as cluster, tempfile.TemporaryDirectory(prefix="dpr") as d:
        ctl = running(launch_controller(cluster, *FLAGS))
        try:
            with open_net(cluster, ctl, Path(d)) as net:
                yield net
        finally:
            ctl.stop()


@contextlib.contextmanager
def outside(net: Net) -> Iterator[None]:
    """Every node's namespace owns the outside addresses and answers who and whom it saw."""
    procs: list[subprocess.Popen[bytes]] = []
    added: list[tuple[str, str]] = []
    try:
        for name in (NODE, NODE2):
            netns = net.node_netns[name]
            for version, addr in OUTSIDE.items():
                plen = 32 if version == 4 else 128
                net.dp.exec_in(netns, ["ip", "addr", "add", f"{addr}/{plen}", "dev", "lo"])
                added.append((netns, f"{addr}/{plen}"))
                argv = (name, addr, str(PORT))
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", netns, sys.executable, "-c", LISTENER, *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
                procs.append(proc)
                assert proc.stdout is not None
                assert proc.stdout.readline().strip() == b"ready", f"listener in {netns}"
        yield
    finally:
        for proc in procs:
            stop_process(proc)
        for netns, cidr in added:
            with contextlib.suppress(Exception):
                net.dp.exec_in(netns, ["ip", "addr", "del", cidr, "dev", "lo"])


def leaves(net: Net, pod: WiredPod, version: int) -> str:
    """ "<node> <source>" of one connection from `pod` to the outside ("" without an answer)."""
    answer = net.dp.tcp_request(pod.netns, OUTSIDE[version], PORT, wait=1.0)
    if not answer:
        return ""
    node, _, source = answer.decode().partition(" ")
    return f"{node} {source.removeprefix('::ffff:')}"


def leaves_through(net: Net, want: dict[tuple[str, int], tuple[WiredPod, str]]) -> None:
    """Poll until every (pod, version) leaves through the node `want` names with the pod's own
    address as source; fail with what was seen at the deadline."""
    expected = {key: f"{node} {pod.ip(key[1])}" for key, (pod, node) in want.items()}

    def seen() -> dict[tuple[str, int], str]:
        return {key: leaves(net, pod, key[1]) for key, (pod, _) in want.items()}

    got: dict[tuple[str, int], str] = {}

    def converged() -> bool:
        nonlocal got
        got = seen()
        return got == expected

    try:
        waiting.wait_for(converged, CONVERGE, "egress converged", interval=0.05)
    except waiting.WaitTimeout:
        raise AssertionError(f"egress (node source) seen {got}, want {expected}") from None


def both(pod: WiredPod, node: str) -> dict[tuple[str, int], tuple[WiredPod, str]]:
    return {(pod.name, 4): (pod, node), (pod.name, 6): (pod, node)}


def make_subnet(net: Net, name: str, cidr: str, **spec: Any) -> None:
    assert net.ctl is not None
    net.cluster.server.store.create("subnets", builders.subnet(name, cidr, **spec))
    ctl = net.ctl
    wait_for(lambda: ctl.ipam.has_subnet(name), message=f"subnet {name} registered")


def on(subnet: str) -> dict[str, str]:
    return {LOGICAL_SWITCH_ANNOTATION: subnet}


def test_distributed_to_centralized_egress_moves_to_the_gateway_node(bed: Net) -> None:
    """Pods of a distributed subnet on node1 and node2 leave through their own nodes; after
    the subnet switches to a centralized gateway on node2 both leave through node2, with
    their own source addresses."""
    assert bed.ctl is not None
    runs = gc_runs(bed.ctl)
    make_subnet(bed, "eg-dtc", "10.81.0.0/24,fd00:81::/120", gatewayType="distributed")
    a = bed.create("eg-dtc-a", node=NODE, annotations=on("eg-dtc"))
    b = bed.create("eg-dtc-b", node=NODE2, annotations=on("eg-dtc"))
    with outside(bed):
        leaves_through(bed, {**both(a, NODE), **both(b, NODE2)})
        bed.cluster.server.store.patch(
            "subnets",
            None,
            "eg-dtc",
            {"spec": {"gatewayType": "centralized", "gatewayNode": NODE2}},
        )
        leaves_through(bed, {**both(a, NODE2), **both(b, NODE2)})
    assert gc_runs(bed.ctl) == runs


def test_centralized_to_distributed_egress_returns_to_each_node(bed: Net) -> None:
    """Pods of a subnet centralized on node2 all leave through node2; after the subnet
    switches to distributed each leaves through its own node again."""
    assert bed.ctl is not None
    runs = gc_runs(bed.ctl)
    make_subnet(
        bed, "eg-ctd", "10.82.0.0/24,fd00:82::/120", gatewayType="centralized", gatewayNode=NODE2
    )
    a = bed.create("eg-ctd-a", node=NODE, annotations=on("eg-ctd"))
    b = bed.create("eg-ctd-b", node=NODE2, annotations=on("eg-ctd"))
    with outside(bed):
        leaves_through(bed, {**both(a, NODE2), **both(b, NODE2)})
        bed.cluster.server.store.patch(
            "subnets", None, "eg-ctd", {"spec": {"gatewayType": "distributed"}}
        )
        leaves_through(bed, {**both(a, NODE), **both(b, NODE2)})
    assert gc_runs(bed.ctl) == runs


def test_pod_recreated_on_another_node_leaves_through_the_new_node(bed: Net) -> None:
    """A pod force-deleted on node1 and re-created under its name on node2 while the
    controller's pod watch is down (one relist shows only the successor) leaves through
    node2 with its own address."""
    assert bed.ctl is not None
    runs = gc_runs(bed.ctl)
    old = bed.create("eg-mover", node=NODE)
    with outside(bed):
        leaves_through(bed, both(old, NODE))
    store = bed.cluster.server.store
    faults = bed.cluster.emulator.faults
    faults.fail_next(None, 503, resource="pods", verb="list")
    faults.fail_next(None, 503, resource="pods", verb="watch")
    faults.expire_watches("pods")
    try:
        store.delete("pods", NS, "eg-mover", grace_period_seconds=0)
        created = store.create(
            "pods", builders.pod("eg-mover", NS, node=NODE2, terminationGracePeriodSeconds=0)
        )
    finally:
        faults.clear()
    new = bed.started("eg-mover", uid=created["metadata"]["uid"])
    with outside(bed):
        leaves_through(bed, both(new, NODE2))
    assert gc_runs(bed.ctl) == runs


def test_node_join_address_change_egress_follows(bed: Net) -> None:
    """node2's join address changes (its annotation names other join-subnet addresses and its
    ovn0 is configured with them, as the CNI daemon does on start): node2's pod leaves through
    node2 again, with its own address."""
    assert bed.ctl is not None
    runs = gc_runs(bed.ctl)
    pod = bed.create("eg-joiner", node=NODE2)
    with outside(bed):
        leaves_through(bed, both(pod, NODE2))
    moved = "100.64.0.201,fd00:100:64::c9"
    store = bed.cluster.server.store
    store.patch("nodes", None, NODE2, {"metadata": {"annotations": {IP_ADDRESS_ANNOTATION: moved}}})

    def taken() -> bool:
        obj = get_or_none(bed.cluster.server, "nodes", None, NODE2) or {}
        ann = (obj.get("metadata") or {}).get("annotations") or {}
        port = bed.cluster.nb.get_port(f"node-{NODE2}")
        return (
            ann.get(IP_ADDRESS_ANNOTATION) == moved
            and port is not None
            and ("100.64.0.201" in " ".join(port.addresses))
        )

    wait_for(taken, message="node2's new join address on its port")
    bed.cni.unwire_node(NODE2)
    bed.wire_node(NODE2)
    with outside(bed):
        leaves_through(bed, both(pod, NODE2))
    assert gc_runs(bed.ctl) == runs
