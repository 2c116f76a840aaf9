"""The node's routes to pod subnets follow kube-ovn v1.8.18's CNI daemon (pkg/daemon/controller.go
line 551: a route on ovn0 for every default-VPC, non-VLAN Subnet whose Ready condition is True),
so node -> pod and pod -> node (its join address) work exactly while the controller reports the
subnet Ready. The stand-in's node has no default route: without the Ready condition the controller
writes, nothing here would answer."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.constants import LOGICAL_SWITCH_ANNOTATION
from tests.dataplane.helpers import NODE2, Net
from tests.e2e.helpers import NODE, wait_for

JOIN_GW = {4: "100.64.0.1", 6: "fd00:100:64::1"}


def conditions(net: Net, name: str) -> dict[str, tuple[str, str]]:
    subnet = net.cluster.server.store.get("subnets", None, name)
    conds = (subnet.get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c["reason"]) for c in conds}


def routed(net: Net, cidr: str, node: str = NODE) -> str | None:
    return net.cni.node_routes(node).get(cidr)


def wait_route(net: Net, cidr: str, present: bool, node: str = NODE) -> None:
    wait_for(
        lambda: (routed(net, cidr, node) is not None) == present or None,
        message=f"route {cidr} on {node}'s ovn0 {'present' if present else 'gone'}",
    )


@pytest.mark.parametrize("version", [4, 6])
def test_node_and_ovn_default_pods_reach_each_other(net: Net, version: int) -> None:
    cidr = "10.16.0.0/16" if version == 4 else "fd00:10:16::/64"
    assert conditions(net, "ovn-default")["Ready"][0] == "True"
    wait_route(net, cidr, True)
    assert routed(net, cidr) == JOIN_GW[version]
    pod = net.create(f"nr-default{version}")
    net.reaches(net.node_netns[NODE], pod.ip(version))  # node -> pod
    net.reaches(pod.netns, net.node_ip(version=version))  # pod -> node (join address)
    net.reaches(net.node_netns[NODE2], pod.ip(version))  # and from the other node
    net.delete(pod)


def test_custom_subnet_is_routed_on_every_node_once_ready(net: Net) -> None:
    net.subnet("nr-custom", "10.40.0.0/24")
    wait_for(
        lambda: (
            conditions(net, "nr-custom").get("Ready") == ("True", "ResetLogicalSwitchAclSuccess")
            or None
        ),
        message="nr-custom Ready",
    )
    for node in (NODE, NODE2):
        wait_route(net, "10.40.0.0/24", True, node)
    pod = net.create("nr-custom-a", annotations={LOGICAL_SWITCH_ANNOTATION: "nr-custom"})
    net.reaches(net.node_netns[NODE], pod.ip())
    net.reaches(pod.netns, net.node_ip())
    net.reaches(net.node_netns[NODE2], pod.ip())
    net.reaches(pod.netns, net.node_ip(NODE2))
    net.delete(pod)


def _centralized(name: str, cidr: str, gateway_node: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": name},
        "spec": {"cidrBlock": cidr, "gatewayType": "centralized", "gatewayNode": gateway_node},
    }


def test_a_not_ready_subnet_gets_no_route_and_loses_it_when_it_stops_being_ready(
    net: Net,
) -> None:
    store = net.cluster.server.store
    cidr = "10.42.0.0/24"
    store.create("subnets", _centralized("nr-central", cidr, "no-such-node"))
    wait_for(
        lambda: conditions(net, "nr-central").get("Ready") == ("False", "NoReadyGateway") or None,
        message="nr-central NotReady NoReadyGateway",
    )
    # the daemon's rule: not Ready, no route (the positive control follows)
    wait_route(net, "10.16.0.0/16", True)
    assert routed(net, cidr) is None and routed(net, cidr, NODE2) is None

    store.patch("subnets", None, "nr-central", {"spec": {"gatewayNode": NODE}})
    wait_for(
        lambda: conditions(net, "nr-central").get("Ready", ("", ""))[0] == "True" or None,
        message="nr-central Ready once its gateway node is",
    )
    wait_route(net, cidr, True)
    pod = net.create("nr-central-a", annotations={LOGICAL_SWITCH_ANNOTATION: "nr-central"})
    net.reaches(net.node_netns[NODE], pod.ip())

    store.patch("subnets", None, "nr-central", {"spec": {"gatewayNode": "no-such-node"}})
    wait_for(
        lambda: conditions(net, "nr-central").get("Ready") == ("False", "NoReadyGateway") or None,
        message="nr-central NotReady again",
    )
    wait_route(net, cidr, False)
    wait_route(net, cidr, False, NODE2)
    net.goes_silent(net.node_netns[NODE], pod.ip())
    net.delete(pod)
    store.delete("subnets", None, "nr-central")
