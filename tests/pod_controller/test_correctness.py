"""Correctness regressions of the pod controller's flows, on the in-memory fakes: every error
path after an allocation undoes it, and the keep rules never hold two addresses for one key."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.constants import LOGICAL_SWITCH_ANNOTATION
from controller.kube.errors import ServerError
from controller.ovn.api import OvnError
from tests.pod_controller.helpers import Env, raw_pod, raw_subnet

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
