"""handleUpdatePod (routes, NAT, routed=true) and handleUpdatePodSecurity."""

from __future__ import annotations

from typing import Any

from controller.apiclient.errors import ConflictError, ServerError
from controller.core import router_policy as rp
from controller.ovn import external_ids as ext
from tests.pod.env import (
    NODE,
    NODE_JOIN_IP,
    Env,
    raw_pod,
    raw_subnet,
)

ROUTED = "ovn.kubernetes.io/routed"
PS = "ovn.kubernetes.io/port_security"
SG = "ovn.kubernetes.io/security_groups"


def schedule(env: Env, key: str, node: str = NODE) -> None:
    def set_node(obj: dict[str, Any]) -> None:
        obj["spec"]["nodeName"] = node

    env.edit_pod(key, set_node)


def test_scheduled_pod_gets_src_ip_route_to_its_node(env: Env) -> None:
    env.create_pod(raw_pod("web"))
    env.converge()
    assert ROUTED not in env.annotations("default/web")
    assert env.routes() == []
    schedule(env, "default/web")
    assert env.drain(env.queues.update) == ["default/web"]
    env.controller.handle_update_pod("default/web")
    assert env.routes() == [("src-ip", "10.16.0.2", NODE_JOIN_IP)]
    assert env.annotations("default/web")[ROUTED] == "true"
    assert env.nats() == []  # no eip/snat annotation: stale NAT only would be removed
    env.converge()  # the routed pod is quiet
    assert env.queues.update.pending() == 0 and len(env.queues.update) == 0


def patches(env: Env) -> list[str]:
    return [c for c in env.kube.calls if c.startswith("patch_pod_annotations")]


def test_bound_pod_is_allocated_and_routed_in_one_pass(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE))
    env.process(env.queues.add)
    got = env.annotations("default/web")
    assert got["ovn.kubernetes.io/allocated"] == "true" and got[ROUTED] == "true"
    assert env.routes() == [("src-ip", "10.16.0.2", NODE_JOIN_IP)]
    assert patches(env) == ["patch_pod_annotations default/web"]
    env.sync_all()  # the allocation's own update event asks for nothing more
    assert len(env.queues.update) == 0 and env.queues.update.pending() == 0


def test_add_leaves_routing_to_the_update_when_it_cannot_route(env: Env) -> None:
    # bound to a node the cache does not hold yet: a distributed gateway has no next hop
    env.create_pod(raw_pod("web", node="node2"))
    env.process(env.queues.add)
    got = env.annotations("default/web")
    assert got["ovn.kubernetes.io/allocated"] == "true" and ROUTED not in got
    assert env.routes() == []
    env.sync_all()
    assert env.drain(env.queues.update) == ["default/web"]
    env.add_node("node2", "172.18.0.3", "100.64.0.3")
    env.queues.update.add("default/web")
    env.converge()
    assert env.annotations("default/web")[ROUTED] == "true"
    assert env.routes() == [("src-ip", "10.16.0.2", "100.64.0.3")]


def test_add_that_finds_its_pod_re_created_undoes_its_routing(env: Env) -> None:
    env.kube.fail_next("patch_pod_annotations", ConflictError(409, "Conflict", "uid differs"))
    env.create_pod(raw_pod("web", node=NODE))
    env.process(env.queues.add)
    assert env.routes() == [] and env.ipam.get_pod_address("default/web") == []
    assert env.nb.get_port("web.default") is None


def test_failed_add_that_moves_subnet_on_retry_leaves_no_route_of_its_old_address(
    env: Env,
) -> None:
    env.add_subnet(raw_subnet("s2", "10.17.0.0/16", gateway="10.17.0.1"))
    env.kube.fail_next("patch_pod_annotations", ServerError(500, "InternalError", "etcd"))
    env.create_pod(raw_pod("web", node=NODE))
    env.process(env.queues.add)  # routed 10.16.0.2, then the patch failed
    assert env.routes() == [("src-ip", "10.16.0.2", NODE_JOIN_IP)]
    env.edit_pod(
        "default/web",
        lambda o: (
            o["metadata"]
            .setdefault("annotations", {})
            .__setitem__("ovn.kubernetes.io/logical_switch", "s2")
        ),
    )
    env.advance(60)
    env.converge()
    assert env.annotations("default/web")["ovn.kubernetes.io/logical_switch"] == "s2"
    assert env.routes() == [("src-ip", "10.17.0.2", NODE_JOIN_IP)]


