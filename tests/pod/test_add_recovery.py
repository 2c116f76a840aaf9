"""handleAddPod after an interrupted add (found by tests/faults): a failed IP CR write is retried,
and the port a killed controller left behind gives the pod its address back."""

from __future__ import annotations

import pytest

from controller.apiclient.errors import KubeApiError
from controller.ovn.api import PortSpec
from tests.pod.env import DEFAULT_SUBNET, Env, raw_pod

IP = "ovn.kubernetes.io/ip_address"
MAC = "ovn.kubernetes.io/mac_address"
LEFTOVER_MAC = "00:00:00:aa:bb:cc"


def leftover_port(env: Env, pod: str, ip: str, owner: str = "") -> None:
    """What a controller killed between the port write and the annotation patch leaves."""
    env.nb.create_port(
        PortSpec(
            name=f"{pod}.default",
            switch=DEFAULT_SUBNET,
            mac=LEFTOVER_MAC,
            ips=(ip,),
            pod_name=owner or pod,
            pod_namespace="default",
        )
    )


def test_a_failed_ip_cr_write_fails_the_add_and_its_retry_writes_it(env: Env) -> None:
    env.create_pod(raw_pod("web"))
    env.kube.fail_next("create_or_update_ip", KubeApiError(500, "InternalError", "injected"))
    with pytest.raises(KubeApiError):
        env.controller.handle_add_pod("default/web")
    assert "ovn.kubernetes.io/allocated" not in env.annotations("default/web")
    env.controller.handle_add_pod("default/web")
    got = env.annotations("default/web")
    assert env.kube.ips["web.default"]["spec"]["ipAddress"] == got[IP]


def test_the_add_reuses_the_address_of_a_leftover_port(env: Env) -> None:
    leftover_port(env, "web", "10.16.0.77")
    env.create_pod(raw_pod("web"))
    env.controller.handle_add_pod("default/web")
    got = env.annotations("default/web")
    assert (got[IP], got[MAC].lower()) == ("10.16.0.77", LEFTOVER_MAC)
    port = env.nb.get_port("web.default")
    assert port is not None and port.addresses == (f"{LEFTOVER_MAC} 10.16.0.77",)
    assert env.kube.ips["web.default"]["spec"]["ipAddress"] == "10.16.0.77"
    assert [a.ip for a in env.ipam.get_pod_address("default/web")] == ["10.16.0.77"]


def test_a_leftover_address_held_by_another_pod_is_not_reused(env: Env) -> None:
    env.create_pod(raw_pod("first"))
    env.controller.handle_add_pod("default/first")
    taken = env.annotations("default/first")[IP]
    env.nb.delete_port("first.default")  # so only the leftover port claims it in NB
    leftover_port(env, "web", taken)
    env.create_pod(raw_pod("web"))
    env.controller.handle_add_pod("default/web")
    got = env.annotations("default/web")[IP]
    assert got != taken
    assert env.ipam.get_ip_owner(taken, DEFAULT_SUBNET) == "default/first"


def test_a_port_of_another_pod_under_the_name_is_not_reused(env: Env) -> None:
    leftover_port(env, "web", "10.16.0.77", owner="someone-else")
    env.create_pod(raw_pod("web"))
    env.controller.handle_add_pod("default/web")
    assert env.annotations("default/web")[IP] != "10.16.0.77"
