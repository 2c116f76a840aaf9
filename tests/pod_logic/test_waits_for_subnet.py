"""pod_logic.waits_for_subnet: which pods a newly registered subnet re-queues."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller import pod_logic as pl
from controller.core.model import Pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _pod(annotations: dict[str, str], **spec: Any) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
            "spec": {"containers": [{"name": "c"}], **spec},
            "status": {"phase": "Pending"},
        }
    )


def test_pod_waiting_for_its_subnet_is_requeued_when_the_subnet_appears_rule() -> None:
    ls = "ovn.kubernetes.io/logical_switch"
    assert pl.waits_for_subnet(_pod({ls: "s1"}), "s1", NOW)
    assert pl.waits_for_subnet(_pod({}), "s1", NOW)  # the namespace decides
    assert not pl.waits_for_subnet(_pod({ls: "other"}), "s1", NOW)
    done = {ls: "s1", "ovn.kubernetes.io/allocated": "true"}
    assert not pl.waits_for_subnet(_pod(done), "s1", NOW)
    assert not pl.waits_for_subnet(_pod({ls: "s1"}, hostNetwork=True), "s1", NOW)
    attach = {**done, "k8s.v1.cni.cncf.io/networks": "ns/nad1"}
    assert pl.waits_for_subnet(_pod(attach), "s1", NOW)
    attached = {**attach, "nad1.ns.ovn.kubernetes.io/allocated": "true"}
    assert not pl.waits_for_subnet(_pod(attached), "s1", NOW)
    assert not pl.waits_for_subnet(_pod({**done, "k8s.v1.cni.cncf.io/networks": "["}), "s1", NOW)
