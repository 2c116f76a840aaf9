"""The audit of IPAM: rebuild it as a restarted controller would (kube-ovn InitIPAM) and
report every address that rebuild could not give back to its holder."""

from __future__ import annotations

from controller.audit.findings import KIND_IPAM_DISAGREES
from controller.audit.state import AuditState, field_str
from controller.core import annotations as ann
from controller.core import keep
from controller.core.address import split_ips
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    annotation_key,
)
from controller.core.naming import ip_cr_name, node_port_name, pod_key
from controller.ipam import IPAM
from controller.ipam.errors import IPAMError
from controller.pod_logic import get_name_by_pod, is_pod_alive


class IpamRebuildCheck(AuditState):
    """`check_ipam` (see the module docstring)."""

    def check_ipam(self) -> None:
        """Rebuild IPAM as kube-ovn InitIPAM does (subnets, kept IP CRs, pods, nodes) and
        report what it cannot restore."""
        ipam = IPAM()
        for subnet in self.snap.subnets:
            try:
                ipam.add_or_update_subnet(
                    subnet.name, subnet.cidr_block, subnet.exclude_ips, quiet=True
                )
            except IPAMError as e:
                self.add(KIND_IPAM_DISAGREES, f"subnet {subnet.name}", f"cannot be loaded: {e}")
        self._claim_kept_ip_crs(ipam)
        self._claim_pods(ipam)
        self._claim_nodes(ipam)

    def _claim(self, ipam: IPAM, obj: str, key: str, ip: str, mac: str, subnet: str) -> None:
        """Give `ip` to `key` as the rebuild would; a refusal is a finding about `obj`."""
        if subnet not in self.subnets:
            return  # no subnet, no address to hand out twice (annotation-mismatch says it)
        try:
            # quiet: the audit's own output is its report, not a rebuild's allocations
            ipam.get_static_address(key, ip, mac, subnet, quiet=True)
        except IPAMError as e:
            holders = {
                owner
                for part in ip.split(",")
                if (owner := ipam.get_ip_owner(part.strip(), subnet)) not in (None, key)
                and owner not in str(e)
            }
            held = f" (held by {', '.join(sorted(holders))})" if holders else ""
            self.add(
                KIND_IPAM_DISAGREES,
                obj,
                f"a restarted controller cannot give {ip} in {subnet!r} to {key}: {e}{held}",
            )

    def _claim_kept_ip_crs(self, ipam: IPAM) -> None:
        for name, raw in sorted(self.ip_crs.items()):
            if not keep.is_kept_pod_type(field_str(raw, "spec", "podType")):
                continue
            ns, pod_name = field_str(raw, "spec", "namespace"), field_str(raw, "spec", "podName")
            key = pod_key(ns, pod_name) if ns else node_port_name(pod_name)
            ip = field_str(raw, "spec", "ipAddress")
            if ip and split_ips(ip) is not None:
                self._claim(
                    ipam,
                    f"IP {name}",
                    key,
                    ip,
                    field_str(raw, "spec", "macAddress"),
                    field_str(raw, "spec", "subnet"),
                )

    def _claim_pods(self, ipam: IPAM) -> None:
        claimed: set[str] = set()
        for pod in self.snap.pods:
            if pod.host_network or not keep.restored_by_rebuild(
                pod, alive=is_pod_alive(pod, self.snap.now)
            ):
                continue
            name = get_name_by_pod(pod, self.keep_vm_ip)
            for provider in ann.allocated_providers(pod.annotations):
                a = pod.annotations
                ip = a.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
                if not ip or split_ips(ip) is None:
                    continue  # reported as annotation-mismatch (alive) or irrelevant
                owner = ip_cr_name(name, pod.namespace, provider)
                if owner in claimed:
                    continue  # VM pods of one VM share the VM's address
                claimed.add(owner)
                obj = f"pod {pod.key}" + ("" if provider == OVN_PROVIDER else f" ({provider})")
                self._claim(
                    ipam,
                    obj,
                    pod_key(pod.namespace, name),
                    ip,
                    a.get(annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider), ""),
                    a.get(annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""),
                )

    def _claim_nodes(self, ipam: IPAM) -> None:
        for node in self.snap.nodes:
            a = node.annotations
            ip = a.get(IP_ADDRESS_ANNOTATION, "")
            if a.get(ALLOCATED_ANNOTATION) != "true" or not ip or split_ips(ip) is None:
                continue
            self._claim(
                ipam,
                f"node {node.name}",
                node_port_name(node.name),
                ip,
                a.get(MAC_ADDRESS_ANNOTATION, ""),
                a.get(LOGICAL_SWITCH_ANNOTATION, "") or self.config.node_switch,
            )
