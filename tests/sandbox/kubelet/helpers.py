"""Builders and waits for the sandbox kubelet tests (every wait has a deadline)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet
from controller.sandbox.cluster.wiring import WiringError
from controller.testing import builders
from controller.testing.clock import FakeClock
from controller.testing.wait import wait_for

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


KUBELET_CONTAINERS = ({"name": "app", "image": "busybox"}, {"name": "side", "image": "pause"})


def pod(
    name: str,
    node: str = "node-a",
    *,
    grace: int = 30,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A two-container pod bound to `node` (unscheduled when empty)."""
    return builders.pod(
        name,
        NS,
        annotations=annotations or None,
        node=node or None,
        containers=KUBELET_CONTAINERS,
        **{"terminationGracePeriodSeconds": grace, **spec},
    )


def allocation(
    ip: str = "10.16.0.5", cidr: str = "10.16.0.0/16", *, routed: bool = True, provider: str = "ovn"
) -> dict[str, str]:
    """What the controller's add (and, `routed`, update) leave for the kubelet to wait on."""
    return builders.allocated(
        ip,
        "00:00:00:12:34:56",
        provider=provider,
        cidr=cidr,
        gateway="10.16.0.1",
        routed=routed,
    )


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


def wait_for_events(
    server: ApiServer, name: str, reason: str, count: int, timeout: float = 10.0
) -> list[dict[str, Any]]:
    """At least `count` Events of `reason` about pod `name`, once there are."""

    def enough() -> list[dict[str, Any]] | None:
        found = events(server, name, reason)
        return found if len(found) >= count else None

    return wait_for(enough, timeout, f"{count} {reason} events for {name}")


def stepping(clock: FakeClock, cond: Callable[[], Any]) -> Any:
    """`cond()`'s first truthy value, moving the clock on while it is not (the kubelet queues
    its retry just after writing what `cond` sees, so one fixed step could come too early)."""

    def check() -> Any:
        value = cond()
        if not value:
            clock.step(0.5)
        return value

    return wait_for(check, message="the kubelet's retry")
