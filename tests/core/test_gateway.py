from __future__ import annotations

from controller.core.gateway import active_gateway, gateway_node_names, join_ips
from controller.core.model import Node
from controller.core.object_fields import FrozenDict


def _node(name: str, *, ready: bool = True, join: str = "100.64.0.2") -> Node:
    annotations = FrozenDict({"ovn.kubernetes.io/ip_address": join} if join else {})
    return Node(name=name, annotations=annotations, ready=ready)


def test_names_drop_egress_addresses_blanks_and_repeats() -> None:
    assert gateway_node_names(" n1:172.18.0.2, n2 ,,n1") == ["n1", "n2"]
    assert gateway_node_names("") == []


def test_first_listed_ready_node_with_a_join_address() -> None:
    nodes = {
        "n1": _node("n1", ready=False),
        "n2": _node("n2", join=""),
        "n3": _node("n3", join="100.64.0.3,fd00:100:64::3"),
    }
    chosen = active_gateway("n0,n1,n2,n3", "", nodes)
    assert chosen is not None and chosen.name == "n3"
    assert join_ips(chosen) == ["100.64.0.3", "fd00:100:64::3"]


def test_the_current_gateway_is_kept_while_usable() -> None:
    nodes = {"n1": _node("n1"), "n2": _node("n2")}
    chosen = active_gateway("n1,n2", "n2", nodes)
    assert chosen is not None and chosen.name == "n2"
    nodes["n2"] = _node("n2", ready=False)
    chosen = active_gateway("n1,n2", "n2", nodes)
    assert chosen is not None and chosen.name == "n1"


def test_a_current_gateway_no_longer_listed_is_dropped() -> None:
    nodes = {"n1": _node("n1"), "n2": _node("n2")}
    chosen = active_gateway("n1", "n2", nodes)
    assert chosen is not None and chosen.name == "n1"


def test_no_usable_node() -> None:
    assert active_gateway("n1,n2", "", {"n1": _node("n1", ready=False)}) is None
