"""Real workloads on real nodes: kube-controller-manager makes the pods, kube-scheduler binds them,
the kubelets run them in containerd, the runtime execs the `kube-ovn` CNI plugin, which waits for
the controller's annotations through the per-node daemon and wires them into the OVN data plane.

A pod no scheduler serves, bound by hand after the controller allocated it, shows the CNI
daemon recording its node in the pod's IP CR (kube-ovn v1.8.18 pkg/daemon/handler.go
`UpdateIPCr`) and a restarted controller keeping it.

Every pod's readiness probe pings both nodes' `ovn0` (join) addresses from inside the pod, so a
Ready pod proves node <-> pod reachability both ways (the reply takes the node's route to the
pod's subnet). Pods then ping each other with `kubectl exec`, across nodes and subnets. Each
scenario ends with `check --strict` clean and no address held by two live pods.

The tests share one bed (tests/realnode/bed.py) and run in file order: each leaves the
workloads of the ones before it running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from controller.sandbox.cluster.controlplane import RealControlPlane
from controller.testing import builders
from controller.testing.wait import wait_for
from tests.realnode.bed import (
    NODES,
    Bed,
    audit,
    held_twice,
    open_bed,
    ready,
    wait_rollout,
    workload_pod_spec,
)

NS_DEFAULT = "rn-apps"
NS_SUBNET = "rn-db"
NS_BOUND = "rn-bound"
SUBNET = "rn-db-subnet"
SUBNET_CIDR = "10.120.0.0/24"
DEPLOYMENT = "web"
STATEFULSET = "db"
ROLLOUT = 240.0


@pytest.fixture(scope="module")
def bed(
    node_plane: RealControlPlane, node_requirements: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bed]:
    with open_bed(node_plane, node_requirements, tmp_path_factory.mktemp("bed")) as b:
        yield b


def _clean(bed: Bed) -> None:
    code, report = audit(bed)
    assert code == 0, report
    assert held_twice(bed) == {}


def _deployment(bed: Bed, replicas: int) -> dict[str, Any]:
    labels = {"app": DEPLOYMENT}
    spec = workload_pod_spec([bed.join_ip(n) for n in NODES])
    # One pod per node first: the scheduler's default spreading is a score, not a rule.
    spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels},
        }
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def _statefulset(bed: Bed, replicas: int) -> dict[str, Any]:
    labels = {"app": STATEFULSET}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": STATEFULSET, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": STATEFULSET,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": workload_pod_spec([bed.join_ip(n) for n in NODES]),
            },
        },
    }


def _exec_ping(bed: Bed, namespace: str, pod: str, target: str) -> None:
    def answered() -> bool:
        out = bed.kubectl("exec", "-n", namespace, pod, "--", "ping", "-c1", "-W2", target)
        return out.returncode == 0

    wait_for(answered, timeout=30, message=f"{namespace}/{pod} pings {target}")


def test_deployment_pods_run_ready_on_both_nodes_and_ping_each_other(bed: Bed) -> None:
    bed.core.create_namespace({"metadata": {"name": NS_DEFAULT}})
    bed.apps.create_namespaced_deployment(NS_DEFAULT, _deployment(bed, 2))
    pods = wait_rollout(bed, NS_DEFAULT, f"app={DEPLOYMENT}", 2, ROLLOUT)
    assert {p.spec.node_name for p in pods} == set(NODES)
    for pod in pods:
        # The runtime reports the address the CNI plugin answered: the controller's.
        ann = pod.metadata.annotations
        assert pod.status.pod_ip == ann["ovn.kubernetes.io/ip_address"]
        assert pod.status.host_ip == bed.nodes.node(pod.spec.node_name).ip
    a, b = pods
    _exec_ping(bed, NS_DEFAULT, a.metadata.name, b.status.pod_ip)
    _exec_ping(bed, NS_DEFAULT, b.metadata.name, a.status.pod_ip)
    _clean(bed)


def test_statefulset_on_its_own_subnet_reaches_the_deployment(bed: Bed) -> None:
    bed.core.create_namespace({"metadata": {"name": NS_SUBNET}})
    subnet = builders.subnet(SUBNET, SUBNET_CIDR, namespaces=[NS_SUBNET], typed=True)
    bed.plane.apply([subnet])
    bed.apps.create_namespaced_stateful_set(NS_SUBNET, _statefulset(bed, 2))
    pods = wait_rollout(bed, NS_SUBNET, f"app={STATEFULSET}", 2, ROLLOUT)
    for pod in pods:
        assert pod.metadata.annotations["ovn.kubernetes.io/logical_switch"] == SUBNET
        assert pod.status.pod_ip.startswith("10.120.0.")
    web = bed.pods(NS_DEFAULT, f"app={DEPLOYMENT}")
    for source in pods:
        for target in web:
            _exec_ping(bed, NS_SUBNET, source.metadata.name, target.status.pod_ip)
    _exec_ping(bed, NS_DEFAULT, web[0].metadata.name, pods[0].status.pod_ip)
    _clean(bed)


def test_scale_down_and_up(bed: Bed) -> None:
    selector = f"app={DEPLOYMENT}"
    bed.apps.patch_namespaced_deployment_scale(DEPLOYMENT, NS_DEFAULT, {"spec": {"replicas": 1}})
    wait_rollout(bed, NS_DEFAULT, selector, 1, ROLLOUT)
    _clean(bed)
    bed.apps.patch_namespaced_deployment_scale(DEPLOYMENT, NS_DEFAULT, {"spec": {"replicas": 4}})
    pods = wait_rollout(bed, NS_DEFAULT, selector, 4, ROLLOUT)
    assert {p.spec.node_name for p in pods} == set(NODES)
    bed.apps.patch_namespaced_stateful_set_scale(STATEFULSET, NS_SUBNET, {"spec": {"replicas": 3}})
    wait_rollout(bed, NS_SUBNET, f"app={STATEFULSET}", 3, ROLLOUT)
    _clean(bed)


def test_delete_with_grace_frees_the_address_for_the_replacement(bed: Bed) -> None:
    pod = bed.pods(NS_SUBNET, f"app={STATEFULSET}")[0]
    name, old_uid = pod.metadata.name, pod.metadata.uid
    bed.core.delete_namespaced_pod(name, NS_SUBNET, grace_period_seconds=5)

    def replaced() -> Any:
        try:
            new = bed.core.read_namespaced_pod(name, NS_SUBNET)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return new if new.metadata.uid != old_uid and ready(new) else None

    # The kubelet stops the container, CNI DEL unwires it, the kubelet removes the pod; the
    # StatefulSet controller makes it again under the same name (kube-ovn keeps its address).
    new = wait_for(replaced, timeout=ROLLOUT, message=f"{name} replaced and Ready")
    assert new.status.pod_ip == pod.status.pod_ip
    wait_rollout(bed, NS_SUBNET, f"app={STATEFULSET}", 3, ROLLOUT)
    _clean(bed)


def test_pods_survive_a_containerd_restart(bed: Bed) -> None:
    node = bed.nodes.node("rn1")
    before = {p.metadata.name: p for p in bed.pods(NS_DEFAULT) if p.spec.node_name == "rn1"}
    assert before
    assert node.containerd is not None
    node.containerd.restart()
    bed.nodes.wait_ready(["rn1"])
    pods = wait_rollout(bed, NS_DEFAULT, f"app={DEPLOYMENT}", 4, ROLLOUT)
    after = {p.metadata.name: p for p in pods if p.spec.node_name == "rn1"}
    assert set(after) == set(before)
    for name, pod in after.items():
        assert pod.status.container_statuses[0].restart_count == 0
        assert pod.status.pod_ip == before[name].status.pod_ip
    other = next(p for p in pods if p.spec.node_name == "rn2")
    _exec_ping(bed, NS_DEFAULT, next(iter(after)), other.status.pod_ip)
    _clean(bed)


def test_controller_sigkilled_mid_rollout(bed: Bed) -> None:
    bed.apps.patch_namespaced_deployment_scale(DEPLOYMENT, NS_DEFAULT, {"spec": {"replicas": 8}})
    # Killed while the new pods wait in the CNI for their annotations.
    wait_for(
        lambda: len(bed.pods(NS_DEFAULT, f"app={DEPLOYMENT}")) > 4,
        timeout=60,
        message="the scale-up's pods created",
    )
    bed.kill_controller()
    bed.start_controller()
    pods = wait_rollout(bed, NS_DEFAULT, f"app={DEPLOYMENT}", 8, ROLLOUT)
    assert len({p.status.pod_ip for p in pods}) == 8
    _clean(bed)


def test_the_daemon_records_the_node_in_the_ip_cr_and_the_controller_keeps_it(bed: Bed) -> None:
    bed.core.create_namespace({"metadata": {"name": NS_BOUND}})
    spec = workload_pod_spec([bed.join_ip(n) for n in NODES])
    spec["schedulerName"] = "rn-nobody"  # allocated by the controller before anyone binds it
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late"}, "spec": spec}
    bed.core.create_namespaced_pod(NS_BOUND, pod)
    custom = k8s_client.CustomObjectsApi(bed.api)
    cr_name = f"late.{NS_BOUND}"

    def ip_cr() -> Any:
        try:
            return custom.get_cluster_custom_object("kubeovn.io", "v1", "ips", cr_name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    before = wait_for(ip_cr, timeout=60, message=f"IP CR {cr_name}")
    assert before["spec"]["nodeName"] == ""
    node = NODES[1]
    binding = k8s_client.V1Binding(
        metadata=k8s_client.V1ObjectMeta(name="late"),
        target=k8s_client.V1ObjectReference(kind="Node", name=node),
    )
    bed.core.create_namespaced_binding(NS_BOUND, binding, _preload_content=False)

    def running() -> Any:
        obj = bed.core.read_namespaced_pod("late", NS_BOUND)
        return obj if ready(obj) else None

    late = wait_for(running, timeout=ROLLOUT, message="the bound pod Ready")
    subnet = late.metadata.annotations["ovn.kubernetes.io/logical_switch"]
    after = ip_cr()
    assert after["spec"]["nodeName"] == node
    assert after["metadata"]["labels"] == {"ovn.kubernetes.io/subnet": subnet, subnet: ""}
    assert [after["spec"][k] for k in ("attachIps", "attachSubnets", "attachMacs")] == [[]] * 3

    # a new controller's start-up writes back the IP CRs that differ from the pods: not this one
    bed.stop_controller()
    bed.start_controller()
    _clean(bed)
    assert ip_cr()["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]
    _exec_ping(bed, NS_BOUND, "late", bed.join_ip(NODES[0]))
