"""A small cluster builder: the objects kube-ovn's flows leave for each pod, all consistent.

Every `add_*` writes what the controller would (annotations, IP CR, LSP, route), so a freshly
built snapshot audits clean; tests then break one thing and look at the findings.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.audit.audit import ClusterSnapshot
from controller.controllers.node import node_ip_cr
from controller.core import router_policy as rp
from controller.core.constants import VENDOR
from controller.core.model import Node, OwnerReference, Pod, StatefulSet, Subnet, VirtualMachine
from controller.core.object_fields import FrozenDict
from controller.ovn.api import AddressSetInfo, NatRule, PortInfo, RouterPolicy, StaticRoute
from controller.pod_logic import build_ip_cr

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ROUTER = "ovn-cluster"
DEFAULT = Subnet(
    "ovn-default", "10.16.0.0/16", "10.16.0.1", ("10.16.0.1",), default=True, protocol="IPv4"
)
JOIN = Subnet("join", "100.64.0.0/16", "100.64.0.1", ("100.64.0.1",), protocol="IPv4")


def mac(i: int) -> str:
    return f"00:00:00:00:00:{i:02x}"


@dataclass
class Cluster:
    subnets: dict[str, Subnet] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    ips: dict[str, dict[str, Any]] = field(default_factory=dict)
    ports: dict[str, PortInfo] = field(default_factory=dict)
    routes: list[StaticRoute] = field(default_factory=list)
    policies: dict[tuple[int, str], RouterPolicy] = field(default_factory=dict)
    sets: dict[str, set[str]] = field(default_factory=dict)
    nats: list[NatRule] = field(default_factory=list)
    statefulsets: list[StatefulSet] | None = None  # None: not read
    vms: list[VirtualMachine] | None = None

    def add_subnet(self, subnet: Subnet) -> None:
        self.subnets[subnet.name] = subnet
        # the switch-router link the subnet controller creates (vendor kube-ovn, type router)
        name = f"{subnet.name}-{ROUTER}"
        self.ports[name] = PortInfo(name, subnet.name, ("router",), (), {"vendor": VENDOR})

    def add_node(self, name: str, ip: str, mac_: str) -> None:
        """A node with join address `ip` and its priority-30000 policy (InternalIP via it)."""
        internal = f"172.18.0.{2 + len(self.nodes)}"
        self.nodes[name] = Node(
            name,
            (internal,),
            FrozenDict(
                {
                    "ovn.kubernetes.io/allocated": "true",
                    "ovn.kubernetes.io/ip_address": ip,
                    "ovn.kubernetes.io/mac_address": mac_,
                    "ovn.kubernetes.io/logical_switch": "join",
                    "ovn.kubernetes.io/cidr": JOIN.cidr_block,
                    "ovn.kubernetes.io/gateway": JOIN.gateway,
                }
            ),
        )
        self.ips[f"node-{name}"] = node_ip_cr(name, ip, mac_, JOIN.name)
        self.port(f"node-{name}", "join", mac_, ip, pod="")
        match = rp.dst_match(internal)
        self.policies[(rp.NODE_PRIORITY, match)] = RouterPolicy(
            ROUTER, rp.NODE_PRIORITY, match, "reroute", (ip,), rp.ids(rp.KIND_NODE, 4, node=name)
        )

    def ip_cr(
        self,
        name: str,
        pod_name: str,
        namespace: str,
        ip: str,
        mac_: str,
        subnet: str,
        *,
        node: str = "",
        provider: str = "ovn",
        pod_type: str = "",
    ) -> None:
        cr = build_ip_cr(
            pod_name=pod_name,
            ip=ip,
            mac=mac_,
            subnet=subnet,
            namespace=namespace,
            node_name=node,
            provider=provider,
            pod_type=pod_type,
            node_switch="join",
        )
        assert cr["metadata"]["name"] == name, cr["metadata"]["name"]
        self.ips[name] = cr

    def port(self, name: str, switch: str, mac_: str, ip: str, *, pod: str) -> None:
        ids = {"vendor": VENDOR}
        if pod:
            ids["pod"] = pod
        addresses = (f"{mac_} {ip.replace(',', ' ')}",)
        self.ports[name] = PortInfo(name, switch, addresses, (), ids)

    def add_pod(
        self,
        name: str,
        ip: str,
        mac_: str,
        *,
        namespace: str = "default",
        subnet: Subnet = DEFAULT,
        node: str = "n1",
        routed: bool = True,
        sts: str = "",
        extra: dict[str, str] | None = None,
        phase: str = "Running",
        restart_policy: str = "Always",
        objects: bool = True,
    ) -> Pod:
        annotations = {
            "ovn.kubernetes.io/allocated": "true",
            "ovn.kubernetes.io/ip_address": ip,
            "ovn.kubernetes.io/mac_address": mac_,
            "ovn.kubernetes.io/cidr": subnet.cidr_block,
            "ovn.kubernetes.io/gateway": subnet.gateway,
            "ovn.kubernetes.io/logical_switch": subnet.name,
            "ovn.kubernetes.io/network_type": "geneve",
            "ovn.kubernetes.io/pod_nic_type": "veth-pair",
            "ovn.kubernetes.io/logical_router": subnet.vpc,
        }
        if routed:
            annotations["ovn.kubernetes.io/routed"] = "true"
        annotations.update(extra or {})
        owners = (OwnerReference("apps/v1", "StatefulSet", sts, controller=True),) if sts else ()
        pod = Pod(
            namespace,
            name,
            uid=f"uid-{name}",
            annotations=FrozenDict(annotations),
            owner_references=owners,
            node_name=node,
            phase=phase,
            restart_policy=restart_policy,
        )
        self.pods[f"{namespace}/{name}"] = pod
        if objects:
            port = f"{name}.{namespace}"
            self.ip_cr(
                port,
                name,
                namespace,
                ip,
                mac_,
                subnet.name,
                node=node,
                pod_type="StatefulSet" if sts else "",
            )
            self.port(port, subnet.name, mac_, ip, pod=f"{namespace}/{name}")
            if routed and node:
                node_ip = self.nodes[node].annotations["ovn.kubernetes.io/ip_address"]
                self.route(ip, subnet.name, node, node_ip)
        return pod

    def route(self, ip: str, subnet: str, node: str, node_ip: str) -> None:
        """What handleUpdatePod writes for a distributed-gateway pod: its set entry and the
        set's reroute policy."""
        name = rp.set_name(subnet, node, 4)
        self.sets.setdefault(name, set()).add(ip)
        match = rp.src_set_match(name, 4)
        ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=subnet, node=node)
        self.policies[(rp.GATEWAY_PRIORITY, match)] = RouterPolicy(
            ROUTER, rp.GATEWAY_PRIORITY, match, "reroute", (node_ip,), ids
        )

    def own_policy(self, ip: str, hop: str, pod: str) -> None:
        match = rp.src_match(ip)
        ids = rp.ids(rp.KIND_POD, 4, pod=pod)
        self.policies[(rp.POD_PRIORITY, match)] = RouterPolicy(
            ROUTER, rp.POD_PRIORITY, match, "reroute", (hop,), ids
        )

    def unroute(self, ip: str) -> None:
        for entries in self.sets.values():
            entries.discard(ip)

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            now=NOW,
            pods=tuple(self.pods.values()),
            subnets=tuple(self.subnets.values()),
            nodes=tuple(self.nodes.values()),
            ips=tuple(copy.deepcopy(list(self.ips.values()))),
            ports=tuple(self.ports.values()),
            routes=tuple(self.routes),
            policies=tuple(self.policies.values()),
            address_sets=tuple(
                AddressSetInfo(
                    name,
                    tuple(sorted(ips)),
                    rp.ids(rp.KIND_GATEWAY, 4, subnet=name.split(".")[1], node="n"),
                )
                for name, ips in sorted(self.sets.items())
            ),
            nat_rules=tuple(self.nats),
            statefulsets=None if self.statefulsets is None else tuple(self.statefulsets),
            virtual_machines=None if self.vms is None else tuple(self.vms),
        )


def clean_cluster() -> Cluster:
    """Two subnets, one node, two routed pods."""
    c = Cluster()
    c.add_subnet(DEFAULT)
    c.add_subnet(JOIN)
    c.add_node("n1", "100.64.0.2", mac(1))
    c.add_pod("a", "10.16.0.2", mac(2))
    c.add_pod("b", "10.16.0.3", mac(3))
    return c