def test_add_routes_the_subnet_it_allocated_from_not_the_first_it_tried() -> None:
    # A static address in the namespace's second subnet: the pod's network resolves to the
    # first, the address comes from the second, whose node address set must hold it.
    env = Env()
    try:
        env.add_subnet(raw_subnet("a", "10.17.0.0/16", gateway="10.17.0.1"))
        env.add_subnet(raw_subnet("ovn-default", "10.16.0.0/16", gateway="10.16.0.1"))
        env.add_namespace("default", "a,ovn-default")
        env.add_node(NODE, "172.18.0.2", NODE_JOIN_IP)
        static = {"ovn.kubernetes.io/ip_address": "10.16.0.50"}
        env.create_pod(raw_pod("web", node=NODE, annotations=static))
        env.process(env.queues.add)
        got = env.annotations("default/web")
        assert (got["ovn.kubernetes.io/logical_switch"], got[ROUTED]) == ("ovn-default", "true")
        sets = {
            a.name: a.addresses for a in env.nb.list_address_sets({"kube-ovn-route": "gateway"})
        }
        assert sets == {rp.set_name("ovn-default", NODE, 4): ("10.16.0.50",)}
    finally:
        env.close()


def test_update_before_allocation_is_an_error_and_retried(env: Env) -> None:
    env.pods.add(raw_pod("web", node=NODE))
    env.queues.update.add("default/web")
    env.process(env.queues.update)
    assert env.queues.update.num_requeues("default/web") == 1
    assert env.routes() == []


def test_north_gateway_route(env: Env) -> None:
    env.create_pod(
        raw_pod("web", node=NODE, annotations={"ovn.kubernetes.io/north_gateway": "10.0.0.254"})
    )
    env.converge()
    assert env.routes() == [("src-ip", "10.16.0.2", "10.0.0.254")]
    assert env.annotations("default/web")[ROUTED] == "true"


def test_centralized_subnet_has_no_per_pod_route() -> None:
    env = Env()
    try:
        env.add_subnet(
            raw_subnet(
                "ovn-default", "10.16.0.0/16", gateway="10.16.0.1", gatewayType="centralized"
            )
        )
        env.add_namespace("default")
        env.create_pod(raw_pod("web", node=NODE))
        env.converge()
        assert env.routes() == []
        assert env.annotations("default/web")[ROUTED] == "true"
    finally:
        env.close()


def test_eip_and_snat_route_through_the_external_gateway(env: Env) -> None:
    eips = {"ovn.kubernetes.io/eip": "172.56.0.100", "ovn.kubernetes.io/snat": "172.56.0.200"}
    env.create_pod(raw_pod("web", node=NODE, annotations=eips))
    env.converge()
    # No ovn-external-gw-config yet: not ready, retried, not routed.
    assert ROUTED not in env.annotations("default/web")
    assert env.queues.update.pending() == 1
    env.configmaps.add(
        {
            "metadata": {"name": "ovn-external-gw-config", "namespace": "kube-system"},
            "data": {"external-gw-addr": "172.56.0.1/16"},
        }
    )
    env.advance(0.005)
    env.converge()
    assert env.routes() == [("src-ip", "10.16.0.2", "172.56.0.1")]
    assert sorted(env.nats()) == [
        ("dnat_and_snat", "10.16.0.2", "172.56.0.100", ""),  # centralized, as kube-ovn v1.8
        ("snat", "10.16.0.2", "172.56.0.200", ""),
    ]
    assert env.annotations("default/web")[ROUTED] == "true"


def test_eip_snat_disabled_ignores_the_annotations() -> None:
    from controller.config import Config
    from tests.pod.env import standard_env

    env = standard_env(config=Config(enable_eip_snat=False))
    try:
        env.create_pod(raw_pod("web", node=NODE, annotations={"ovn.kubernetes.io/eip": "1.1.1.1"}))
        env.converge()
        assert env.routes() == [("src-ip", "10.16.0.2", NODE_JOIN_IP)]
        assert env.nats() == []
    finally:
        env.close()


