"""Real nodes start, run pods, survive a containerd restart, stop clean and are swept after a crash.

Two kubelets, each with its own containerd, register Ready nodes against a real control plane;
a hostNetwork busybox pod scheduled on each runs, passes an exec readiness probe and answers
`kubectl exec` through the API server. `stop()` leaves no process, mount, cgroup, node address or
directory behind; a run whose owner is SIGKILLed mid-way leaves shims and containers running,
and the next `sweep_dead_runs()` (which every `start()` calls) removes all of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from controller.sandbox.cluster import images
from controller.sandbox.cluster.controlplane import RealControlPlane
from controller.sandbox.cluster.noderuns import leftovers, sweep_dead_runs
from controller.sandbox.cluster.realnode import RealNodes
from controller.testing.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODES = ("rn1", "rn2")


def _host_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "c",
                    "image": images.BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                    "readinessProbe": {"exec": {"command": ["/bin/true"]}, "periodSeconds": 1},
                }
            ],
        },
    }


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _wait_ready(core: Any, name: str, timeout: float = 120) -> Any:
    def ready_pod() -> Any:
        pod = core.read_namespaced_pod(name, "default")
        return pod if _ready(pod) else None

    return wait_for(ready_pod, timeout=timeout, message=f"pod {name} Ready")


@pytest.fixture(scope="module")
def nodes(
    node_plane: RealControlPlane, node_requirements: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNodes]:
    real = RealNodes(
        node_plane, tmp_path_factory.mktemp("nodes"), list(NODES), kubelet=node_requirements
    )
    with real:
        yield real


@pytest.fixture
def core(node_plane: RealControlPlane) -> Iterator[Any]:
    with node_plane.api_client() as api:
        yield client.CoreV1Api(api)


def test_two_nodes_register_ready_each_with_its_own_runtime(nodes: RealNodes, core: Any) -> None:
    listed = {n.metadata.name: n for n in core.list_node().items}
    assert set(NODES) <= set(listed)
    for name in NODES:
        node = listed[name]
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        assert node.status.node_info.container_runtime_version.startswith("containerd://")
        assert {"type": "InternalIP", "address": nodes.node(name).ip} in [
            a.to_dict() for a in node.status.addresses
        ]
    sockets = {nodes.node(n).socket for n in NODES}
    roots = {nodes.node(n).cgroup_root for n in NODES}
    assert len(sockets) == len(roots) == len(NODES)


def test_host_network_pods_run_ready_and_answer_exec(
    nodes: RealNodes, core: Any, admin_kubeconfig: Path
) -> None:
    for node in NODES:
        core.create_namespaced_pod("default", _host_pod(f"host-{node}", node))
    for node in NODES:
        pod = _wait_ready(core, f"host-{node}")
        assert pod.spec.node_name == node
        assert pod.status.phase == "Running"
        assert pod.status.pod_ip == nodes.node(node).ip
        # A sandbox and a container in this node's containerd, none in the other's.
        assert len(nodes.node(node).containers()) == 2
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(admin_kubeconfig), "exec", "host-rn2", "--",
         "ip", "-4", "-o", "addr", "show", "dev", "lo"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert nodes.node("rn2").ip in out.stdout


def test_pod_survives_a_containerd_restart(nodes: RealNodes, core: Any) -> None:
    node = nodes.node("rn1")
    core.create_namespaced_pod("default", _host_pod("restart-rn1", "rn1"))
    before = _wait_ready(core, "restart-rn1")
    assert node.containerd is not None
    node.containerd.restart()
    nodes.wait_ready(["rn1"])
    # The container keeps running under its shim; the kubelet finds it again, no restart.
    after = _wait_ready(core, "restart-rn1", timeout=60)
    assert after.status.container_statuses[0].restart_count == 0
    assert after.status.container_statuses[0].container_id == (
        before.status.container_statuses[0].container_id
    )


def test_graceful_delete_removes_the_containers(nodes: RealNodes, core: Any) -> None:
    core.create_namespaced_pod("default", _host_pod("gone-rn2", "rn2"))
    _wait_ready(core, "gone-rn2")
    before = set(nodes.node("rn2").running_tasks())
    core.delete_namespaced_pod("gone-rn2", "default", grace_period_seconds=5)

    def gone() -> bool:
        names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
        return "gone-rn2" not in names

    # The kubelet, not the test, finishes the deletion (grace 0 after the container stopped).
    wait_for(gone, timeout=60, message="pod gone-rn2 deleted by the kubelet")
    # Its sandbox and container stop (the records go at the kubelet's next container GC).
    wait_for(
        lambda: len(before - set(nodes.node("rn2").running_tasks())) == 2,
        timeout=60,
        message="the pod's sandbox and container stopped in containerd",
    )


def _kube_chains() -> list[str]:
    """iptables chains a kubelet makes unless told not to (machine-wide, outliving it)."""
    found = []
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "mangle", "nat"):
            out = subprocess.run(
                [tool, "-t", table, "-S"], capture_output=True, text=True, check=False
            ).stdout
            found += [f"{tool} {table} {line}" for line in out.splitlines() if "KUBE-" in line]
    return found


def test_stop_leaves_nothing(
    node_plane: RealControlPlane, node_requirements: Path, tmp_path: Path
) -> None:
    real = RealNodes(node_plane, tmp_path, ["rn-stop"], kubelet=node_requirements)
    with real:
        run = real.run
        assert run is not None
        with node_plane.api_client() as api:
            client.CoreV1Api(api).create_namespaced_pod("default", _host_pod("stop-me", "rn-stop"))
        node = real.node("rn-stop")
        wait_for(lambda: len(node.containers()) == 2, timeout=120, message="pod started")
        assert leftovers(run)
        assert _kube_chains() == []
    assert leftovers(run) == []


_CRASHING_OWNER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from kubernetes import client
    from controller.sandbox.cluster.controlplane import RealControlPlane
    from controller.sandbox.cluster.realnode import RealNodes
    from controller.testing.wait import wait_for
    from tests.realnode.test_lifecycle import _host_pod
    work = Path(sys.argv[1])
    plane = RealControlPlane(work / "cp").start()
    nodes = RealNodes(plane, work / "nodes", ["crash1"], kubelet=Path(sys.argv[2])).start()
    with plane.api_client() as api:
        client.CoreV1Api(api).create_namespaced_pod("default", _host_pod("crash", "crash1"))
    node = nodes.node("crash1")
    wait_for(lambda: len(node.containers()) == 2, timeout=120, message="pod started")
    print(json.dumps({"run": nodes.run}), flush=True)
    os._exit(9)  # no stop(): the children die with us (PDEATHSIG), shims and containers do not
    """
)


def test_a_dead_owners_run_is_swept(node_requirements: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CRASHING_OWNER, str(tmp_path), str(node_requirements)],
        capture_output=True, text=True, timeout=240, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert out.returncode == 9, out.stderr[-3000:]
    run = json.loads(out.stdout.strip().splitlines()[-1])["run"]
    left = leftovers(run)
    # What a crash leaves: the pod's processes (in the run's cgroups), its shim, its mounts.
    assert any(item.startswith("process ") and " in " in item for item in left), left
    assert any(item.startswith("mount ") for item in left), left
    assert any(item.startswith("address ") for item in left), left
    assert run in sweep_dead_runs()
    assert leftovers(run) == []
