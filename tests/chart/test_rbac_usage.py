"""RBAC against recorded usage: the chart grants what the controller does, and
nothing more.

One rich end-to-end run (module-scoped: the real controller in-process, the API server emulator,
a real NB ovsdb-server; the tests/e2e fixtures) records every request the controller sends, as
(API group, resource[/subresource], verb, namespace, name). The run covers start-up (default VPC,
router, join and default subnets, InitIPAM, start-up gc), leader election on its Lease, the
subnet, namespace and node controllers (a subnet bound to a namespace, a second node added and
removed), and pods: plain, scheduled (routed), EIP/SNAT (the external gateway ConfigMap), a
StatefulSet pod (kept on delete, its IP CR rewritten when it comes back), a KubeVirt VM pod
under keep-vm-ip, an IPAM-only NAD attachment, a pod refused twice (its Warning Event created,
then patched), deletes, and the periodic gc. A second controller run (a new leader) finds the NAD
and KubeVirt APIs unserved at start-up (discovery answers 404), so it has no informer for them
and GETs each NAD and VM it needs: the chart grants `get` for that case.

Then, against the chart's default render (`rbac_permissions`):

* every recorded request is granted: cluster-wide by the ClusterRole, or, for the release
  namespace, by the Role (resourceNames honoured);
* every grant is used: some recorded request needs it, or it is in `NOT_EXERCISED` with the
  reason the run cannot reach it.

Discovery requests (`/apis/<group>/<version>`, which the controller GETs to learn whether NADs
and KubeVirt are served) are non-resource URLs every authenticated user may read through the
built-in `system:discovery` ClusterRole; the chart grants none and none is checked here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    EIP_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    ROUTED_ANNOTATION,
)
from controller.sandbox.apiserver.faults import RequestRecord
from tests.chart.helpers import CLUSTER, NAMESPACE, Permission, Rendered, rbac_permissions
from tests.e2e.conftest import Cluster, launch_controller, open_cluster
from tests.e2e.helpers import NODE, annotations_of, get_or_none, node, pod, wait_for

pytestmark = pytest.mark.e2e

NS = "apps"
IPAM_PROVIDER = f"macvlan.{NS}"

#: Grants the run cannot exercise, each with its reason: (namespace, group, resource, verb).
#: Keep it short: a grant nobody can show a use for is removed from the chart instead
#: (configmaps `get` was, the informer serves it).
NOT_EXERCISED: dict[tuple[str, str, str, str], str] = {
    (CLUSTER, "", "events", "list"): (
        "only the `check` sub-command lists Events (the refused pods); this run does not audit"
    ),
}


@dataclass(frozen=True, slots=True)
class Use:
    """One distinct request the controller made."""

    group: str
    resource: str  # "pods", "subnets/status", ...
    verb: str
    namespace: str
    name: str


@dataclass
class Recorded:
    uses: set[Use]


def _record(into: set[Use], lock: threading.Lock, rec: RequestRecord) -> None:
    if not rec.resource:
        return  # discovery (see the module docstring)
    resource = f"{rec.resource}/{rec.subresource}" if rec.subresource else rec.resource
    # names only matter where a grant is limited by resourceNames (the Lease, the lock ConfigMap)
    name = rec.name if rec.resource in ("leases", "configmaps") else ""
    with lock:
        into.add(Use(rec.group, resource, rec.verb, rec.namespace, name))


def _allocated(cluster: Cluster, name: str, ns: str = NS) -> bool:
    return annotations_of(cluster.server, "pods", ns, name).get(ALLOCATED_ANNOTATION) == "true"


def _routed(cluster: Cluster, name: str) -> bool:
    return annotations_of(cluster.server, "pods", NS, name).get(ROUTED_ANNOTATION) == "true"


def _gone(cluster: Cluster, resource: str, namespace: str | None, name: str) -> bool:
    return get_or_none(cluster.server, resource, namespace, name) is None


def _event_count(cluster: Cluster, name: str) -> int:
    events = cluster.server.store.list("events", NS)
    found = [e for e in events if e["involvedObject"]["name"] == name]
    return max((int(e.get("count") or 1) for e in found), default=0)


def _owner(kind: str, api_version: str, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def _seed(cluster: Cluster) -> tuple[dict[str, Any], dict[str, Any]]:
    """Objects that exist before the controller starts: its informers list them."""
    store = cluster.server.store
    store.create("namespaces", {"metadata": {"name": NS}})
    store.create(
        "configmaps",
        {
            "metadata": {"name": "ovn-external-gw-config", "namespace": NAMESPACE},
            "data": {"external-gw-addr": "172.56.0.1/16"},
        },
    )
    store.create(
        "subnets",
        {
            "metadata": {"name": "macvlan"},
            "spec": {"cidrBlock": "10.72.0.0/24", "provider": IPAM_PROVIDER},
        },
    )
    store.create(
        "network-attachment-definitions",
        {
            "metadata": {"name": "macvlan", "namespace": NS},
            "spec": {
                "config": '{"cniVersion": "0.3.1", "type": "macvlan",'
                f' "ipam": {{"type": "kube-ovn", "provider": "{IPAM_PROVIDER}"}}}}'
            },
        },
    )
    sts = store.create(
        "statefulsets",
        {
            "metadata": {"name": "db", "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "db"}}, "template": {}},
        },
    )
    vm = store.create("virtualmachines", {"metadata": {"name": "vm1", "namespace": NS}, "spec": {}})
    return sts, vm


def _exercise(cluster: Cluster, sts: dict[str, Any], vm: dict[str, Any]) -> None:
    store = cluster.server.store
    # the subnet controller formats and registers a subnet, the namespace controller binds it
    store.create(
        "subnets",
        {
            "metadata": {"name": "apps-net"},
            "spec": {"cidrBlock": "10.66.0.0/24", "namespaces": [NS]},
        },
    )
    wait_for(
        lambda: (
            annotations_of(cluster.server, "namespaces", None, NS).get(LOGICAL_SWITCH_ANNOTATION)
            == "apps-net"
        ),
        message="namespace bound",
    )
    wait_for(
        lambda: (store.get("subnets", None, "apps-net").get("status") or {}).get("v4availableIPs"),
        message="subnet status",
    )
    # a SecurityGroup becomes ACLs; its status is patched
    store.create(
        "security-groups",
        {"metadata": {"name": "web"}, "spec": {"allowSameGroupTraffic": True}},
    )
    wait_for(
        lambda: (store.get("security-groups", None, "web").get("status") or {}).get("portGroup"),
        message="security group status",
    )
    # a node comes and goes
    store.create("nodes", node("node2", "172.18.0.3"))
    wait_for(
        lambda: annotations_of(cluster.server, "nodes", None, "node2").get(IP_ADDRESS_ANNOTATION)
    )
    store.delete("nodes", None, "node2")
    wait_for(partial(_gone, cluster, "ips", None, "node-node2"), message="node IP CR gone")

    vmi_owner = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "name": "vm1",
        "uid": "vmi-uid",
        "controller": True,
    }
    pods = {
        "web": pod("web", NS, node_name=NODE),
        "eip": pod("eip", NS, annotations={EIP_ANNOTATION: "172.56.0.10"}, node_name=NODE),
        "db-0": pod("db-0", NS, owner=_owner("StatefulSet", "apps/v1", sts), node_name=NODE),
        "virt-launcher-vm1-abcde": pod("virt-launcher-vm1-abcde", NS, owner=vmi_owner),
        "attached": pod("attached", NS, annotations={"k8s.v1.cni.cncf.io/networks": "macvlan"}),
    }
    for obj in pods.values():
        store.create("pods", obj)
    for name in pods:
        wait_for(partial(_allocated, cluster, name), message=f"{name} allocated")
    for name in ("web", "eip", "db-0"):
        wait_for(partial(_routed, cluster, name), message=f"{name} routed")
    assert vm["metadata"]["name"] == "vm1"
    wait_for(lambda: cluster.nb.get_port(f"vm1.{NS}"), message="the VM's port")

    # a pod refused until its address is free: Event created, then its count patched
    taken = annotations_of(cluster.server, "pods", NS, "web")[IP_ADDRESS_ANNOTATION]
    store.create("pods", pod("clash", NS, annotations={IP_ADDRESS_ANNOTATION: taken}))
    wait_for(lambda: _event_count(cluster, "clash") >= 2, message="the clash event repeated")

    # deletes: a plain pod (port, IP CR, route), the sts pod kept, then released with its sts
    for name in ("web", "eip", "attached", "virt-launcher-vm1-abcde", "clash"):
        store.delete("pods", NS, name)
    wait_for(partial(_gone, cluster, "ips", None, f"web.{NS}"), message="web's IP CR gone")
    wait_for(
        partial(_gone, cluster, "ips", None, f"attached.{NS}.{IPAM_PROVIDER}"),
        message="the attachment's IP CR gone",
    )
    store.delete("pods", NS, "db-0")  # the StatefulSet keeps its address and IP CR
    # re-created unscheduled: the kept IP CR is rewritten (its nodeName changes)
    store.create("pods", pod("db-0", NS, owner=_owner("StatefulSet", "apps/v1", sts)))
    wait_for(
        lambda: store.get("ips", None, f"db-0.{NS}")["spec"]["nodeName"] == "",
        message="db-0's IP CR updated",
    )
    store.delete("pods", NS, "db-0")
    store.delete("statefulsets", NS, "db")
    store.delete("virtualmachines", NS, "vm1")
    # an IP CR of no pod at all: the periodic gc removes it
    store.create(
        "ips",
        {
            "metadata": {"name": f"ghost.{NS}", "labels": {"ovn.kubernetes.io/subnet": "apps-net"}},
            "spec": {
                "podName": "ghost",
                "namespace": NS,
                "subnet": "apps-net",
                "ipAddress": "10.66.0.200",
                "macAddress": "00:00:00:12:34:56",
            },
        },
    )
    wait_for(partial(_gone, cluster, "ips", None, f"ghost.{NS}"), message="gc removed the ghost")
    wait_for(partial(_gone, cluster, "ips", None, f"vm1.{NS}"), message="gc removed the VM's CR")


def _exercise_without_informers(cluster: Cluster) -> None:
    """The NAD and VirtualMachine APIs were not served when the controller started, so it has no
    informer for them and GETs each object it needs."""
    store = cluster.server.store
    vm = store.create("virtualmachines", {"metadata": {"name": "vm2", "namespace": NS}, "spec": {}})
    assert vm["metadata"]["name"] == "vm2"
    vmi_owner = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "name": "vm2",
        "uid": "vmi2-uid",
        "controller": True,
    }
    store.create("pods", pod("virt-launcher-vm2-fghij", NS, owner=vmi_owner))
    attached = pod("attached2", NS, annotations={"k8s.v1.cni.cncf.io/networks": "macvlan"})
    store.create("pods", attached)
    for name in ("virt-launcher-vm2-fghij", "attached2"):
        wait_for(partial(_allocated, cluster, name), message=f"{name} allocated")
    store.delete("pods", NS, "virt-launcher-vm2-fghij")  # the VM is alive: its address is kept
    wait_for(
        lambda: (
            not any(
                p["metadata"]["name"].startswith("virt-launcher-vm2")
                for p in store.list("pods", NS)
            )
        )
    )


@pytest.fixture(scope="module")
def recorded() -> Iterator[Recorded]:
    uses: set[Use] = set()
    lock = threading.Lock()
    flags = ("--keep-vm-ip=true", "--gc-interval=0.5")
    with open_cluster() as cluster:
        sts, vm = _seed(cluster)
        cluster.emulator.add_request_hook(partial(_record, uses, lock))
        controller = launch_controller(cluster, *flags)
        try:
            wait_for(controller.workers_started.is_set, message="workers started")
            assert {"nads", "vms"} <= set(controller.informers)
            _exercise(cluster, sts, vm)
        finally:
            controller.stop()
        assert controller.wait(15) == 0
        # a second run (a new leader) that finds neither API served at start-up
        cluster.emulator.faults.fail_next(2, status=404, verb="discovery")
        controller = launch_controller(cluster, *flags, identity="controller-b")
        try:
            wait_for(controller.workers_started.is_set, message="second controller started")
            assert not {"nads", "vms"} & set(controller.informers)
            _exercise_without_informers(cluster)
        finally:
            controller.stop()
        assert controller.wait(15) == 0
        with lock:
            # the tests write through the store in-process: the controllers were the only
            # clients, so the emulator's own tally agrees with the hook's
            assert {(u.group, u.resource, u.verb) for u in uses} == cluster.emulator.verbs_used()
            yield Recorded(set(uses))


def _grants(permission: Permission, use: Use) -> bool:
    if (permission.api_group, permission.resource, permission.verb) != (
        use.group,
        use.resource,
        use.verb,
    ):
        return False
    if permission.namespace not in (CLUSTER, use.namespace):
        return False
    return not permission.resource_names or use.name in permission.resource_names


def test_every_request_the_controller_made_is_granted(
    recorded: Recorded, default_render: Rendered
) -> None:
    granted = rbac_permissions(default_render.manifests)
    missing = sorted(
        {
            (u.namespace or "<cluster>", u.group, u.resource, u.verb, u.name)
            for u in recorded.uses
            if not any(_grants(p, u) for p in granted)
        }
    )
    assert not missing, f"requests the chart does not grant: {missing}"


def test_every_grant_is_used_or_explained(recorded: Recorded, default_render: Rendered) -> None:
    unused = sorted(
        (p.namespace or "<cluster>", p.api_group, p.resource, p.verb)
        for p in rbac_permissions(default_render.manifests)
        if not any(_grants(p, u) for u in recorded.uses)
        and (p.namespace, p.api_group, p.resource, p.verb) not in NOT_EXERCISED
    )
    assert not unused, f"grants the controller never used: {unused}"


def test_the_allow_list_only_names_real_unused_grants(
    recorded: Recorded, default_render: Rendered
) -> None:
    granted = {
        (p.namespace, p.api_group, p.resource, p.verb): p
        for p in rbac_permissions(default_render.manifests)
    }
    for key, reason in NOT_EXERCISED.items():
        assert reason, key
        assert key in granted, f"{key} is allow-listed but not granted"
        assert not any(_grants(granted[key], u) for u in recorded.uses), f"{key} is used after all"


def test_the_run_was_rich(recorded: Recorded) -> None:
    # a guard against a run that silently did less than it claims
    seen = {(u.group, u.resource, u.verb) for u in recorded.uses}
    for want in (
        ("", "pods", "patch"),
        ("", "events", "create"),
        ("", "events", "patch"),
        ("", "nodes", "patch"),
        ("", "namespaces", "patch"),
        ("kubeovn.io", "ips", "create"),
        ("kubeovn.io", "ips", "delete"),
        ("kubeovn.io", "security-groups/status", "patch"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "configmaps", "watch"),
    ):
        assert want in seen, want
