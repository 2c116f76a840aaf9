"""The active gateway node of a centralized subnet (pure).

kube-ovn v1.8.18 (pkg/controller/subnet.go `reconcileGateway`, active-standby without ECMP) keeps
the subnet's `status.activateGateway` while that node is still listed in `spec.gatewayNode` and
Ready; otherwise the first listed node that exists and is Ready becomes the active one, and with
none the subnet is NotReady (`NoReadyGateway`). `spec.gatewayNode` lists node names separated by
commas, each optionally followed by `:<egress address>` (the name is the part before the colon).
A node is a usable gateway only with a join address (its `ovn.kubernetes.io/ip_address`
annotation), since that is the next hop the reroute names.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.constants import IP_ADDRESS_ANNOTATION
from controller.core.model import Node


def gateway_node_names(gateway_node: str) -> list[str]:
    """The node names of a `spec.gatewayNode` value, in order, without egress addresses."""
    names: list[str] = []
    for entry in gateway_node.split(","):
        name = entry.split(":", 1)[0].strip()
        if name and name not in names:
            names.append(name)
    return names


def join_ips(node: Node) -> list[str]:
    """The node's join-switch addresses (empty while the node has none)."""
    value = node.annotations.get(IP_ADDRESS_ANNOTATION, "")
    return [ip.strip() for ip in value.split(",") if ip.strip()]


def usable_gateway(node: Node | None) -> bool:
    return node is not None and node.ready and bool(join_ips(node))


def active_gateway(gateway_node: str, current: str, nodes: Mapping[str, Node]) -> Node | None:
    """The node that carries a centralized subnet's egress, None when no listed node can.

    `current` (the subnet's `status.activateGateway`) is kept while it is still listed and
    usable, so a gateway does not move back when an earlier listed node recovers.
    """
    names = gateway_node_names(gateway_node)
    if current in names and usable_gateway(nodes.get(current)):
        return nodes[current]
    for name in names:
        node = nodes.get(name)
        if usable_gateway(node):
            return node
    return None
