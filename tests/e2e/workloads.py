"""Builders and waits for the workload scenarios of the end-to-end suite (StatefulSets, KubeVirt
VMs, multus attachments, terminating pods), on top of `tests.e2e.helpers`; the waits
(`allocated`, `routed`, `events`, `lsp`, `no_lsp`) serve the other scenarios too.

The test's NB reader (`cluster.nb`) is its own ovsdb connection: its cache trails the
controller's commits by milliseconds, so an NB read that follows a controller write goes through
`lsp` / `no_lsp` (or another `wait_for`), never a single read.

Pods are deleted the way a kubelet-backed API server deletes them: `graceful()` switches the
emulator to graceful pod deletion, so a delete sets `deletionTimestamp` (an update event) and
`finish_delete` then removes the object (the final delete event carries the timestamp), which is
what kube-ovn's StatefulSet / VM keep-IP rules read. The pods `pod()` builds are bound to the
node (`node_name`), as a scheduler would have them: a real API server deletes a pod that no node
runs at once, whatever its grace period.
"""

from __future__ import annotations

from typing import Any

from controller.app import Controller
from controller.core.constants import ALLOCATED_ANNOTATION_TEMPLATE, ROUTED_ANNOTATION
from controller.ovn.api import PortInfo
from controller.testing import builders
from tests.e2e import helpers
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import NODE, annotations_of, audit_clean, get_or_none, running, wait_for

NS = "default"


def graceful(cluster: Cluster) -> None:
    """Pods get `deletionTimestamp` on delete and stay until `finish_delete` (no kubelet)."""
    cluster.server.store.immediate_pod_delete = False


def pod(
    name: str,
    namespace: str = NS,
    *,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    grace: int = 1,
    node_name: str = NODE,
) -> dict[str, Any]:
    """A busybox pod that the emulator deletes `grace` seconds after a graceful delete."""
    return helpers.pod(
        name, namespace, annotations=annotations, owner=owner, node_name=node_name, grace=grace
    )


def start_graceful(cluster: Cluster, start_controller: StartController, *flags: str) -> Controller:
    """`graceful(cluster)`, then a controller started with `flags`, its workers running."""
    graceful(cluster)
    controller = running(start_controller(*flags))
    return controller


def delete_pod(cluster: Cluster, name: str, namespace: str = NS) -> None:
    """A kubelet-confirmed delete: deletionTimestamp first, then the object goes."""
    store = cluster.server.store
    store.delete("pods", namespace, name)
    store.finalize_delete("pods", namespace, name)


def statefulset(
    cluster: Cluster,
    name: str,
    replicas: int,
    *,
    template_annotations: dict[str, str] | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """Create a StatefulSet; returns the ownerReference its pods carry."""
    template: dict[str, Any] = {"metadata": {"labels": {"app": name}}}
    if template_annotations:
        template["metadata"]["annotations"] = dict(template_annotations)
    sts = cluster.server.store.create(
        "statefulsets",
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": template,
            },
        },
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": name,
        "uid": sts["metadata"]["uid"],
        "controller": True,
    }


def virtual_machine(cluster: Cluster, name: str, namespace: str = NS) -> dict[str, Any]:
    """Create a kubevirt VirtualMachine; returns the VMI ownerReference of its launcher pods."""
    cluster.server.store.create(
        "virtualmachines",
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"running": True, "template": {"metadata": {}}},
        },
    )
    # The owner is a real VMI object: a garbage collector (the real plane's) deletes pods whose
    # owner does not exist.
    vmi = cluster.server.store.create(
        "virtualmachineinstances",
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {},
        },
    )
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "name": name,
        "uid": vmi["metadata"]["uid"],
        "controller": True,
    }


def formatted_subnet(cluster: Cluster, name: str, cidr: str, gateway: str) -> None:
    """A subnet as kube-ovn's own subnet controller leaves it: formatted spec, switch created."""
    cluster.server.store.create(
        "subnets",
        {
            "metadata": {"name": name},
            "spec": {
                "cidrBlock": cidr,
                "gateway": gateway,
                "excludeIps": [gateway],
                "protocol": "IPv4",
                "provider": "ovn",
                "vpc": "ovn-cluster",
            },
        },
    )
    cluster.nb.ensure_logical_switch(name, "ovn-cluster", cidr, gateway, {})


