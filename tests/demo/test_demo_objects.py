"""The demo's pure parts: the objects it creates, the kubelet it plays, the rows it prints."""

from __future__ import annotations

from typing import Any

import pytest

from controller.sandbox.demo.objects import (
    NODES,
    kubelet_status,
    pod_objects,
    statefulset_object,
    subnet_objects,
)
from controller.sandbox.demo.options import parse_args
from controller.sandbox.demo.table import (
    COLUMNS,
    PodRow,
    column_widths,
    format_line,
    format_row,
    pod_row,
)

STS_UID = "0b7e6c55-6f3c-4c1e-9d2a-3f1f2f3c4d5e"


def by_name(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in pods}


def test_pods_look_like_a_deployment_a_statefulset_and_a_dual_stack_pod() -> None:
    pods = by_name(pod_objects(4, STS_UID, seed=7))
    assert len(pods) == 4 + 2 + 1
    app = [p for n, p in pods.items() if n.startswith("demo-app-")]
    assert len(app) == 4
    owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in app}
    assert len(owners) == 1  # one ReplicaSet
    for pod in app:
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["apiVersion"], owner["controller"]) == (
            "ReplicaSet",
            "apps/v1",
            True,
        )
        rs_hash = pod["metadata"]["labels"]["pod-template-hash"]
        assert pod["metadata"]["name"].startswith(f"{owner['name']}-")
        assert owner["name"] == f"demo-app-{rs_hash}"
    for i in range(2):
        owner = pods[f"web-{i}"]["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["apiVersion"], owner["name"], owner["uid"]) == (
            "StatefulSet",
            "apps/v1",
            "web",
            STS_UID,
        )
    assert pods["dual"]["metadata"]["annotations"] == {
        "ovn.kubernetes.io/logical_switch": "demo-dual"
    }
    nodes = {name for name, _ in NODES}
    assert all(p["spec"]["nodeName"] in nodes for p in pods.values())
    assert all(p["metadata"]["namespace"] == "demo" for p in pods.values())


def test_pod_names_are_deterministic_per_seed_and_unique() -> None:
    first = [p["metadata"]["name"] for p in pod_objects(50, STS_UID, seed=1)]
    assert first == [p["metadata"]["name"] for p in pod_objects(50, STS_UID, seed=1)]
    assert first != [p["metadata"]["name"] for p in pod_objects(50, STS_UID, seed=2)]
    assert len(set(first)) == len(first)


def test_statefulset_and_subnets() -> None:
    sts = statefulset_object()
    assert (sts["apiVersion"], sts["kind"], sts["spec"]["replicas"]) == (
        "apps/v1",
        "StatefulSet",
        2,
    )
    subnets = {s["metadata"]["name"]: s["spec"] for s in subnet_objects()}
    assert subnets["demo-subnet"]["namespaces"] == ["demo"]
    assert subnets["demo-dual"]["cidrBlock"] == "10.101.0.0/24,fd00:101::/120"
    assert subnets["demo-dual"]["protocol"] == "Dual"


def allocated(ips: str, **extra: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "dual",
            "namespace": "demo",
            "annotations": {
                "ovn.kubernetes.io/allocated": "true",
                "ovn.kubernetes.io/ip_address": ips,
                "ovn.kubernetes.io/mac_address": "00:00:00:0a:7b:fd",
                **extra,
            },
        },
        "spec": {"nodeName": "demo-node-2"},
    }


def test_kubelet_status_follows_the_allocation() -> None:
    status = kubelet_status(allocated("10.101.0.2,fd00:101::2"), dict(NODES))
    assert status is not None
    assert status["hostIP"] == "172.18.0.3"
    assert status["podIP"] == "10.101.0.2"
    assert status["podIPs"] == [{"ip": "10.101.0.2"}, {"ip": "fd00:101::2"}]
    unallocated = {"metadata": {"name": "p"}, "spec": {"nodeName": "demo-node-1"}}
    assert kubelet_status(unallocated, dict(NODES)) is None
    unscheduled = allocated("10.100.0.2")
    unscheduled["spec"] = {}
    assert kubelet_status(unscheduled, dict(NODES)) is None


def test_a_row_needs_allocation_route_and_port() -> None:
    pod = allocated("10.101.0.2,fd00:101::2", **{"ovn.kubernetes.io/routed": "true"})
    assert pod_row(pod, None, 0.1) is None  # no LSP in the NB
    assert pod_row(allocated("10.101.0.2"), "demo-dual", 0.1) is None  # not routed
    row = pod_row(pod, "demo-dual", 0.125)
    assert row == PodRow(
        "demo/dual",
        ("10.101.0.2", "fd00:101::2"),
        "00:00:00:0a:7b:fd",
        "dual.demo",
        "demo-dual",
        "demo-node-2",
        True,
        0.125,
    )
    widths = column_widths(["dual"])
    header = format_line(COLUMNS, widths)
    line = format_row(row, widths)
    assert line.split() == [
        "demo/dual",
        "10.101.0.2,fd00:101::2",
        "00:00:00:0a:7b:fd",
        "dual.demo",
        "demo-dual",
        "demo-node-2",
        "yes",
        "0.12s",
    ]
    assert line.index("dual.demo") == header.index("LSP")


@pytest.mark.parametrize(
    "argv", [["--pods", "201"], ["--metrics-port", "-1"], ["--timeout", "-5"], ["--nope"]]
)
def test_bad_flags_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_flags_parse() -> None:
    opts = parse_args(["--pods", "0", "--metrics-port", "0", "--once", "--workdir", "/x"])
    assert (opts.pods, opts.metrics_port, opts.once, str(opts.workdir)) == (0, 0, True, "/x")
    assert opts.dataplane is True
    assert parse_args(["--no-dataplane"]).dataplane is False
