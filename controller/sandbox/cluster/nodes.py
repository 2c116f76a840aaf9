"""The node half of the sandbox kubelet: registration, status and the node Lease.

* `SimNode` is a node the sandbox kubelet serves. Its capacity is the machine's, as a kubelet
  reports it (`os.cpu_count()`, MemTotal, the root filesystem's size, 110 pods), unless given.
  Allocatable is capacity less the kubelet's default hard eviction thresholds
  (`memory.available<100Mi`, `nodefs.available<10%`); nothing is reserved.
* `NodeAgent.register(node)` creates the Node if absent, then patches its status: Ready, the
  Memory/Disk/PIDPressure conditions False, InternalIP/Hostname addresses, capacity and
  allocatable; and removes the `node.kubernetes.io/not-ready` taint that the
  TaintNodesByCondition admission plugin puts on new nodes (the node lifecycle controller, which
  would lift it, does not run in the test bed).
* `NodeAgent.renew_leases(names)` creates or renews each node's Lease in `kube-node-lease`
  (holder the node, 40 s duration, owned by the Node), as the kubelet's heartbeat does every 10 s;
  the kubelet calls it on that period while it runs.
* `call`/`read`: one API call through the official client with the body read before the
  connection goes back to the pool (a connection with an unread body would hand it to the next
  request as its answer).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

JsonDict = dict[str, Any]

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
#: The kubelet renews its Lease at a quarter of the duration (nodeLeaseRenewIntervalFraction).
LEASE_RENEW_SECONDS = LEASE_DURATION_SECONDS / 4
EVICTION_MEMORY_KI = 100 * 1024
REQUEST_TIMEOUT = (5.0, 30.0)
PRESSURE = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def _mem_total_ki() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SimNode:
    """A node this kubelet registers and serves; empty capacity fields mean the machine's."""

    name: str
    internal_ip: str
    cpu: str = ""
    memory: str = ""
    pods: str = "110"
    labels: Mapping[str, str] = field(default_factory=dict)

    def capacity(self) -> dict[str, str]:
        disk = shutil.disk_usage("/").total
        return {
            "cpu": self.cpu or str(os.cpu_count() or 1),
            "memory": self.memory or f"{_mem_total_ki()}Ki",
            "pods": self.pods,
            "ephemeral-storage": f"{disk // 1024}Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
        }

    def allocatable(self) -> dict[str, str]:
        capacity = self.capacity()
        out = dict(capacity)
        if not self.memory:
            out["memory"] = f"{_mem_total_ki() - EVICTION_MEMORY_KI}Ki"
        out["ephemeral-storage"] = str(shutil.disk_usage("/").total * 9 // 10)
        return out


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    read(fn, *args, **kwargs)


def read(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> JsonDict:
    resp = fn(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
    try:
        raw = resp.data
    finally:
        with contextlib.suppress(Exception):
            resp.release_conn()
    data = json.loads(raw) if raw else {}
    if not isinstance(data, dict):
        raise ValueError(f"the API server answered a non-object: {raw[:200]!r}")
    return data


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(node: SimNode, now: str) -> JsonDict:
    conditions: list[JsonDict] = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind, reason, message in PRESSURE
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    )
    return {
        "capacity": node.capacity(),
        "allocatable": node.allocatable(),
        "addresses": [
            {"type": "InternalIP", "address": node.internal_ip},
            {"type": "Hostname", "address": node.name},
        ],
        "conditions": conditions,
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": "sandbox",
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "sandbox://0",
            "osImage": "sandbox",
            "kernelVersion": os.uname().release,
            "bootID": "",
            "machineID": "",
            "systemUUID": "",
        },
    }


class NodeAgent:
    """Registers nodes and renews their Leases (module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self._core = k8s_client.CoreV1Api(api_client)
        self._coordination = k8s_client.CoordinationV1Api(api_client)
        self._node_uids: dict[str, str] = {}

    def register(self, node: SimNode) -> None:
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **node.labels,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": labels},
            "spec": {},
        }
        try:
            call(self._core.create_node, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        call(self._core.patch_node_status, node.name, {"status": node_status(node, _now())})
        self._untaint(node.name)

    def _untaint(self, name: str) -> None:
        # A 409 means someone else wrote the node meanwhile: re-read and try again.
        for _ in range(5):
            current = read(self._core.read_node, name)
            self._node_uids[name] = str((current.get("metadata") or {}).get("uid", ""))
            taints = (current.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if len(kept) == len(taints):
                return
            patch = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {"taints": kept or None},
            }
            try:
                call(
                    self._core.patch_node, name, patch, _content_type="application/merge-patch+json"
                )
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise

    def renew_leases(self, names: list[str]) -> None:
        for name in names:
            self._renew(name)

    def _renew(self, name: str) -> None:
        now = _micro_now()
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": now,
        }
        try:
            call(
                self._coordination.patch_namespaced_lease,
                name,
                LEASE_NAMESPACE,
                {"spec": spec},
                _content_type="application/merge-patch+json",
            )
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        owner = []
        if self._node_uids.get(name):
            owner = [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self._node_uids[name]}
            ]
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE, "ownerReferences": owner},
            "spec": {**spec, "acquireTime": now},
        }
        try:
            call(self._coordination.create_namespaced_lease, LEASE_NAMESPACE, body)
        except ApiException as exc:
            if exc.status != 409:  # created meanwhile: renewed next period
                raise
