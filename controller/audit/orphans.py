"""The audit of what is left behind: IP CRs and LSPs as claimants of addresses and MACs,
orphan LSPs / IP CRs / src-ip routes / routing entries and policies / NAT rules, and addresses
or MACs held twice."""

from __future__ import annotations

from controller.audit.findings import (
    KIND_DUPLICATE_ADDRESS,
    KIND_DUPLICATE_MAC,
    KIND_MALFORMED,
    KIND_ORPHAN_IP_CR,
    KIND_ORPHAN_LSP,
    KIND_ORPHAN_NAT,
    KIND_ORPHAN_ROUTE,
)
from controller.audit.routing import check_routing_orphans, routing_index
from controller.audit.state import AuditState, field_str, lsp_addresses, owner_hint
from controller.core import keep
from controller.core.address import canonical_mac, host_prefix, split_ips
from controller.core.constants import NODE_PORT_PREFIX, POLICY_SRC_IP
from controller.ovn.port_kinds import is_controller_port


class OrphanChecks(AuditState):
    """Orphans and duplicates (after the pod checks filled `expected`, `kept`, claims)."""

    def _type_keeps(self, pod_type: str, namespace: str, name: str) -> bool:
        return self.owners.keeps(
            lambda owners: keep.pod_type_keeps(pod_type, namespace, name, owners=owners)
        )

    def read_objects(self) -> None:
        for name, raw in sorted(self.ip_crs.items()):
            subnet_name = field_str(raw, "spec", "subnet")
            ips = split_ips(field_str(raw, "spec", "ipAddress"))
            mac = canonical_mac(field_str(raw, "spec", "macAddress"))
            obj = f"IP {name}"
            pod_type = field_str(raw, "spec", "podType")
            if keep.is_kept_pod_type(pod_type) and self._type_keeps(
                pod_type, field_str(raw, "spec", "namespace"), field_str(raw, "spec", "podName")
            ):
                self.kept.add(name)
            if ips is None:
                self.add(
                    KIND_MALFORMED,
                    obj,
                    f"spec.ipAddress {field_str(raw, 'spec', 'ipAddress')!r}"
                    " is not a list of addresses",
                )
                continue
            self.claim(obj, subnet_name, name, "ip-cr", ips, mac)
        for port in self.snap.ports:
            parsed = lsp_addresses(port)
            if parsed is None:
                continue
            mac, ips = parsed
            self.claim(f"port {port.name}", port.switch, port.name, "lsp", ips, mac)

    def _legit(self, name: str) -> bool:
        if name in self.expected or name in self.kept:
            return True
        if name.startswith(NODE_PORT_PREFIX):
            return name[len(NODE_PORT_PREFIX) :] in self.nodes
        return False

    def check_orphans(self) -> None:
        for port in self.snap.ports:
            if not is_controller_port(port):
                continue  # router links, localnet uplinks, transit and foreign ports
            if not self._legit(port.name):
                owner = port.external_ids.get("pod", "") or "no pod"
                self.add(
                    KIND_ORPHAN_LSP,
                    f"port {port.name}",
                    f"kube-ovn port ({owner}, {list(port.addresses)}) on {port.switch!r} has "
                    "no alive pod, node or kept StatefulSet/VM address",
                )
        for name, raw in sorted(self.ip_crs.items()):
            if not self._legit(name):
                ip, subnet = field_str(raw, "spec", "ipAddress"), field_str(raw, "spec", "subnet")
                ns, pod = field_str(raw, "spec", "namespace"), field_str(raw, "spec", "podName")
                self.add(
                    KIND_ORPHAN_IP_CR,
                    f"IP {name}",
                    f"{ip} in {subnet!r} (pod {ns}/{pod}) "
                    "has no alive pod, node or kept StatefulSet/VM owner"
                    + owner_hint(field_str(raw, "spec", "podType")),
                )
        for route in self.snap.routes:
            host = host_prefix(route.ip_prefix)
            if route.policy != POLICY_SRC_IP or host is None or host in self.alive_ips:
                continue
            self.add(
                KIND_ORPHAN_ROUTE,
                f"route {route.ip_prefix}",
                f"src-ip route via {route.nexthop} on {route.router}: no alive pod has {host}",
            )
        check_routing_orphans(self, routing_index(self))
        for nat in self.snap.nat_rules:
            host = host_prefix(nat.logical_ip)
            if host is None or host in self.alive_ips:
                continue
            self.add(
                KIND_ORPHAN_NAT,
                f"nat {nat.type} {nat.logical_ip}",
                f"{nat.type} {nat.external_ip} on {nat.router}: no alive pod has {host}",
            )

    def check_duplicates(self) -> None:
        for kind, claims in (
            (KIND_DUPLICATE_ADDRESS, self.ip_claims),
            (KIND_DUPLICATE_MAC, self.mac_claims),
        ):
            for (subnet, value), owners in sorted(claims.items()):
                if len(owners) < 2:
                    continue
                holders = ", ".join(
                    f"{o} [{', '.join(sorted(src))}]" for o, src in sorted(owners.items())
                )
                self.add(kind, f"{value} in {subnet or '<no subnet>'}", f"held by {holders}")
