"""Garbage collection of logical switch ports (kube-ovn v1.8.18 `markAndCleanLSP`), with the IP
CR, the IPAM address and the cluster router's static routes / NAT rules of each port's
addresses (see collector.py's "What is kept" and "Safety rules").

Only the port kinds this controller creates are judged (vendor kube-ovn,
`ovn.port_kinds.is_controller_port`: never router, localnet, transit or other components'
ports). A port is deleted only when it was an orphan in the previous pass too, and is re-checked
under its pod's key lock just before; its routes and NAT go only when no other IPAM key holds
the address now (it may already be a new pod's).
"""

from __future__ import annotations

import logging
from collections import Counter

from controller.apiclient.errors import KubeApiError
from controller.controllers.gc.kept import KeepRules, Kept, OrphanMarks, SweepActions
from controller.controllers.gc.static_routes import RESOURCE_STATIC_ROUTE
from controller.core.address import host_prefix
from controller.core.constants import NODE_PORT_PREFIX, VENDOR
from controller.ipam import IPAM
from controller.kube.api import KubeApi
from controller.ovn import logic as ovn_logic
from controller.ovn.api import NbClient, OvnError, PortInfo
from controller.ovn.external_ids import POD_KEY
from controller.ovn.port_kinds import is_controller_port
from controller.view import CacheView

LOG = logging.getLogger(__name__)

RESOURCE_LSP = "lsp"
RESOURCE_IP = "ip"
RESOURCE_NAT = "nat"


class PortSweeper:
    """One mark-and-sweep pass over the kube-ovn ports per `sweep()` call (not thread-safe: the
    `GarbageCollector`'s lock serialises it)."""

    def __init__(
        self,
        *,
        nb: NbClient,
        kube: KubeApi,
        ipam: IPAM,
        view: CacheView,
        rules: KeepRules,
        router: str,
        actions: SweepActions,
    ) -> None:
        self._nb = nb
        self._kube = kube
        self._ipam = ipam
        self._view = view
        self._rules = rules
        self._router = router
        self._actions = actions
        self._marks = OrphanMarks()

    def marked(self) -> bool:
        """Did the last pass find an orphan (which the next pass may delete)?"""
        return self._marks.any()

    def list_ports(self) -> list[PortInfo]:
        # NOTE: kube-ovn v1.8 markAndCleanLSP judges every vendor=kube-ovn port of type "" it
        # does not recognise, which takes the localnet uplinks of underlay subnets (and would
        # take transit and other components' ports); only our own kinds are judged here.
        return [p for p in self._nb.list_ports(VENDOR) if is_controller_port(p)]

    def sweep(self, ports: list[PortInfo], kept: Kept) -> list[str]:
        """Mark the orphans of `ports` (listed before `kept` was read), delete those marked
        in the previous pass too; returns the names deleted."""
        names = {p.name for p in ports}
        orphans = {p.name: p for p in ports if not self._port_kept(p, kept)}
        for port_name, key in sorted(kept.expected_ports.items()):
            if port_name not in names:
                # NOTE: the inspection (PodController.inspect_pods) re-creates it.
                LOG.warning("lsp lost for pod %s (port %s)", key, port_name)
        due = [orphans[n] for n in self._marks.due(orphans)]
        LOG.info("lsp gc: %d ports, %d orphans, %d due", len(ports), len(orphans), len(due))
        if not due:
            return []
        # address -> how many rows, read once per pass (a port's cleanup is then O(1))
        routes = Counter(
            ip
            for r in self._nb.list_static_routes(self._router)
            if (ip := host_prefix(r.ip_prefix)) is not None
        )
        nats = Counter(n.logical_ip for n in self._nb.list_nat_rules(self._router))
        deleted: list[str] = []
        for port in due:
            try:
                gone = self._delete_orphan(port, kept, routes, nats)
            except (OvnError, KubeApiError) as exc:
                LOG.warning("gc lsp %s failed, retrying next pass: %s", port.name, exc)
                continue
            if gone:
                deleted.append(port.name)
            else:
                self._marks.unmark(port.name)
        self._actions.count(RESOURCE_LSP, len(deleted))
        return deleted

    def _port_kept(self, port: PortInfo, kept: Kept) -> bool:
        if port.name in kept.kept_names:
            return True
        key = port.external_ids.get(POD_KEY, "")
        if not key:
            return False
        return key in kept.kept_keys or self._rules.absent_key_kept(key)

    def _delete_orphan(
        self,
        port: PortInfo,
        kept: Kept,
        routes: Counter[str],
        nats: Counter[str],
    ) -> bool:
        key = port.external_ids.get(POD_KEY, "")
        is_node_port = not key and port.name.startswith(NODE_PORT_PREFIX)
        with self._actions.locked(key):
            if key and self._rules.key_kept_now(key):
                LOG.info("lsp %s is in use again (%s); not deleting", port.name, key)
                return False
            if is_node_port and self._view.has_node(port.name[len(NODE_PORT_PREFIX) :]):
                return False
            LOG.info("gc logical switch port %s (pod %s)", port.name, key or "-")
            self._delete_routes_and_nat(ovn_logic.address_ips(port.addresses), key, routes, nats)
            self._nb.delete_port(port.name)
            self._actions.release(key or (port.name if is_node_port else ""), kept)
            if self._kube.delete_ip(port.name):
                self._actions.count(RESOURCE_IP, 1)
        return True

    def _delete_routes_and_nat(
        self, ips: set[str], key: str, routes: Counter[str], nats: Counter[str]
    ) -> None:
        for ip in sorted(ips):
            if self._held_by_other(ip, key):
                LOG.info("address %s now belongs to another pod; keeping its routes", ip)
                continue
            if routes[ip]:
                self._nb.delete_static_route(ip, self._router)
                self._actions.count(RESOURCE_STATIC_ROUTE, routes.pop(ip))
            if nats[ip]:
                self._nb.delete_nat_rule(ip, self._router)
                self._actions.count(RESOURCE_NAT, nats.pop(ip))

    def _held_by_other(self, ip: str, key: str) -> bool:
        for subnet in self._ipam.subnet_names():
            owner = self._ipam.get_ip_owner(ip, subnet)
            if owner is not None and owner != key:
                return True
        return False
