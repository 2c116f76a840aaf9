"""Contract-test harness: one view over FakeKubeApi and the real adapter on the emulator.

A harness seeds objects the way a test needs them (bypassing `KubeApi`, which has no creates
for pods and friends) and reads raw server state back, so the contract tests assert on state
in both worlds with the same code.
"""

from __future__ import annotations

from typing import Any, Protocol

from controller.kube.api import EventSink, KubeApi, KubeObject
from controller.testing import builders
from controller.testing.fake_kube import FakeKubeApi


class Harness(Protocol):
    name: str
    api: KubeApi
    sink: EventSink

    def seed(self, resource: str, obj: KubeObject) -> KubeObject: ...

    def read(self, resource: str, namespace: str, name: str) -> KubeObject | None: ...


_FAKE_SEEDERS = {
    "pods": "add_pod",
    "namespaces": "add_namespace",
    "nodes": "add_node",
    "statefulsets": "add_statefulset",
    "virtualmachines": "add_virtual_machine",
    "network-attachment-definitions": "add_network_attachment_definition",
    "configmaps": "add_configmap",
}
_FAKE_STORES = {
    "pods": "pods",
    "namespaces": "namespaces",
    "nodes": "nodes",
    "ips": "ips",
    "subnets": "subnets",
    "events": "events",
    "statefulsets": "statefulsets",
    "virtualmachines": "virtual_machines",
    "network-attachment-definitions": "network_attachment_definitions",
    "configmaps": "configmaps",
}


class FakeHarness:
    name = "fake"

    def __init__(self) -> None:
        self.fake = FakeKubeApi()
        self.api: KubeApi = self.fake
        self.sink: EventSink = self.fake

    def seed(self, resource: str, obj: KubeObject) -> KubeObject:
        if resource == "subnets":
            return self.fake.create_subnet(obj)
        if resource == "ips":
            return self.fake.create_or_update_ip(obj)
        seeded: KubeObject = getattr(self.fake, _FAKE_SEEDERS[resource])(obj)
        return seeded

    def read(self, resource: str, namespace: str, name: str) -> KubeObject | None:
        store: dict[str, KubeObject] = getattr(self.fake, _FAKE_STORES[resource])
        return store.get(f"{namespace}/{name}" if namespace else name)


def pod(
    name: str, namespace: str = "default", annotations: dict[str, str] | None = None
) -> KubeObject:
    """A typed pod with one busybox container `c`."""
    return builders.pod(
        name,
        namespace,
        annotations=annotations,
        containers=({"name": "c", "image": "busybox"},),
        typed=True,
    )


def ip_cr(
    name: str, subnet: str = "ovn-default", ip: str = "10.16.0.5", node: str = "node1"
) -> KubeObject:
    return {
        "metadata": {
            "name": name,
            "labels": {"ovn.kubernetes.io/subnet": subnet, subnet: ""},
        },
        "spec": {
            "podName": name.split(".", maxsplit=1)[0],
            "namespace": "default",
            "subnet": subnet,
            "nodeName": node,
            "ipAddress": ip,
            "v4IpAddress": ip,
            "v6IpAddress": "",
            "macAddress": "00:00:00:aa:bb:cc",
            "attachSubnets": [],
            "attachIps": [],
            "attachMacs": [],
            "podType": "",
        },
    }


class RealHarness:
    """The real adapter against the API server emulator over HTTP."""

    name = "real"

    def __init__(self, server: Any) -> None:
        from controller.kube.client import KubeClient

        self.server = server
        self.api_client = server.api_client()
        self.requests: list[tuple[str, str, str, float]] = []
        client = KubeClient(self.api_client, on_request=lambda *a: self.requests.append(a))
        self.api: KubeApi = client
        self.sink: EventSink = client

    def seed(self, resource: str, obj: KubeObject) -> KubeObject:
        created: KubeObject = self.server.store.create(resource, obj)
        return created

    def read(self, resource: str, namespace: str, name: str) -> KubeObject | None:
        from controller.sandbox.apiserver.resources import ApiError

        try:
            found: KubeObject = self.server.store.get(resource, namespace or None, name)
        except ApiError:
            return None
        return found

    def close(self) -> None:
        self.api_client.close()
