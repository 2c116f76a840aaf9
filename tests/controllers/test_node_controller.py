"""The node controller: a node's join address, port and IP CR, allocated once, freed on delete."""

from __future__ import annotations

from controller.controllers.node import NodeController, NodeQueues
from controller.core.constants import ALLOCATED_ANNOTATION, IP_ADDRESS_ANNOTATION
from controller.ipam import IPAM
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.testing.builders import subnet
from controller.testing.fake_kube import FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from tests.controllers.helpers import CONFIG, indexer


def test_node_controller_allocates_once_and_releases_on_delete() -> None:
    ipam, kube, nb = IPAM(), FakeKubeApi(), FakeNbClient()
    join = subnet("join", "100.64.0.0/16")
    ipam.add_or_update_subnet("join", "100.64.0.0/16", ["100.64.0.1"])
    nb.ensure_logical_router("ovn-cluster")
    nb.ensure_logical_switch("join", "ovn-cluster", "100.64.0.0/16", "100.64.0.1", {})
    node_obj = kube.add_node({"metadata": {"name": "n1"}})
    nodes, ips = indexer(node_obj), indexer()
    queues = NodeQueues(
        RateLimitingQueue[str](default_controller_rate_limiter()),
        RateLimitingQueue[str](default_controller_rate_limiter()),
    )
    ctl = NodeController(
        config=CONFIG,
        nodes=nodes,
        subnets=indexer(join),
        ips=ips,
        kube=kube,
        nb=nb,
        ipam=ipam,
        queues=queues,
        is_leader=lambda: True,
    )
    ctl.handle_add_node("n1")
    ann = kube.nodes["n1"]["metadata"]["annotations"]
    assert ann[IP_ADDRESS_ANNOTATION] == "100.64.0.2" and ann[ALLOCATED_ANNOTATION] == "true"
    assert ann["ovn.kubernetes.io/port_name"] == "node-n1"
    assert nb.get_port("node-n1") is not None
    assert kube.ips["node-n1"]["spec"]["podName"] == "n1"

    # the informer catches up; a second pass writes nothing
    nodes.update(kube.nodes["n1"])
    ips.add(kube.ips["node-n1"])
    calls = len(kube.calls)
    ctl.handle_add_node("n1")
    assert len(kube.calls) == calls

    nodes.delete(kube.nodes["n1"])
    ctl.handle_delete_node("n1")
    assert ipam.get_pod_address("node-n1") == []
    assert nb.get_port("node-n1") is None and "node-n1" not in kube.ips
    for q in (queues.add, queues.delete):
        q.shut_down()
