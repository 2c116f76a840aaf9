"""`RoutingInputs`: what a routing key's rows are computed from, read through the `CacheView`.

The cached subnets, nodes and pods, plus the pods `route_pod` routed whose allocation the cache
does not show yet (a pod add writes its rows before it patches its annotations): a key
reconciled in between must keep their rows, so they count as "pending" on their node key until
the cache has the allocation, the pod is gone or replaced, or its address is released.

A malformed Subnet reads as (None, malformed=True) and the reconciler skips its keys; a
malformed Node reads as absent; a malformed pod is left out (each logged by its own handler).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import datetime

from controller.core.errors import MalformedObjectError
from controller.core.model import Node, Pod, Subnet
from controller.kube.api import KubeObject
from controller.ovn.api import NatChange, RouterPolicy
from controller.pod_logic import routing_state as rs
from controller.view import CacheView

LOG = logging.getLogger(__name__)


class RoutingInputs:
    """The reads of the routing reconciler (see the module docstring)."""

    def __init__(self, view: CacheView) -> None:
        self._view = view
        # node key -> pod key -> the pod as `route_pod` routed it
        self._pending_lock = threading.Lock()
        self._pending: dict[str, dict[str, Pod]] = {}

    def subnet(self, name: str) -> tuple[Subnet | None, bool]:
        """(the cached subnet or None, whether it is malformed)."""
        try:
            return self._view.subnet(name), False
        except MalformedObjectError as exc:
            LOG.warning("routing of subnet %s skipped: malformed: %s", name, exc)
            return None, True

    def subnets(self) -> list[Subnet]:
        return self._view.subnets()

    def node(self, name: str) -> Node | None:
        try:
            return self._view.node(name)
        except MalformedObjectError as exc:
            LOG.warning("node %s is malformed, routed as absent: %s", name, exc)
            return None

    def nodes(self) -> dict[str, Node]:
        return {n.name: n for n in self._view.nodes()}

    def node_names(self) -> frozenset[str]:
        """The cached nodes' names (a malformed node counts: its key removes its rows)."""
        return self._view.node_names()

    def internal_ip_owners(self, node: Node) -> dict[str, str]:
        """Of `node`'s InternalIPs, which node routes each: the first by name of the nodes
        reporting it (`pod_logic.node_policies.internal_ip_owners`), read per address from
        the node cache as it is now, so the answer costs the node's addresses, not the
        cluster's nodes."""
        owners: dict[str, str] = {}
        for ip in node.internal_ips:
            names = self._view.node_names_with_internal_ip(ip)
            owners[ip] = names[0] if names else node.name
        return owners

    def _models(self, raws: Iterable[KubeObject]) -> list[Pod]:
        out = []
        for raw in raws:
            try:
                out.append(self._view.pod_model(raw))
            except MalformedObjectError:
                continue
        return out

    def pods_on(self, subnet: str, node: str) -> list[Pod]:
        """The pods of node key (`subnet`, `node`): cached, or routed and not cached yet."""
        pods = {p.key: p for p in self._models(self._view.pods_raw_on_node(node))}
        with self._pending_lock:
            pending = self._pending.get(rs.node_key(subnet, node), {})
            for key, routed in list(pending.items()):
                cached = pods.get(key)
                if _settled(cached, routed):
                    del pending[key]
                else:
                    pods[key] = routed
        return list(pods.values())

    def holders(self, ip: str) -> list[Pod]:
        """The pods holding `ip` in their default network (cached or pending; a pending pod
        the cache shows gone, replaced or allocated is dropped here too: a key reading its
        claims must not wait for the pod's node key to run first)."""
        pods = {p.key: p for p in self._models(self._view.pods_raw_with_ip(ip))}
        with self._pending_lock:
            for pending in self._pending.values():
                for key, routed in list(pending.items()):
                    if ip not in rs.pod_ips(routed):
                        continue
                    if self._settled_key(key, routed):
                        del pending[key]
                    else:
                        pods.setdefault(key, routed)
        return list(pods.values())

    def _settled_key(self, key: str, routed: Pod) -> bool:
        """Does the cache show pod `key` gone, replaced, or with its allocation (so `routed`
        pends no more)?"""
        raw = self._view.pod_raw(key)
        if raw is None:
            return True
        try:
            cached = self._view.pod_model(raw)
        except MalformedObjectError:
            return True
        return _settled(cached, routed)

    def routed(self, node_key: str, pod: Pod) -> None:
        """`pod`'s rows were written under `node_key` from the allocation it carries."""
        with self._pending_lock:
            self._pending.setdefault(node_key, {})[pod.key] = pod

    def forget(self, pod_key: str) -> None:
        """The pod's address is being released: it holds nothing pending any more."""
        with self._pending_lock:
            for pending in self._pending.values():
                pending.pop(pod_key, None)

    def claims(self, cfg: rs.RoutingConfig, now: datetime, exclude: str = "") -> rs.Claims:
        """What the live pods holding an address want for it (outside node key `exclude`)."""

        def claims(ip: str) -> rs.PodRows:
            policies: list[RouterPolicy] = []
            nats: list[NatChange] = []
            for pod in self.holders(ip):
                if not rs.routable(pod, now):
                    continue
                subnet_name = rs.pod_subnet(pod)
                if exclude and rs.node_key(subnet_name, pod.node_name) == exclude:
                    continue
                subnet, _ = self.subnet(subnet_name)
                if subnet is None or not rs.routed_subnet(subnet, cfg):
                    continue
                rows = rs.pod_rows(pod, subnet, self.node(pod.node_name), cfg)
                policies += rows.policies
                nats += rows.nats
            return rs.PodRows(tuple(policies), (), tuple(nats))

        return claims


def _settled(cached: Pod | None, routed: Pod) -> bool:
    """A pod routed before the cache showed its allocation pends no more once the cache shows
    it gone, replaced (another uid), or with its allocation."""
    return cached is None or cached.uid != routed.uid or bool(rs.pod_ips(cached))
