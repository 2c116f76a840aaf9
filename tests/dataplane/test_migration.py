"""The migration from kube-ovn v1.8's per-pod src-ip static routes to router policies, on the wire.

The NB starts as kube-ovn v1.8 (and this controller until now) left it: every routed pod has a
src-ip static route `<pod ip> -> <its node's join ip>` on `ovn-cluster` and there are no routing
policies or address sets (written directly here, after a first controller run wired the pods
and then stopped). A controller is started on that NB while a prober keeps sending packets
along every path that works under v1.8 (pod -> the outside through its own node, pod -> pod on
one subnet, pod -> its node's join address): not one probe may fail during the start and the
migration. At the end no src-ip static route is left, and what v1.8 could not do on upstream
OVN works: a pod reaches a pod of another subnet and another node's join address.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.app import Controller
from controller.core import router_policy as rp
from controller.core.constants import LOGICAL_SWITCH_ANNOTATION, POLICY_SRC_IP
from tests.dataplane.helpers import DUAL_STACK, NODE2, Net, WiredPod, open_net
from tests.dataplane.test_egress import OUTSIDE, PORT, _outside_world
from tests.e2e.conftest import Cluster, launch_controller, open_cluster
from tests.e2e.helpers import NODE, running, wait_for

pytestmark = pytest.mark.timeout(240)

ROUTER = "ovn-cluster"
FLAGS = ("--gc-interval=2", *DUAL_STACK)


@pytest.fixture(scope="module")
def mig() -> Iterator[tuple[Cluster, Net]]:
    with open_cluster() as cluster, tempfile.TemporaryDirectory(prefix="dpm") as d:
        ctl = running(launch_controller(cluster, *FLAGS))
        started = [ctl]
        try:
            with open_net(cluster, ctl, Path(d)) as net:
                yield cluster, net
                if net.ctl is not None and net.ctl is not ctl:
                    started.append(net.ctl)
        finally:
            for c in started:
                c.stop()


def _to_v18(cluster: Cluster, net: Net, pods: list[WiredPod]) -> None:
    """Rewrite the NB as kube-ovn v1.8 left it: src-ip routes, no policies, no address sets."""
    nb = cluster.nb
    for pod in pods:
        node = pod.obj["spec"]["nodeName"]
        for version in (4, 6):
            try:
                ip, hop = pod.ip(version), net.node_ip(node, version)
            except LookupError:
                continue
            nb.add_static_route(POLICY_SRC_IP, ip, hop, ROUTER)
    for p in nb.list_router_policies(ROUTER):
        if p.external_ids.get(rp.ROUTE_KIND_KEY):
            nb.delete_router_policy(ROUTER, p.priority, p.match)
    for aset in nb.list_address_sets({rp.ROUTE_KIND_KEY: rp.KIND_GATEWAY}):
        nb.delete_address_set(aset.name)


class Prober:
    """Sends one probe after another along `paths` until stopped; records every miss."""

    def __init__(self, net: Net, paths: list[tuple[str, str]]) -> None:
        self.net, self.paths = net, paths
        self.misses: list[tuple[str, str]] = []
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prober", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for netns, address in self.paths:
                if self.net.dp.ping(netns, address, wait=1.0) is None:
                    self.misses.append((netns, address))
            self.rounds += 1

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def _src_routes(cluster: Cluster) -> list[str]:
    return [r.ip_prefix for r in cluster.nb.list_static_routes(ROUTER) if r.policy == POLICY_SRC_IP]


def test_v18_src_ip_routes_are_replaced_without_losing_a_packet(
    mig: tuple[Cluster, Net],
) -> None:
    cluster, net = mig
    net.subnet("mig-blue", "10.27.0.0/24")
    a1 = net.create("mig-a1", node=NODE)
    a2 = net.create("mig-a2", node=NODE2)
    b = net.create("mig-b", node=NODE, annotations={LOGICAL_SWITCH_ANNOTATION: "mig-blue"})
    assert net.ctl is not None
    net.ctl.stop()
    _to_v18(cluster, net, [a1, a2, b])
    assert len(_src_routes(cluster)) == 5  # a1, a2: both families; b: IPv4

    paths = [
        (a1.netns, OUTSIDE[4]),
        (a2.netns, OUTSIDE[4]),
        (a1.netns, OUTSIDE[6]),
        (a1.netns, a2.ip(4)),
        (a2.netns, a1.ip(6)),
        (a1.netns, net.node_ip(NODE, 4)),
        (a2.netns, net.node_ip(NODE2, 6)),
        (b.netns, net.node_ip(NODE, 4)),
    ]
    with _outside_world(net):
        for netns, address in paths:  # the v1.8 state works on these paths
            net.reaches(netns, address)
        assert net.dp.tcp_request(a2.netns, OUTSIDE[4], PORT) == NODE2.encode()
        with Prober(net, paths) as prober:
            ctl: Controller = running(launch_controller(cluster, *FLAGS, identity="controller-b"))
            net.ctl = ctl
            wait_for(lambda: not _src_routes(cluster), message="the src-ip routes gone")
            rounds = prober.rounds
            wait_for(lambda: prober.rounds >= rounds + 2, message="two probe rounds after")
        assert prober.misses == [], f"{len(prober.misses)} probes lost in {prober.rounds} rounds"
        # still through their own nodes, and now what v1.8 could not do on upstream OVN
        assert net.dp.tcp_request(a1.netns, OUTSIDE[4], PORT) == NODE.encode()
        assert net.dp.tcp_request(a2.netns, OUTSIDE[4], PORT) == NODE2.encode()
    net.reaches(a1.netns, b.ip(4))
    net.reaches(b.netns, a2.ip(4))
    net.reaches(a2.netns, net.node_ip(NODE, 4))
    net.reaches(a2.netns, net.node_ip(NODE, 6))
    assert _src_routes(cluster) == []
