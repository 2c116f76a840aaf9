"""IP CR updates compare semantically (kube-ovn's empty fields are no difference) and keep the
labels other controllers set."""

from __future__ import annotations

from typing import Any

from controller.kube.api import desired_ip, ip_update
from controller.pod_logic import build_ip_cr


def _ours(subnet: str = "ovn-default", ip: str = "10.16.0.5") -> dict[str, Any]:
    return desired_ip(
        build_ip_cr(
            pod_name="p",
            ip=ip,
            mac="00:00:00:00:00:05",
            subnet=subnet,
            namespace="ns",
            node_name="n1",
            provider="ovn",
            pod_type="",
            node_switch="join",
        )
    )


def _as_kube_ovn_wrote_it(cr: dict[str, Any]) -> dict[str, Any]:
    spec = {**cr["spec"], "containerID": "", "attachSubnets": None, "attachIps": None}
    spec["attachMacs"] = None
    meta = {**cr["metadata"], "resourceVersion": "7", "uid": "u"}
    return {**cr, "metadata": meta, "spec": spec}


def test_ip_cr_written_by_kube_ovn_is_not_rewritten() -> None:
    desired = _ours()
    assert ip_update(_as_kube_ovn_wrote_it(desired), desired) is None


def test_ip_cr_update_keeps_foreign_labels() -> None:
    existing = _as_kube_ovn_wrote_it(_ours())
    existing["metadata"]["labels"] = {**existing["metadata"]["labels"], "team": "a"}
    assert ip_update(existing, _ours()) is None
    moved = ip_update(existing, _ours("s2", "10.17.0.5"))
    assert moved is not None
    assert moved["metadata"]["labels"] == {"ovn.kubernetes.io/subnet": "s2", "s2": "", "team": "a"}
    assert moved["spec"]["subnet"] == "s2" and moved["spec"]["ipAddress"] == "10.17.0.5"
    assert moved["metadata"]["resourceVersion"] == "7"
