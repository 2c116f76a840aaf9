"""One address per key through the pod controller's flows, on the in-memory fakes: every error
path after an allocation undoes it, and the keep rules never hold two addresses for one key."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.apiclient.errors import ServerError
from controller.config import Config
from controller.core.constants import LOGICAL_SWITCH_ANNOTATION
from controller.ovn.api import OvnError
from tests.pod.env import Env, cached, raw_pod, raw_subnet, standard_env

KEY = "default/p"


def _on(subnet: str) -> dict[str, str]:
    return {LOGICAL_SWITCH_ANNOTATION: subnet}


def _move_to(env: Env, subnet: str) -> None:
    def mutate(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][LOGICAL_SWITCH_ANNOTATION] = subnet

    env.edit_pod(KEY, mutate)


@pytest.mark.parametrize("failure", ["port create", "annotation patch"])
def test_failed_add_then_subnet_change_holds_one_address(env: Env, failure: str) -> None:
    env.add_subnet(raw_subnet("s2", "10.17.0.0/24", gateway="10.17.0.1"))
    if failure == "port create":
        env.nb.fail_next("create_port", OvnError("nb down"))
    else:
        env.kube.fail_next("patch_pod_annotations", ServerError(500, "InternalError", "etcd"))
    env.create_pod(raw_pod("p", annotations=_on("ovn-default")))
    env.process(env.queues.add)  # fails after allocating in ovn-default
    assert "allocated" not in str(env.annotations(KEY))
    _move_to(env, "s2")
    env.advance(60)
    env.converge()
    held = env.ipam.get_pod_address(KEY)
    assert [a.subnet for a in held] == ["s2"], held
    assert env.annotations(KEY)["ovn.kubernetes.io/ip_address"] == held[0].ip
    port = env.nb.get_port("p.default")
    assert port is not None and port.switch == "s2"
    assert env.kube.ips["p.default"]["spec"]["subnet"] == "s2"
    assert env.ipam.verify() == []


@pytest.mark.parametrize(
    "request_annotation", [("ip_address", "10.16.0.50"), ("ip_pool", "10.16.0.50,10.16.0.51")]
)
@pytest.mark.parametrize("broken", ["missing", "malformed"])
def test_static_pod_allocated_when_namespace_lists_a_broken_subnet(
    env: Env, request_annotation: tuple[str, str], broken: str
) -> None:
    if broken == "malformed":
        env.subnets.add({"metadata": {"name": broken}, "spec": {"cidrBlock": 7}})
    env.add_namespace("team", logical_switch=f"ovn-default,{broken}")
    key, value = request_annotation
    env.create_pod(raw_pod("p", "team", annotations={f"ovn.kubernetes.io/{key}": value}))
    env.converge()
    got = env.annotations("team/p")
    assert got.get("ovn.kubernetes.io/allocated") == "true", env.reasons()
    assert got["ovn.kubernetes.io/ip_address"] == "10.16.0.50"
    assert got["ovn.kubernetes.io/logical_switch"] == "ovn-default"


@pytest.mark.parametrize("keep_vm_ip", [False, True])
def test_standalone_vmi_pod_keeps_network_on_update(keep_vm_ip: bool) -> None:
    env = standard_env(config=dataclasses.replace(Config(), enable_keep_vm_ip=keep_vm_ip))
    try:
        owner = ("kubevirt.io/v1", "VirtualMachineInstance", "vmi1")
        env.create_pod(raw_pod("virt-launcher-vmi1-x", owner=owner, node="node1"))
        env.converge()
        key = "default/virt-launcher-vmi1-x"
        ip = env.annotations(key)["ovn.kubernetes.io/ip_address"]
        ipam_key = "default/vmi1" if keep_vm_ip else key

        def touch(obj: dict[str, Any]) -> None:
            obj["metadata"].setdefault("labels", {})["touched"] = "yes"

        env.edit_pod(key, touch)
        env.advance(60)  # past any grace period
        env.converge()
        assert env.ipam.get_ip_owner(ip, "ovn-default") == ipam_key
        port = "vmi1.default" if keep_vm_ip else "virt-launcher-vmi1-x.default"
        assert env.nb.get_port(port) is not None
        env.create_pod(raw_pod("other"))
        env.converge()
        assert env.annotations("default/other")["ovn.kubernetes.io/ip_address"] != ip
    finally:
        env.close()


STS = ("apps/v1", "StatefulSet", "web")


def _sts(env: Env, subnet: str) -> None:
    obj = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "template": {"metadata": {"annotations": {LOGICAL_SWITCH_ANNOTATION: subnet}}},
        },
    }
    stored = env.kube.add_statefulset(obj)
    env.statefulsets.update(stored) if env.statefulsets.get_by_key("default/web") else (
        env.statefulsets.add(stored)
    )


def _sts_pod(subnet: str) -> dict[str, Any]:
    return raw_pod("web-0", annotations=_on(subnet), owner=STS, node="node1")


def _assert_only_on_s2(env: Env) -> None:
    got = env.annotations("default/web-0")
    assert got.get("ovn.kubernetes.io/allocated") == "true", env.reasons()
    assert got[LOGICAL_SWITCH_ANNOTATION] == "s2"
    held = env.ipam.get_pod_address("default/web-0")
    assert [a.subnet for a in held] == ["s2"], held
    port = env.nb.get_port("web-0.default")
    assert port is not None and port.switch == "s2"
    assert env.kube.ips["web-0.default"]["spec"]["subnet"] == "s2"


def test_statefulset_moved_to_new_subnet_when_new_pod_cached_before_old_delete(env: Env) -> None:
    env.add_subnet(raw_subnet("s2", "10.17.0.0/24", gateway="10.17.0.1"))
    _sts(env, "ovn-default")
    env.create_pod(_sts_pod("ovn-default"))
    env.converge()
    old = cached(env.pods, "default/web-0")
    # the StatefulSet moves to s2: its controller deletes web-0 and re-creates it, and the
    # informer has the new pod in the cache by the time the old one's delete runs
    _sts(env, "s2")
    env.kube.pods.pop("default/web-0")
    new = env.kube.add_pod(_sts_pod("s2"))
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    env.pods.update(dict(new))
    env.pod_events.on_delete(old)
    env.pod_events.on_add(dict(new), False)
    env.advance(60)
    env.converge()
    _assert_only_on_s2(env)


def test_force_deleted_statefulset_pod_back_on_another_subnet_holds_one_address(
    env: Env,
) -> None:
    env.add_subnet(raw_subnet("s2", "10.17.0.0/24", gateway="10.17.0.1"))
    _sts(env, "ovn-default")
    env.create_pod(_sts_pod("ovn-default"))
    env.converge()
    env.remove_pod("default/web-0")  # forced: no deletionTimestamp, the address is kept
    env.converge()
    assert [a.subnet for a in env.ipam.get_pod_address("default/web-0")] == ["ovn-default"]
    _sts(env, "s2")
    env.create_pod(_sts_pod("s2"))
    env.advance(60)
    env.converge()
    _assert_only_on_s2(env)


def test_a_stale_address_released_for_a_pod_back_on_another_subnet_leaves_its_routing_at_once(
    env: Env,
) -> None:
    """The StatefulSet moves to s2 and its re-created pod is cached before the old one's delete
    runs (a re-creation: the delete leaves the address and its rows). The add that releases the
    stale address removes its routing rows in the same step, before the address can be handed
    out again, and queues its keys, as a delete does."""
    env.add_subnet(raw_subnet("s2", "10.17.0.0/24", gateway="10.17.0.1"))
    _sts(env, "ovn-default")
    env.create_pod(_sts_pod("ovn-default"))
    env.converge()
    old_ip = env.annotations("default/web-0")["ovn.kubernetes.io/ip_address"]
    old = cached(env.pods, "default/web-0")
    _sts(env, "s2")
    env.kube.pods.pop("default/web-0")
    new = env.kube.add_pod(_sts_pod("s2"))
    env.pods.update(dict(new))
    env.pod_events.on_delete(old)
    env.pod_events.on_add(dict(new), False)
    env.process(env.queues.delete)
    env.drain(env.routing_queue)  # the routing keys have not run yet
    assert old_ip in [ip for _, ip, _ in env.routes()]
    env.process(env.queues.add)
    assert [a.subnet for a in env.ipam.get_pod_address("default/web-0")] == ["s2"]
    assert old_ip not in [ip for _, ip, _ in env.routes()]
    assert env.routing.queued("ovn-default/node1")
    env.advance(60)
    env.converge()
    _assert_only_on_s2(env)
    new_ip = env.annotations("default/web-0")["ovn.kubernetes.io/ip_address"]
    assert [ip for _, ip, _ in env.routes()] == [new_ip]
