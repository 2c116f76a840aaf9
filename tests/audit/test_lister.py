"""ClusterLister: the fake and the real adapter (paging through the emulator) list the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller.kube.api import ClusterLister
from controller.kube.client import KubeClient
from controller.sandbox.apiserver.server import ApiServer
from controller.testing.fake_kube import FakeKubeApi

NAMESPACES = ("default", "ns1", "ns2")


def _objects() -> dict[str, list[dict[str, Any]]]:
    return {
        "namespaces": [{"metadata": {"name": ns}} for ns in NAMESPACES[1:]],
        "pods": [
            {"metadata": {"name": f"p{i}", "namespace": NAMESPACES[i % 3]}, "spec": {}}
            for i in range(5)
        ],
        "nodes": [{"metadata": {"name": f"n{i}"}} for i in range(3)],
        "subnets": [
            {"metadata": {"name": f"s{i}"}, "spec": {"cidrBlock": f"10.{i}.0.0/16"}}
            for i in range(3)
        ],
        "ips": [
            {"metadata": {"name": f"p{i}.ns1"}, "spec": {"podName": f"p{i}"}} for i in range(3)
        ],
        "vpcs": [{"metadata": {"name": "ovn-cluster"}, "spec": {}}],
        "statefulsets": [
            {"metadata": {"name": f"web{i}", "namespace": NAMESPACES[i]}, "spec": {"replicas": i}}
            for i in range(3)
        ],
        "virtualmachines": [{"metadata": {"name": "vm1", "namespace": "ns1"}, "spec": {}}],
    }


@pytest.fixture(params=["fake", "real"])
def lister(request: pytest.FixtureRequest) -> Iterator[ClusterLister]:
    objects = _objects()
    if request.param == "fake":
        fake = FakeKubeApi()
        fake.add_namespace({"metadata": {"name": "default"}})
        seeders = {
            "namespaces": fake.add_namespace,
            "pods": fake.add_pod,
            "nodes": fake.add_node,
            "subnets": fake.create_subnet,
            "ips": fake.create_or_update_ip,
            "vpcs": fake.add_vpc,
            "statefulsets": fake.add_statefulset,
            "virtualmachines": fake.add_virtual_machine,
        }
        for resource, items in objects.items():
            for obj in items:
                seeders[resource](obj)
        yield fake
        return
    server: ApiServer = request.getfixturevalue("apiserver")
    store = server.store
    for resource in ("pods", "ips", "subnets", "nodes", "vpcs", "statefulsets", "virtualmachines"):
        for obj in store.list(resource):
            store.delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"])
    for resource, items in objects.items():
        for obj in items:
            if resource != "namespaces" or not any(
                n["metadata"]["name"] == obj["metadata"]["name"] for n in store.list("namespaces")
            ):
                store.create(resource, obj)
    api_client = server.api_client()
    try:
        yield KubeClient(api_client, list_page_size=2)  # several pages per list
    finally:
        api_client.close()


def _names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(
        f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}".lstrip("/") for o in items
    )


def test_lists_return_every_object(lister: ClusterLister) -> None:
    assert _names(lister.list_pods()) == ["default/p0", "default/p3", "ns1/p1", "ns1/p4", "ns2/p2"]
    assert set(_names(lister.list_namespaces())) >= set(NAMESPACES)
    assert _names(lister.list_nodes()) == ["n0", "n1", "n2"]
    assert _names(lister.list_subnets()) == ["s0", "s1", "s2"]
    assert _names(lister.list_ips()) == ["p0.ns1", "p1.ns1", "p2.ns1"]
    assert _names(lister.list_vpcs()) == ["ovn-cluster"]
    assert _names(lister.list_statefulsets()) == ["default/web0", "ns1/web1", "ns2/web2"]
    assert _names(lister.list_virtual_machines()) == ["ns1/vm1"]
    subnet = next(s for s in lister.list_subnets() if s["metadata"]["name"] == "s1")
    assert subnet["spec"]["cidrBlock"] == "10.1.0.0/16"
