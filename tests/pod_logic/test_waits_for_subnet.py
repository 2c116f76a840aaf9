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


def test_the_raw_pre_filter_never_hides_a_waiting_pod() -> None:
    ls, allocated = "ovn.kubernetes.io/logical_switch", "ovn.kubernetes.io/allocated"
    networks, default = "k8s.v1.cni.cncf.io/networks", "v1.multus-cni.io/default-network"
    cases = [
        {},
        {ls: "s1"},
        {ls: "s1", allocated: "true"},
        {allocated: "false"},
        {allocated: "true", networks: "ns/nad1"},
        {allocated: "true", default: "ns/nad1"},
        {allocated: "true", networks: "ns/nad1", "nad1.ns.ovn.kubernetes.io/allocated": "true"},
    ]
    for given in cases:
        raw = {"metadata": {"name": "p", "namespace": "ns", "annotations": given}}
        pod = _pod(given)
        waits = pl.waits_for_subnet(pod, "s1", NOW) or pl.waits_for_nad(pod, "ns", "nad1", NOW)
        assert pl.may_wait_for_network(raw) or not waits, given
    skipped = {"metadata": {"annotations": {allocated: "true"}}}
    assert not pl.may_wait_for_network(skipped)
    assert pl.may_wait_for_network({"metadata": {"annotations": "not a map"}})
