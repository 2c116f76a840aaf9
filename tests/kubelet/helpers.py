"""Builders and waits for the sandbox kubelet tests (every wait has a deadline)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from controller.sandbox import ApiServer
from controller.sandbox.kubelet import SandboxKubelet
from controller.sandbox.wiring import WiringError

NS = "default"


class RecordingWiring:
    """Records wire/unwire calls; `fail` makes `wire` raise until cleared."""

    def __init__(self) -> None:
        self.wired: list[str] = []
        self.unwired: list[str] = []
        self.fail: str | None = None
        self.lock = threading.Lock()

    def wire(self, pod: Mapping[str, Any]) -> None:
        if self.fail is not None:
            raise WiringError(self.fail)
        with self.lock:
            self.wired.append(pod["metadata"]["name"])

    def unwire(self, pod: Mapping[str, Any]) -> None:
        with self.lock:
            self.unwired.append(pod["metadata"]["name"])


def pod(
    name: str,
    node: str = "node-a",
    *,
    grace: int = 30,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = annotations
    body: dict[str, Any] = {
        "containers": [{"name": "app", "image": "busybox"}, {"name": "side", "image": "pause"}],
        "terminationGracePeriodSeconds": grace,
        **spec,
    }
    if node:
        body["nodeName"] = node
    return {"metadata": meta, "spec": body}


def allocation(
    ip: str = "10.16.0.5", cidr: str = "10.16.0.0/16", *, routed: bool = True, provider: str = "ovn"
) -> dict[str, str]:
    p = provider
    ann = {
        f"{p}.kubernetes.io/allocated": "true",
        f"{p}.kubernetes.io/ip_address": ip,
        f"{p}.kubernetes.io/cidr": cidr,
        f"{p}.kubernetes.io/mac_address": "00:00:00:12:34:56",
        f"{p}.kubernetes.io/gateway": "10.16.0.1",
        f"{p}.kubernetes.io/logical_switch": "ovn-default",
    }
    if routed:
        ann[f"{p}.kubernetes.io/routed"] = "true"
    return ann


def annotate(server: ApiServer, name: str, ann: Mapping[str, str | None]) -> dict[str, Any]:
    """Patch annotations as the controller does; returns the new pod."""
    out: dict[str, Any] = server.store.patch(
        "pods", NS, name, {"metadata": {"annotations": dict(ann)}}
    )
    return out


def running(server: ApiServer, name: str, timeout: float = 10.0) -> dict[str, Any]:
    found = server.store.wait_for(
        "pods",
        NS,
        name,
        lambda p: p is not None and (p.get("status") or {}).get("phase") == "Running",
        timeout=timeout,
    )
    assert found is not None
    return found


def synced(server: ApiServer, kubelet: SandboxKubelet, name: str) -> dict[str, Any]:
    """The pod, once the kubelet has handled its current state."""
    current: dict[str, Any] = server.store.get("pods", NS, name)
    rv = current["metadata"]["resourceVersion"]
    assert kubelet.wait_synced(NS, name, rv), f"kubelet never handled {name} at rv {rv}"
    return current


def gone(server: ApiServer, name: str, timeout: float = 10.0) -> None:
    server.store.wait_for("pods", NS, name, lambda p: p is None, timeout=timeout)


def events(server: ApiServer, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in server.store.list("events", NS)
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]
