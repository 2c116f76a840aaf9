"""Malformed cluster objects and pod networks the add flow must answer with a Warning Event
(the end-to-end table is tests/faults/test_malformed.py)."""

from __future__ import annotations

import pytest

from controller.core.errors import ControllerError, MalformedObjectError, PermanentError
from controller.core.subnet_spec import format_subnet_spec
from tests.pod.env import Env, raw_pod, raw_subnet

LS = "ovn.kubernetes.io/logical_switch"
NETWORKS = "k8s.v1.cni.cncf.io/networks"
VALIDATE = "ValidatePodNetworkFailed"


def _add(env: Env, name: str, annotations: dict[str, str] | None = None) -> None:
    env.create_pod(raw_pod(name, annotations=annotations))
    env.process(env.queues.add)


def test_a_malformed_subnet_does_not_block_other_pods(env: Env) -> None:
    env.subnets.add({"metadata": {"name": "typo"}, "spec": {"cidrBlock": ["10.81.0.0/24"]}})
    _add(env, "web")
    assert env.annotations("default/web")["ovn.kubernetes.io/allocated"] == "true"
    env.controller.inspect_pods()  # must not raise either


def test_a_pod_on_a_malformed_subnet_is_told_why(env: Env) -> None:
    env.subnets.add({"metadata": {"name": "typo"}, "spec": {"cidrBlock": ["10.81.0.0/24"]}})
    _add(env, "p", {LS: "typo"})
    assert env.reasons() == [VALIDATE]
    message = env.event_messages(VALIDATE)[0]
    assert "typo" in message and "spec.cidrBlock must be a string" in message


@pytest.mark.parametrize(
    ("annotations", "text"),
    [
        ({LS: "nowhere"}, "subnet 'nowhere' of pod default/p not found"),
        ({NETWORKS: "missing"}, "network-attachment-definition default/missing not found"),
        ({NETWORKS: "broken"}, "failed to load config of net-attach-def default/broken"),
        ({NETWORKS: "dup"}, "subnet conflict"),
    ],
)
def test_unresolvable_networks_get_an_event_and_stay_retryable(
    env: Env, annotations: dict[str, str], text: str
) -> None:
    env.nads.add({"metadata": {"name": "broken", "namespace": "default"}, "spec": {"config": "{"}})
    conf = '{"type": "kube-ovn"}'
    env.nads.add({"metadata": {"name": "dup", "namespace": "default"}, "spec": {"config": conf}})
    env.create_pod(raw_pod("p", annotations=annotations))
    with pytest.raises(ControllerError) as info:
        env.controller.handle_add_pod("default/p")
    assert env.reasons() == [VALIDATE]
    assert text in env.event_messages(VALIDATE)[0]
    assert info.value.reason == VALIDATE
    assert not isinstance(info.value, PermanentError)


def test_default_network_on_a_non_ovn_subnet_is_refused(env: Env) -> None:
    env.add_subnet(
        raw_subnet("macvlan", "10.72.0.0/24", gateway="10.72.0.1", provider="macvlan.default")
    )
    _add(env, "p", {LS: "macvlan"})
    assert env.reasons() == [VALIDATE]
    assert "macvlan.default" in env.event_messages(VALIDATE)[0]
    assert env.pod_ports() == []
    assert env.ipam.get_pod_address("default/p") == []


def test_a_pod_on_a_subnet_with_an_invalid_cidr_is_told_why(env: Env) -> None:
    # the subnet controller refuses it, so IPAM never knows it ("subnet is not registered")
    env.subnets.add({"metadata": {"name": "bad-cidr"}, "spec": {"cidrBlock": "10.80.0.0/33"}})
    _add(env, "p", {LS: "bad-cidr"})
    assert env.reasons() == [VALIDATE]
    assert "'10.80.0.0/33' is not a valid CIDR" in env.event_messages(VALIDATE)[0]


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ({}, "spec.cidrBlock is required"),
        ({"cidrBlock": ""}, "spec.cidrBlock is required"),
        ({"cidrBlock": ["10.81.0.0/24"]}, "spec.cidrBlock must be a string, not list"),
    ],
)
def test_format_subnet_spec_says_what_is_wrong_with_the_cidr(
    spec: dict[str, object], text: str
) -> None:
    with pytest.raises(MalformedObjectError, match=text):
        format_subnet_spec("typo", spec)
