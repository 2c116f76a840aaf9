"""The pod status and the Events a kubelet writes, as the real kubelet (1.3x, containerd) writes
them.

* `running_status(pod, ips, host_ip, now, ready=..., container_ids=...)`: phase Running, the
  conditions PodReadyToStartContainers/Initialized/ContainersReady/Ready (the last two follow
  `ready`, as the readiness probe decides; each with `observedGeneration`), podIP(s), hostIP(s),
  startTime, `qosClass` (as the API server set it, else by its rules: Guaranteed, Burstable,
  BestEffort) and one running
  containerStatus per container with a `containerd://<64 hex>` id and an `imageID` of the form
  containerd reports (`<repository>@sha256:<digest>`; the stand-in pulls nothing, so the digest
  is derived from the image name and is stable for it). The status is written with a
  strategic-merge patch, so the scheduler's PodScheduled condition is kept.
* `sandbox_failed_message(sandbox_id, cause)`: the text of `FailedCreatePodSandBox` when CNI
  ADD fails, containerd's wrapping of the plugin's error.
* `event(pod, reason, message, type_)`: an Event from the kubelet about the pod.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from controller.sandbox.cluster.cniwait import text

JsonDict = dict[str, Any]

EVENT_COMPONENT = "kubelet"
CONTAINER_ID_SCHEME = "containerd://"
COMPUTE_RESOURCES = ("cpu", "memory")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_container_id() -> str:
    """A container (or sandbox) id as containerd makes them: 64 hex digits."""
    return secrets.token_hex(32)


def image_id(image: str) -> str:
    """`<repository>@sha256:<digest>` as containerd reports a pulled image's id."""
    repository = image.split("@", 1)[0]
    last = repository.rsplit("/", 1)[-1]
    if ":" in last:
        repository = repository[: len(repository) - len(last)] + last.split(":", 1)[0]
    if "/" not in repository:
        repository = f"docker.io/library/{repository}"
    return f"{repository}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def qos_class(spec: Mapping[str, Any]) -> str:
    """The pod's QoS class by the API's rules (pkg/apis/core/helper/qos): Guaranteed when every
    container has cpu and memory limits equal to its requests, BestEffort when none has any
    request or limit, Burstable otherwise."""
    containers = [
        c
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        if isinstance(c, Mapping)
    ]
    any_set = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests = dict(resources.get("requests") or {})
        limits = dict(resources.get("limits") or {})
        if any(r in requests or r in limits for r in COMPUTE_RESOURCES):
            any_set = True
        for r in COMPUTE_RESOURCES:
            limit = limits.get(r)
            # a request left out defaults to the limit
            if limit is None or str(requests.get(r, limit)) != str(limit):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def running_status(
    pod: Mapping[str, Any],
    ips: Sequence[str],
    host_ip: str,
    now: str,
    *,
    ready: bool = True,
    container_ids: Mapping[str, str] | None = None,
) -> JsonDict:
    """The status a kubelet reports for a pod whose containers all started."""
    spec = pod.get("spec") or {}
    generation = (pod.get("metadata") or {}).get("generation")
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    ids = container_ids or {}
    statuses = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": image_id(str(c.get("image", ""))),
            "containerID": CONTAINER_ID_SCHEME
            + ids.get(str(c.get("name", "")), new_container_id()),
            "ready": ready,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for c in containers
    ]
    conditions = []
    for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
        ok = ready or kind in ("PodReadyToStartContainers", "Initialized")
        condition: JsonDict = {
            "type": kind,
            "status": "True" if ok else "False",
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        if not ok:
            condition["reason"] = kind
        if isinstance(generation, int):
            condition["observedGeneration"] = generation
        conditions.append(condition)
    status: JsonDict = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": now,
        "containerStatuses": statuses,
        # the API server sets it at creation and refuses a change: keep what it decided
        "qosClass": text(pod, "status", "qosClass") or qos_class(spec),
    }
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips]
    return status


def sandbox_failed_message(sandbox_id: str, cause: str) -> str:
    """containerd's wrapping of a failed CNI ADD, as the kubelet puts it in its Event."""
    return (
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network "
        f'for sandbox "{sandbox_id}": plugin type="kube-ovn" failed (add): {cause}'
    )


def event(pod: Mapping[str, Any], reason: str, message: str, type_: str = "Warning") -> JsonDict:
    meta = pod.get("metadata") or {}
    namespace = text(pod, "metadata", "namespace")
    node = text(pod, "spec", "nodeName")
    now = now_rfc3339()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name', 'pod')}.{uuid.uuid4().hex[:16]}",
            "namespace": namespace,
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta.get("name", ""),
            "namespace": namespace,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "source": {"component": EVENT_COMPONENT, "host": node},
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": node,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
