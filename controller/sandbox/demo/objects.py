"""The demo's cluster as API objects (pure): its nodes, subnets, StatefulSet and pods, and the
status a kubelet would write once a pod's addresses are allocated.

The Deployment-like pods are named as a Deployment names them, from a seed (deterministic).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Mapping
from typing import Any

from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.sandbox.cluster.kubelet import running_status

DEMO_NAMESPACE = "demo"
CONTROLLER_NAMESPACE = "kube-system"
DEMO_SUBNET = "demo-subnet"
DEMO_CIDR = "10.100.0.0/24"
DUAL_SUBNET = "demo-dual"
DUAL_CIDR = "10.101.0.0/24,fd00:101::/120"
DEPLOYMENT = "demo-app"
STATEFULSET = "web"
STATEFULSET_REPLICAS = 2
DUAL_POD = "dual"
NODES: tuple[tuple[str, str], ...] = (("demo-node-1", "172.18.0.2"), ("demo-node-2", "172.18.0.3"))
NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110"}
EXTERNAL_GW_CONFIGMAP = "ovn-external-gw-config"
MAX_DEPLOYMENT_PODS = 200  # demo-subnet is a /24


def object_meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **extra}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def node_objects() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": object_meta(name, labels=node_labels(name)),
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": name},
                ],
                # What a kubelet reports; a scheduler binds only to such nodes.
                "capacity": dict(NODE_CAPACITY),
                "allocatable": dict(NODE_CAPACITY),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "sandbox",
                    "containerRuntimeVersion": "sandbox://0",
                    "osImage": "sandbox",
                    "kubeProxyVersion": "",
                    "kernelVersion": "",
                    "bootID": "",
                    "machineID": "",
                    "systemUUID": "",
                },
            },
        }
        for name, ip in NODES
    ]


def node_labels(name: str) -> dict[str, str]:
    """The labels a kubelet puts on its Node (the chart's pods select kubernetes.io/os)."""
    return {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }


def subnet_objects() -> list[dict[str, Any]]:
    def subnet(name: str, cidr: str, protocol: str, namespaces: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Subnet",
            "metadata": object_meta(name),
            "spec": {
                "cidrBlock": cidr,
                "protocol": protocol,
                "namespaces": namespaces,
                "gatewayType": "distributed",
                "natOutgoing": False,
            },
        }

    return [
        subnet(DEMO_SUBNET, DEMO_CIDR, "IPv4", [DEMO_NAMESPACE]),
        subnet(DUAL_SUBNET, DUAL_CIDR, "Dual", []),
    ]


def statefulset_object() -> dict[str, Any]:
    labels = {"app": STATEFULSET}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": object_meta(STATEFULSET, DEMO_NAMESPACE, labels=labels),
        "spec": {
            "replicas": STATEFULSET_REPLICAS,
            "serviceName": STATEFULSET,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec("")},
        },
    }


def pod_spec(node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    if node:
        spec["nodeName"] = node
    return spec


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _name_suffix(rng: random.Random, length: int) -> str:
    # The alphabet Kubernetes uses for generated names (no vowels, no look-alike characters).
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(length))


def _pod(name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": object_meta(name, DEMO_NAMESPACE, **meta),
        "spec": spec,
    }


def pod_objects(replicas: int, statefulset_uid: str, *, seed: int) -> list[dict[str, Any]]:
    """The demo pods, spread over the nodes. The Deployment-like pods are named as a Deployment
    names them (`<deployment>-<replicaset hash>-<suffix>`), from `seed` (deterministic)."""
    rng = random.Random(seed)
    rs_name = f"{DEPLOYMENT}-{_name_suffix(rng, 10)}"
    rs_uid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    rs_labels = {"app": DEPLOYMENT, "pod-template-hash": rs_name.rsplit("-", 1)[1]}
    names: set[str] = set()
    while len(names) < replicas:
        names.add(f"{rs_name}-{_name_suffix(rng, 5)}")
    pods = [
        _pod(
            name,
            pod_spec(NODES[i % len(NODES)][0]),
            labels=dict(rs_labels),
            ownerReferences=[_owner("ReplicaSet", rs_name, rs_uid)],
        )
        for i, name in enumerate(sorted(names))
    ]
    for i in range(STATEFULSET_REPLICAS):
        name = f"{STATEFULSET}-{i}"
        spec = pod_spec(NODES[i % len(NODES)][0])
        spec.update(hostname=name, subdomain=STATEFULSET)
        pods.append(
            _pod(
                name,
                spec,
                labels={"app": STATEFULSET, "statefulset.kubernetes.io/pod-name": name},
                ownerReferences=[_owner("StatefulSet", STATEFULSET, statefulset_uid)],
            )
        )
    pods.append(
        _pod(
            DUAL_POD,
            pod_spec(NODES[-1][0]),
            labels={"app": DUAL_POD},
            annotations={LOGICAL_SWITCH_ANNOTATION: DUAL_SUBNET},
        )
    )
    return pods


def kubelet_status(pod: Mapping[str, Any], node_ips: Mapping[str, str]) -> dict[str, Any] | None:
    """The status a kubelet would report once the CNI used the pod's allocated addresses, or
    None while the pod is not allocated or not scheduled."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    node = (pod.get("spec") or {}).get("nodeName", "")
    ips = [ip for ip in annotations.get(IP_ADDRESS_ANNOTATION, "").split(",") if ip]
    if annotations.get(ALLOCATED_ANNOTATION) != "true" or not ips or node not in node_ips:
        return None
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return running_status(pod, [ip.split("/", 1)[0] for ip in ips], node_ips[node], now)