def subnet(
    cluster: Cluster,
    ctl: Controller,
    name: str,
    cidr: str,
    *,
    provider: str = "",
    namespaces: list[str] | None = None,
) -> None:
    """Create a subnet and wait until the controller's IPAM knows it."""
    options: dict[str, Any] = {"provider": provider, "namespaces": namespaces}
    spec = {key: value for key, value in options.items() if value}
    cluster.server.store.create("subnets", builders.subnet(name, cidr, **spec))
    wait_for(lambda: ctl.ipam.has_subnet(name), message=f"subnet {name} in IPAM")


def nad(cluster: Cluster, name: str, config: dict[str, Any], namespace: str = NS) -> None:
    cluster.server.store.create(
        "network-attachment-definitions", builders.nad(name, namespace, config, typed=True)
    )


def allocated(
    cluster: Cluster, name: str, provider: str = "ovn", namespace: str = NS
) -> dict[str, str]:
    key = ALLOCATED_ANNOTATION_TEMPLATE.format(provider=provider)

    def done() -> dict[str, str] | None:
        ann = annotations_of(cluster.server, "pods", namespace, name)
        return ann if ann.get(key) == "true" else None

    return wait_for(done, message=f"pod {namespace}/{name} allocated ({provider})")


def routed(cluster: Cluster, name: str, namespace: str = NS) -> dict[str, str]:
    def done() -> dict[str, str] | None:
        ann = annotations_of(cluster.server, "pods", namespace, name)
        return ann if ann.get(ROUTED_ANNOTATION) == "true" else None

    return wait_for(done, message=f"pod {namespace}/{name} routed")


def lsp(cluster: Cluster, name: str) -> PortInfo:
    """The logical switch port `name`, once the test's NB reader sees it."""
    return wait_for(lambda: cluster.nb.get_port(name), message=f"LSP {name} visible to the reader")


def no_lsp(cluster: Cluster, name: str) -> None:
    """The logical switch port `name` is gone from the test's NB reader."""
    wait_for(lambda: cluster.nb.get_port(name) is None, message=f"LSP {name} deleted")


def events(cluster: Cluster, name: str, reason: str, ns: str = NS) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.server.store.list("events", ns)
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


def warning(cluster: Cluster, name: str, reason: str, ns: str = NS) -> dict[str, Any]:
    found = wait_for(lambda: events(cluster, name, reason, ns), message=f"{reason} on {name}")
    assert found[0]["type"] == "Warning"
    return found[0]


def quiet(ctl: Controller, timeout: float = helpers.DEFAULT_TIMEOUT) -> None:
    """Wait until the controller owes no work: on every queue it runs, nothing queued, no item
    held by a worker and no delayed entry already due (`DelayingQueue.idle_now`), and no pod
    delete deferred. A queue's length alone leaves out the item a worker is handling, whose
    writes are still to come. Events the informers have not delivered yet are not visible here:
    a test first waits for the change it made to be seen (an annotation, an LSP), then for quiet."""
    pods = ctl.pod_controller
    assert pods is not None
    wait_for(
        lambda: all(q.idle_now() for q in ctl.work_queues()) and not pods.pending_deletes(),
        timeout,
        "the controller's queues quiet",
    )


def gone(cluster: Cluster, resource: str, name: str, namespace: str | None = None) -> None:
    wait_for(
        lambda: get_or_none(cluster.server, resource, namespace, name) is None,
        message=f"{resource} {name} deleted",
    )


def settled(cluster: Cluster, *flags: str) -> None:
    """The consistency audit (run with the controller's `flags`) is clean and nothing is pending;
    re-run until the cluster is quiet: the audit's API and NB reads are not one snapshot."""
    wait_for(lambda: audit_clean(cluster.argv(*flags)), message="audit settled", interval=0.3)
