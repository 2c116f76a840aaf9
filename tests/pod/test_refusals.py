"""A pod's bad request is refused before anything is allocated: one Warning Event per reason,
no address, no IP CR, no port; the gateway, the node switch and other objects' IP CRs are
never a pod's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.pod_logic import build_ip_cr
from tests.pod.env import DEFAULT_SUBNET, NODE, Env, raw_pod, raw_subnet

LS = "ovn.kubernetes.io/logical_switch"
IP = "ovn.kubernetes.io/ip_address"
MAC = "ovn.kubernetes.io/mac_address"
POOL = "ovn.kubernetes.io/ip_pool"
ALLOCATED = "ovn.kubernetes.io/allocated"
PORT_SECURITY = "ovn.kubernetes.io/port_security"
SGS = "ovn.kubernetes.io/security_groups"
VALIDATE = "ValidatePodNetworkFailed"
ACQUIRE = "AcquireAddressFailed"
JOIN = "join"


def node_ip_cr(node: str = NODE, ip: str = "100.64.0.2") -> dict[str, Any]:
    return build_ip_cr(
        pod_name=node,
        ip=ip,
        mac="00:00:00:aa:bb:cc",
        subnet=JOIN,
        namespace="",
        node_name=node,
        provider="ovn",
        pod_type="",
        node_switch=JOIN,
    )


def seed_ip_cr(env: Env, body: dict[str, Any], *, cached: bool = True) -> None:
    stored = env.kube.create_or_update_ip(body)
    if cached:
        env.ips.add(copy.deepcopy(stored))


def assert_refused_cleanly(env: Env, key: str, reason: str) -> None:
    """`key` got a Warning Event with `reason` and nothing else: no address, IP CR or port."""
    assert reason in env.reasons(), env.recorder.events
    namespace, name = key.split("/")
    assert ALLOCATED not in env.annotations(key)
    assert env.ipam.get_pod_address(key) == []
    assert f"{name}.{namespace}" not in env.kube.ips
    assert env.nb.get_port(f"{name}.{namespace}") is None


def test_static_gateway_address_is_refused(env: Env) -> None:
    env.create_pod(raw_pod("gw", annotations={IP: "10.16.0.1"}))
    env.converge()
    assert_refused_cleanly(env, "default/gw", VALIDATE)
    assert env.event_messages(VALIDATE) == [
        f"10.16.0.1 in {IP} is the gateway of subnet {DEFAULT_SUBNET}"
    ]


def test_ip_pool_gateway_entry_is_refused(env: Env) -> None:
    env.add_subnet(raw_subnet("custom", "10.120.0.0/16", gateway="10.120.0.1"))
    env.create_pod(raw_pod("pooled", annotations={LS: "custom", POOL: "10.120.0.1,10.120.0.9"}))
    env.converge()
    assert_refused_cleanly(env, "default/pooled", VALIDATE)
    assert "10.120.0.1" in env.event_messages(VALIDATE)[0]


def test_random_allocation_never_hands_out_the_gateway() -> None:
    env = Env()
    try:
        # a subnet whose excludeIps lost its gateway: .1 is the lowest free address
        env.add_subnet(raw_subnet(DEFAULT_SUBNET, "10.16.0.0/16", gateway="10.16.0.1", exclude=[]))
        env.add_namespace("default")
        env.create_pod(raw_pod("web"))
        env.converge()
        assert env.annotations("default/web")[IP] == "10.16.0.2"
    finally:
        env.close()


def test_node_switch_is_refused_and_the_node_ip_cr_untouched(env: Env) -> None:
    env.add_subnet(raw_subnet(JOIN, "100.64.0.0/16", gateway="100.64.0.1"))
    seed_ip_cr(env, node_ip_cr())
    before = copy.deepcopy(env.kube.ips[f"node-{NODE}"])
    env.create_pod(raw_pod("sneaky", annotations={LS: JOIN}, node=NODE))
    env.converge()
    assert VALIDATE in env.reasons()
    assert env.kube.ips[f"node-{NODE}"] == before
    assert env.ipam.get_pod_address("default/sneaky") == []
    on_join = [p.name for p in env.nb.list_ports() if "pod" in p.external_ids and p.switch == JOIN]
    assert on_join == []
    assert ALLOCATED not in env.annotations("default/sneaky")


@pytest.mark.parametrize("cached", [True, False], ids=["in-cache", "cache-behind"])
def test_another_pods_ip_cr_is_never_overwritten(env: Env, cached: bool) -> None:
    foreign = build_ip_cr(
        pod_name="other",
        ip="10.16.0.77",
        mac="00:00:00:11:22:33",
        subnet=DEFAULT_SUBNET,
        namespace="default",
        node_name=NODE,
        provider="ovn",
        pod_type="",
        node_switch=JOIN,
    )
    foreign["metadata"]["name"] = "web.default"  # the name pod default/web's CR takes
    seed_ip_cr(env, foreign, cached=cached)
    before = copy.deepcopy(env.kube.ips["web.default"])
    env.create_pod(raw_pod("web"))
    env.converge()
    assert ACQUIRE in env.reasons()
    assert "belongs to pod default/other" in env.event_messages(ACQUIRE)[0]
    assert env.kube.ips["web.default"] == before
    assert ALLOCATED not in env.annotations("default/web")
    assert env.nb.get_port("web.default") is None
    if cached:  # refused before IPAM was asked
        assert env.ipam.get_pod_address("default/web") == []
        # and the refused pod's delete leaves the other pod's record alone
        env.remove_pod("default/web")
        env.converge()
        assert env.kube.ips["web.default"] == before


def test_invalid_security_group_with_port_security_is_refused_before_the_ip_cr(
    env: Env,
) -> None:
    env.create_pod(raw_pod("sg", annotations={PORT_SECURITY: "true", SGS: "web,bad sg!"}))
    env.converge()
    assert_refused_cleanly(env, "default/sg", VALIDATE)
    assert env.reasons().count(VALIDATE) == 1
    assert "CreateOVNPortFailed" not in env.reasons()


def test_distinct_reasons_get_one_event_each(env: Env) -> None:
    env.create_pod(
        raw_pod(
            "many",
            annotations={
                IP: "10.16.0.1",
                MAC: "01:00:5e:00:00:01",
                PORT_SECURITY: "true",
                SGS: "$x",
            },
        )
    )
    env.converge()
    assert_refused_cleanly(env, "default/many", VALIDATE)
    assert env.reasons() == [VALIDATE]
    message = env.event_messages(VALIDATE)[0]
    assert "gateway" in message and "multicast" in message and "'$x'" in message


def test_lone_mac_is_honoured(env: Env) -> None:
    env.create_pod(raw_pod("m", annotations={MAC: "0a:1b:2c:3d:4e:5f"}))
    env.converge()
    got = env.annotations("default/m")
    assert got[MAC].lower() == "0a:1b:2c:3d:4e:5f"
    port = env.nb.get_port("m.default")
    assert port is not None and port.addresses == ("0a:1b:2c:3d:4e:5f 10.16.0.2",)
    assert env.kube.ips["m.default"]["spec"]["macAddress"].lower() == "0a:1b:2c:3d:4e:5f"
    assert env.reasons() == []


def test_lone_mac_held_by_another_pod_is_refused(env: Env) -> None:
    env.create_pod(raw_pod("first", annotations={MAC: "0a:1b:2c:3d:4e:5f"}))
    env.converge()
    env.create_pod(raw_pod("second", annotations={MAC: "0A:1B:2C:3D:4E:5F"}))
    env.converge()
    assert_refused_cleanly(env, "default/second", ACQUIRE)
    assert env.annotations("default/first")[MAC].lower() == "0a:1b:2c:3d:4e:5f"


@pytest.mark.parametrize(
    "mac", ["01:00:5e:00:00:01", "00:00:00:00:00:00", "00:11:22:33:44:55:66:77"]
)
def test_mac_an_interface_cannot_take_is_refused(env: Env, mac: str) -> None:
    env.create_pod(raw_pod("m", annotations={MAC: mac}))
    env.converge()
    assert_refused_cleanly(env, "default/m", VALIDATE)


def test_allocated_pod_on_a_missing_switch_gets_one_event(env: Env) -> None:
    annotations = {
        ALLOCATED: "true",
        LS: "nowhere",
        IP: "10.99.0.5",
        MAC: "00:00:00:01:02:03",
    }
    env.create_pod(raw_pod("ghost", annotations=annotations, node=NODE))
    env.converge()
    env.controller.inspect_pods()
    env.controller.inspect_pods()
    assert env.reasons() == [VALIDATE]
    assert "nowhere" in env.event_messages(VALIDATE)[0]
    assert len(env.recorder.events) == 1