def test_security_groups_at_creation_and_on_change(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE, annotations={PS: "true", SG: "sg1"}))
    env.converge()
    pgs = env.nb.state.port_groups
    assert pgs[ext.sg_port_group_name("sg1")].ports == {"web.default"}
    assert env.nb.state.address_sets[ext.sg_address_set_name("sg1", "v4")] == ["10.16.0.2"]

    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][SG] = "sg2"

    env.edit_pod("default/web", change)
    assert env.drain(env.queues.security) == ["default/web"]
    env.controller.handle_update_pod_security("default/web")
    port = env.nb.get_port("web.default")
    assert port is not None
    assert port.external_ids[ext.SECURITY_GROUPS_KEY] == "sg2"
    assert port.external_ids[ext.associated_sg_key("sg1")] == "false"
    assert port.external_ids[ext.associated_sg_key("sg2")] == "true"
    pgs = env.nb.state.port_groups
    assert pgs[ext.sg_port_group_name("sg1")].ports == set()
    assert pgs[ext.sg_port_group_name("sg2")].ports == {"web.default"}
    assert env.nb.state.address_sets[ext.sg_address_set_name("sg1", "v4")] == []
    assert env.nb.state.address_sets[ext.sg_address_set_name("sg2", "v4")] == ["10.16.0.2"]


def test_security_without_port_security_changes_nothing(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE, annotations={SG: "sg1"}))
    env.converge()
    env.controller.handle_update_pod_security("default/web")
    port = env.nb.get_port("web.default")
    assert port is not None and ext.SECURITY_GROUPS_KEY not in port.external_ids
    assert ext.sg_port_group_name("sg1") not in env.nb.state.port_groups


def test_dual_stack_pod_routes_and_security_groups() -> None:
    env = Env()
    try:
        env.add_subnet(
            raw_subnet(
                "ovn-default", "10.16.0.0/16,fd00:10:16::/64", gateway="10.16.0.1,fd00:10:16::1"
            )
        )
        env.add_namespace("default")
        env.add_node(NODE, "172.18.0.2", "100.64.0.2,fd00:100:64::2")
        env.create_pod(raw_pod("web", node=NODE, annotations={PS: "true", SG: "sg1"}))
        env.converge()
        got = env.annotations("default/web")
        assert got["ovn.kubernetes.io/ip_address"] == "10.16.0.2,fd00:10:16::2"
        port = env.nb.get_port("web.default")
        assert port is not None
        mac = got["ovn.kubernetes.io/mac_address"].lower()
        assert port.addresses == (f"{mac} 10.16.0.2 fd00:10:16::2",)
        assert sorted(env.routes()) == [
            ("src-ip", "10.16.0.2", "100.64.0.2"),
            ("src-ip", "fd00:10:16::2", "fd00:100:64::2"),
        ]
        sets = env.nb.state.address_sets
        assert sets[ext.sg_address_set_name("sg1", "v4")]
        assert sets[ext.sg_address_set_name("sg1", "v6")]
        # Re-associate: security reconcile on a dual-stack port.
        env.edit_pod(
            "default/web", lambda o: o["metadata"]["annotations"].__setitem__(SG, "sg1,sg2")
        )
        env.converge()
        pgs = env.nb.state.port_groups
        assert pgs[ext.sg_port_group_name("sg2")].ports == {"web.default"}
        assert env.nb.state.address_sets[ext.sg_address_set_name("sg2", "v6")]
        env.remove_pod("default/web")
        env.converge()
        assert env.routes() == []
        assert env.nb.state.port_groups[ext.sg_port_group_name("sg1")].ports == set()
    finally:
        env.close()


def test_pod_on_an_unknown_node_is_routed_once_the_node_appears(env: Env) -> None:
    env.create_pod(raw_pod("web", node="node9"))
    env.converge()
    assert ROUTED not in env.annotations("default/web")
    assert env.queues.update.num_requeues("default/web") == 1
    env.add_node("node9", "172.18.0.9", "100.64.0.9")
    env.advance(0.005)
    env.converge()
    assert env.routes() == [("src-ip", "10.16.0.2", "100.64.0.9")]
    assert env.annotations("default/web")[ROUTED] == "true"
