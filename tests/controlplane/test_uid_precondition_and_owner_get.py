"""Two API semantics the pod controller relies on, on both planes (the emulator the e2e suite
runs against and the real kube-apiserver):

* the allocation patch's UID precondition: a merge patch whose `metadata.uid` names an earlier
  incarnation of the pod is refused with 409 (`ConflictError`), and applies to the right one;
* the owner checks confirm with a GET: a StatefulSet missing from a lagging owner cache is read
  from the API, so a running StatefulSet pod is not taken for deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from controller.apiclient.errors import ConflictError
from controller.cache import Indexer
from controller.core.model import Pod
from controller.kube.client import KubeClient
from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.cluster.controlplane import RealControlPlane
from controller.view import CacheView, OwnerLookup

pytestmark = pytest.mark.realcp


@pytest.fixture(params=["emulator", "real"])
def api(request: pytest.FixtureRequest) -> Iterator[Any]:
    """An ApiClient of either plane, and a fresh namespace `ns` in it."""
    if request.param == "emulator":
        with ApiServer() as server, server.api_client() as api_client:
            yield api_client
        return
    plane: RealControlPlane = request.getfixturevalue("real_control_plane")
    with plane.api_client() as api_client:
        yield api_client


@pytest.fixture
def ns(api: Any) -> Iterator[str]:
    name = f"c-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def _pod(name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner:
        meta["ownerReferences"] = [owner]
    spec = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    return {"metadata": meta, "spec": spec}


def test_allocation_patch_only_applies_to_the_pod_it_was_computed_for_on_both_planes(
    api: Any, ns: str
) -> None:
    core = client.CoreV1Api(api)
    first = core.create_namespaced_pod(ns, _pod("p")).metadata.uid
    core.delete_namespaced_pod("p", ns, grace_period_seconds=0)
    second = core.create_namespaced_pod(ns, _pod("p")).metadata.uid
    assert first != second
    kube = KubeClient(api)
    with pytest.raises(ConflictError):
        kube.patch_pod_annotations(ns, "p", {"ovn.kubernetes.io/allocated": "true"}, uid=first)
    assert not (core.read_namespaced_pod("p", ns).metadata.annotations or {})
    patched = kube.patch_pod_annotations(ns, "p", {"ovn.kubernetes.io/x": "1"}, uid=second)
    assert patched["metadata"]["annotations"] == {"ovn.kubernetes.io/x": "1"}
    assert patched["metadata"]["uid"] == second


def test_running_statefulset_pod_keeps_network_when_owner_cache_lags_on_both_planes(
    api: Any, ns: str
) -> None:
    apps = client.AppsV1Api(api)
    labels = {"app": "web"}
    sts = apps.create_namespaced_stateful_set(
        ns,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "serviceName": "web",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause"}]},
                },
            },
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "web",
        "uid": sts.metadata.uid,
        "controller": True,
    }
    pod = Pod.from_dict({**_pod("web-0", owner), "metadata": {
        "name": "web-0", "namespace": ns, "uid": "u", "ownerReferences": [owner]}})  # fmt: skip
    lagging = CacheView(kube=KubeClient(api), statefulsets=Indexer())  # has not seen it yet
    assert OwnerLookup(lagging).of(pod).to_delete() is False
    apps.delete_namespaced_stateful_set("web", ns)
    assert OwnerLookup(lagging).of(pod).to_delete() is True  # gone on the API too
