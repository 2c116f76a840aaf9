"""A small world for the garbage-collector tests: fake API + fake (or real) NB + real IPAM.

`World` keeps the FakeKubeApi stores as the source of truth and copies them into real
`Indexer`s on `sync()`, as the informers would. `network(...)` creates what a successful add and
update leave behind for one pod network: an IPAM hold, the LSP, the IP CR and a src-ip route.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from controller.cache import Indexer
from controller.config import Config, parse_args
from controller.controllers.gc import GarbageCollector, KeyLock
from controller.controllers.node import node_ip_cr
from controller.core.naming import pod_name_to_port_name
from controller.ipam import IPAM
from controller.ovn.api import NbClient, PortSpec
from controller.pod_logic import build_ip_cr
from controller.runtime.metrics import ControllerMetrics
from controller.testing import builders
from controller.testing.fake_kube import FakeKubeApi
from controller.testing.fake_nb import FakeNbClient

NOW = builders.NOW
LR = "ovn-cluster"
LS = "ovn-default"
JOIN = "join"
NODE_IP = "100.64.0.2"

STS_OWNER = ("apps/v1", "StatefulSet", "web")
#: A controller's flags for the handler tests: no leader election.
CONFIG = parse_args(["--ovn-nb-addr=tcp:127.0.0.1:6641", "--leader-elect=false"], {})


def indexer(*objs: dict[str, Any]) -> Indexer:
    """A cache holding `objs`."""
    idx = Indexer()
    for obj in objs:
        idx.add(obj)
    return idx


class RecordingCluster:
    """A `ClusterApi` for the subnet handlers: records the Subnets written back (the one call
    they make); the Vpc and discovery calls are not theirs and fail the test."""

    def __init__(self) -> None:
        self.replaced: list[dict[str, Any]] = []

    def replace_subnet(self, subnet: Mapping[str, Any]) -> dict[str, Any]:
        self.replaced.append(dict(subnet))
        return dict(subnet)

    def get_vpc(self, name: str) -> dict[str, Any] | None:
        raise AssertionError("the subnet handlers read no Vpc")

    def create_vpc(self, body: Mapping[str, Any]) -> dict[str, Any]:
        raise AssertionError("the subnet handlers create no Vpc")

    def replace_vpc_status(
        self, vpc: Mapping[str, Any], status: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise AssertionError("the subnet handlers write no Vpc status")

    def api_group_exists(self, group: str, version: str) -> bool:
        raise AssertionError("the subnet handlers need no discovery")


def raw_pod(
    name: str,
    namespace: str = "default",
    *,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str, str] | None = None,
    phase: str = "Running",
    deleted_ago: float | None = None,
    grace: int = 30,
    host_network: bool = False,
) -> dict[str, Any]:
    """A pod on node n1; `deleted_ago` seconds ago it got a deletionTimestamp (with `grace`
    seconds)."""
    extra: dict[str, Any] = {"hostNetwork": True} if host_network else {}
    return builders.pod(
        name,
        namespace,
        annotations=annotations,
        owner=owner,
        uid=f"uid-{name}",
        deletion_timestamp=(
            None
            if deleted_ago is None
            else builders.timestamp(NOW - timedelta(seconds=deleted_ago))
        ),
        grace_period=None if deleted_ago is None else grace,
        node="n1",
        containers=None,
        phase=phase,
        **extra,
    )


def restored_pod(name: str, ann: dict[str, str] | None = None, **status: Any) -> dict[str, Any]:
    """A pod of namespace `ns` as start-up reads it: `ann` its annotations, keyword fields its
    status (`restart=` sets spec.restartPolicy, default Always)."""
    restart = status.pop("restart", "Always")
    return builders.pod(
        name,
        "ns",
        annotations=ann or {},
        containers=None,
        status=status,
        restartPolicy=restart,
    )


def allocated(ip: str, mac: str, subnet: str = LS, provider: str = "ovn") -> dict[str, str]:
    return builders.allocated(ip, mac, subnet, provider=provider)


class World:
    def __init__(
        self,
        *,
        nb: NbClient | None = None,
        keep_vm_ip: bool = False,
        owner_caches: bool = True,
        key_mutex: KeyLock | None = None,
        ready: Any = None,
        clock: Any = None,
    ) -> None:
        self.config = dataclasses.replace(Config(), enable_keep_vm_ip=keep_vm_ip)
        self.kube = FakeKubeApi()
        self.nb: NbClient = nb if nb is not None else FakeNbClient()
        self.ipam = IPAM()
        self.registry = CollectorRegistry()
        self.metrics = ControllerMetrics(self.registry)
        self.now = NOW
        self.pods, self.nodes, self.ips, self.subnets = Indexer(), Indexer(), Indexer(), Indexer()
        self.statefulsets = Indexer() if owner_caches else None
        self.vms = Indexer() if owner_caches else None
        self.nb.ensure_logical_router(LR)
        for name, cidr, gw in (
            (LS, "10.16.0.0/16", "10.16.0.1"),
            (JOIN, "100.64.0.0/16", "100.64.0.1"),
        ):
            self.nb.ensure_logical_switch(name, LR, cidr, gw, {})
            self.ipam.add_or_update_subnet(name, cidr, [gw])
            self.subnets.add(
                {"metadata": {"name": name}, "spec": {"cidrBlock": cidr, "gateway": gw}}
            )
        self.gc = GarbageCollector(
            config=self.config,
            pods=self.pods,
            nodes=self.nodes,
            ips=self.ips,
            subnets=self.subnets,
            statefulsets=self.statefulsets,
            vms=self.vms,
            kube=self.kube,
            nb=self.nb,
            ipam=self.ipam,
            metrics=self.metrics,
            clock=clock,
            wall_clock=lambda: self.now,
            key_mutex=key_mutex,
            ready=ready,
        )

    # -- seeding ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Copy the fake API's stores into the caches (what the informers do)."""
        self.pods.replace(list(self.kube.pods.values()), "")
        self.nodes.replace(list(self.kube.nodes.values()), "")
        self.ips.replace(list(self.kube.ips.values()), "")
        if self.statefulsets is not None:
            self.statefulsets.replace(list(self.kube.statefulsets.values()), "")
        if self.vms is not None:
            self.vms.replace(list(self.kube.virtual_machines.values()), "")

    def network(
        self,
        name: str,
        ip: str,
        mac: str,
        *,
        namespace: str = "default",
        subnet: str = LS,
        provider: str = "ovn",
        pod_type: str = "",
        lsp: bool = True,
        route: bool = True,
        nat: bool = False,
    ) -> str:
        """What a completed add + update leaves for `name`'s network; returns the port name."""
        key = f"{namespace}/{name}"
        self.ipam.get_static_address(key, ip, mac, subnet)
        port = pod_name_to_port_name(name, namespace, provider)
        if lsp:
            self.nb.create_port(
                PortSpec(port, subnet, mac, (ip,), pod_name=name, pod_namespace=namespace)
            )
        self.kube.create_or_update_ip(
            build_ip_cr(
                pod_name=name,
                ip=ip,
                mac=mac,
                subnet=subnet,
                namespace=namespace,
                node_name="n1",
                provider=provider,
                pod_type=pod_type,
                node_switch=JOIN,
            )
        )
        if route:
            self.nb.add_static_route("src-ip", ip, NODE_IP, LR)
        if nat:
            self.nb.update_nat_rule("snat", ip, "172.18.0.100", LR)
        return port

    def node(self, name: str, ip: str, mac: str, *, api: bool = True) -> str:
        """A node's join port `node-<name>` (+ IPAM hold and IP CR); `api`: the Node exists."""
        port = f"node-{name}"
        self.ipam.get_static_address(port, ip, mac, JOIN)
        self.nb.create_port(PortSpec(port, JOIN, mac, (ip,)))
        self.kube.create_or_update_ip(node_ip_cr(name, ip, mac, JOIN))
        if api:
            self.kube.add_node({"metadata": {"name": name}})
        return port

    def statefulset(self, name: str, replicas: int, *, deleting: bool = False) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": "default"}
        if deleting:
            meta["deletionTimestamp"] = builders.timestamp(NOW)
        self.kube.add_statefulset({"metadata": meta, "spec": {"replicas": replicas}})

    # -- reading state ---------------------------------------------------------------------

    def fake_nb(self) -> FakeNbClient:
        assert isinstance(self.nb, FakeNbClient)
        return self.nb

    def ports(self) -> set[str]:
        return {p.name for p in self.nb.list_ports()}

    def routes(self) -> set[str]:
        return {r.ip_prefix for r in self.nb.list_static_routes(LR)}

    def nats(self) -> set[str]:
        return {n.logical_ip for n in self.nb.list_nat_rules(LR)}

    def held(self, key: str) -> list[str]:
        return [a.ip for a in self.ipam.get_pod_address(key)]

    def deleted_metric(self, resource: str) -> float:
        value = self.registry.get_sample_value(
            "kube_ovn_controller_gc_deleted_total", {"resource": resource}
        )
        return value or 0.0

    def added_metric(self, resource: str) -> float:
        value = self.registry.get_sample_value(
            "kube_ovn_controller_gc_added_total", {"resource": resource}
        )
        return value or 0.0

    def runs_metric(self) -> float:
        return self.registry.get_sample_value("kube_ovn_controller_gc_runs_total") or 0.0
