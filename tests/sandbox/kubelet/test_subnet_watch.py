"""The sandbox kubelet feeds a wiring that routes nodes (`set_subnets`, the CNI stand-in) every
Subnet change, as kube-ovn's CNI daemon reconciles its ovn0 routes on Subnet events; a wiring
without it gets no watch."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.kubelet import SandboxKubelet
from controller.testing import builders
from controller.testing.wait import wait_for
from tests.sandbox.kubelet.conftest import NODES
from tests.sandbox.kubelet.helpers import RecordingWiring


class RoutingWiring(RecordingWiring):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.seen: list[dict[str, Any]] = []

    def set_subnets(self, subnets: list[Mapping[str, Any]]) -> None:
        view = {s["metadata"]["name"]: (s.get("status") or {}) for s in subnets}
        with self.lock:
            self.seen.append(view)

    def last(self) -> dict[str, Any]:
        with self.lock:
            return self.seen[-1] if self.seen else {}


def test_every_subnet_change_reaches_the_wiring(server: ApiServer) -> None:
    store = server.store
    store.create("subnets", builders.subnet("first", "10.1.0.0/24"))
    # other tests' kubelets (a session's data plane) may run their own watches meanwhile
    others = {t for t in threading.enumerate() if t.name == "subnet-watch"}
    wiring = RoutingWiring()
    api = server.api_client()
    kubelet = SandboxKubelet(api, NODES, wiring=wiring).start()
    try:
        wait_for(lambda: "first" in wiring.last(), message="the listed subnet")
        store.create("subnets", builders.subnet("second", "10.2.0.0/24"))
        wait_for(lambda: "second" in wiring.last(), message="an added subnet")
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}
        store.patch("subnets", None, "second", {"status": ready}, subresource="status")
        wait_for(lambda: wiring.last().get("second") == ready, message="a status change")
        store.delete("subnets", None, "first")
        wait_for(lambda: "first" not in wiring.last(), message="a deleted subnet")
    finally:
        kubelet.stop()
        api.close()
    ours = [t for t in threading.enumerate() if t.name == "subnet-watch" and t not in others]
    assert not any(t.is_alive() for t in ours)
