"""`update` of a kind with a status subresource writes the main resource only, on every store a
test may hold: the emulator's in-process store (the reference), a `RemoteStore` over the
emulator's REST API and a `RemoteStore` over the real kube-apiserver. A status in the body is
ignored, so an edit built from an earlier read never replaces the status another writer (the
kubelet) set since."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controller.sandbox.apiserver.remotestore import RemoteStore
from controller.sandbox.apiserver.server import ApiServer

NS = "default"


@pytest.fixture(
    params=["emulator", "remote-emulator", pytest.param("real", marks=pytest.mark.realcp)]
)
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "real":
        plane = request.getfixturevalue("real_control_plane")
        with plane.api_client() as api:
            yield RemoteStore(api)
        return
    with ApiServer() as server:
        if not server.store.list("namespaces"):
            server.store.create("namespaces", {"metadata": {"name": NS}})
        if request.param == "emulator":
            yield server.store
        else:
            with server.api_client() as api:
                yield RemoteStore(api)


def _pod(name: str) -> dict[str, Any]:
    # no node and a scheduler nobody runs: no other writer touches it on the real plane
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "pause"}]},
    }


def test_update_keeps_the_status_the_kubelet_wrote(store: Any) -> None:
    name = f"st-{uuid.uuid4().hex[:8]}"
    store.create("pods", _pod(name))
    try:
        current = store.get("pods", NS, name)
        current["status"] = {"phase": "Pending", "message": "the kubelet's"}
        store.update("pods", current, subresource="status")  # the kubelet
        edit = store.get("pods", NS, name)
        edit["metadata"]["labels"] = {"edited": "yes"}
        edit["status"] = {"phase": "Pending", "message": "a stale copy"}
        out = store.update("pods", edit)
        assert out["metadata"]["labels"] == {"edited": "yes"}
        assert out["status"].get("message") == "the kubelet's"
        stored = store.get("pods", NS, name)
        assert stored["metadata"]["labels"] == {"edited": "yes"}
        assert stored["status"].get("message") == "the kubelet's"
    finally:
        store.delete("pods", NS, name, grace_period_seconds=0)


def test_update_keeps_a_custom_resource_status(store: Any) -> None:
    name = f"st-{uuid.uuid4().hex[:8]}"
    store.create(
        "subnets",
        {"metadata": {"name": name}, "spec": {"cidrBlock": "10.89.0.0/24", "protocol": "IPv4"}},
    )
    try:
        current = store.get("subnets", None, name)
        current["status"] = {"activateGateway": "node-b"}
        store.update("subnets", current, subresource="status")  # the controller
        edit = store.get("subnets", None, name)
        edit["spec"]["private"] = True
        edit["status"] = {"activateGateway": "node-a"}
        store.update("subnets", edit)
        stored = store.get("subnets", None, name)
        assert stored["spec"]["private"] is True
        assert stored["status"]["activateGateway"] == "node-b"
    finally:
        store.delete("subnets", None, name)
