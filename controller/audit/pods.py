"""The audit of every alive pod's networks against its IP CR, its logical switch port (and
its security groups) and its routing (`controller.audit.routing`) / NAT rules; and of every
node's join address."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.audit import security_groups as sgaudit
from controller.audit.findings import (
    KIND_ANNOTATION_MISMATCH,
    KIND_IP_CR_MISMATCH,
    KIND_IP_CR_MISSING,
    KIND_LSP_ADDRESS_MISMATCH,
    KIND_LSP_MISMATCH,
    KIND_LSP_MISSING,
    KIND_NAT_MISSING,
    KIND_POD_NOT_ALLOCATED,
    KIND_POD_NOT_ROUTED,
    KIND_POD_REFUSED,
    KIND_SG_MISMATCH,
)
from controller.audit.routing import (
    check_node_policies,
    check_pod_routing,
    check_subnet_gateways,
    routing_index,
)
from controller.audit.state import AuditState, Net, field_str, lsp_addresses
from controller.core import annotations as ann
from controller.core import keep
from controller.core.address import (
    canonical_ip,
    canonical_mac,
    is_same_family,
    is_valid_mac,
    same_family,
    split_ips,
)
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION_TEMPLATE,
    DEFAULT_NETWORK_ANNOTATION,
    DEFAULT_VPC,
    EIP_ANNOTATION,
    GATEWAY_ANNOTATION_TEMPLATE,
    GATEWAY_TYPE_DISTRIBUTED,
    IP_ADDRESS_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    NORTH_GATEWAY_ANNOTATION,
    OVN_PROVIDER,
    ROUTED_ANNOTATION,
    SNAT_ANNOTATION,
    SUBNET_NAME_LABEL,
    annotation_key,
)
from controller.core.model import Pod
from controller.core.naming import ip_cr_name, node_port_name, pod_key
from controller.ovn import external_ids as ext
from controller.ovn.logic import sg_eligible
from controller.pod_logic import get_name_by_pod, is_ovn_provider, release_due

_IP_ADDRESS_SUFFIX = IP_ADDRESS_ANNOTATION_TEMPLATE.format(provider="")


class PodChecks(AuditState):
    """Pods and nodes: annotations, IP CRs, LSPs, security groups, routes and NAT."""

    def _owner_keeps(self, pod: Pod) -> bool:
        keep_vm_ip = self.keep_vm_ip
        return self.owners.keeps(
            lambda owners: keep.owner_keeps(pod, keep_vm_ip=keep_vm_ip, owners=owners)
        )

    def read_pods(self) -> None:
        for pod in self.snap.pods:
            if pod.host_network:
                continue
            if self._owner_keeps(pod):
                name = get_name_by_pod(pod, self.keep_vm_ip)
                for provider in ann.allocated_providers(pod.annotations):
                    self.kept.add(ip_cr_name(name, pod.namespace, provider))
                # NOTE: while the kept pod object exists (terminating on a node that never
                # confirms), its update events change nothing and no delete runs, so its
                # src-ip route and NAT stay, as in kube-ovn; they are not orphans.
                self.alive_ips.update(
                    split_ips(pod.annotations.get(IP_ADDRESS_ANNOTATION, "")) or ()
                )
        for pod in self.alive:
            if release_due(pod, self.snap.now) and not self._owner_keeps(pod):
                # NOTE: the controller may have released its network already (its cleanup is
                # due), or not yet: neither is wrong, and what is left is not an orphan.
                name = get_name_by_pod(pod, self.keep_vm_ip)
                for provider in ann.allocated_providers(pod.annotations):
                    self.kept.add(ip_cr_name(name, pod.namespace, provider))
                    ips = pod.annotations.get(
                        annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider)
                    )
                    self.alive_ips.update(split_ips(ips or "") or ())
                continue
            self.read_pod(pod)
            # NOTE: inspection clears `allocated` when the port is lost and re-adds the pod; until
            # then its IP CR (and any port) still belong to an alive pod, not to nobody.
            name = get_name_by_pod(pod, self.keep_vm_ip)
            for key in pod.annotations:
                if key.endswith(_IP_ADDRESS_SUFFIX) and len(key) > len(_IP_ADDRESS_SUFFIX):
                    provider = key[: -len(_IP_ADDRESS_SUFFIX)]
                    self.kept.add(ip_cr_name(name, pod.namespace, provider))
                    self.alive_ips.update(split_ips(pod.annotations[key]) or ())

    def read_pod(self, pod: Pod) -> None:
        a = pod.annotations
        providers = ann.allocated_providers(a)
        obj = f"pod {pod.key}"
        if not providers or (
            DEFAULT_NETWORK_ANNOTATION not in a and a.get(ALLOCATED_ANNOTATION) != "true"
        ):
            self.add_pending(
                KIND_POD_NOT_ALLOCATED, pod, "alive pod has no allocated default network"
            )
        elif a.get(LOGICAL_SWITCH_ANNOTATION, "") not in self.subnets and self.refused(pod):
            # NOTE: allocated by its own annotations on a subnet that does not exist: the
            # controller never made its network and said so in a Warning Event; that is the one
            # finding, not the missing IP CR, port and routes it never had.
            self.add(KIND_POD_REFUSED, obj, self.refusals[pod.key][1])
            return
        elif pod.node_name and a.get(ROUTED_ANNOTATION) != "true" and OVN_PROVIDER in providers:
            self.add_pending(
                KIND_POD_NOT_ROUTED, pod, f"scheduled on {pod.node_name} but not routed"
            )
        if a.get(ROUTED_ANNOTATION) == "true" and not pod.node_name:
            self.add(KIND_ANNOTATION_MISMATCH, obj, "routed=true but the pod has no nodeName")
        name = get_name_by_pod(pod, self.keep_vm_ip)
        for provider in providers:
            net = self.read_net(pod, provider, name)
            if net is not None:
                self.nets.append(net)

    def read_net(self, pod: Pod, provider: str, name: str) -> Net | None:
        a = pod.annotations
        obj = f"pod {pod.key}" + ("" if provider == OVN_PROVIDER else f" ({provider})")
        switch = a.get(annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), "")
        ip_text = a.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
        mac = a.get(annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
        owner = ip_cr_name(name, pod.namespace, provider)
        self.expected.add(owner)
        ips = split_ips(ip_text) if ip_text else None
        problems = []
        if ips is None:
            problems.append(f"allocated but ip_address {ip_text!r} is not a list of addresses")
        if not is_valid_mac(mac):
            problems.append(f"allocated but mac_address {mac!r} is not a MAC")
        subnet = self.subnets.get(switch)
        if subnet is None:
            problems.append(f"logical_switch {switch!r} is not an existing subnet")
        else:
            cidr = a.get(annotation_key(CIDR_ANNOTATION_TEMPLATE, provider), "")
            gateway = a.get(annotation_key(GATEWAY_ANNOTATION_TEMPLATE, provider), "")
            if cidr != subnet.cidr_block:
                problems.append(f"cidr {cidr!r} but subnet {switch} has {subnet.cidr_block!r}")
            if gateway != subnet.gateway:
                problems.append(f"gateway {gateway!r} but subnet {switch} has {subnet.gateway!r}")
        for problem in problems:
            self.add(KIND_ANNOTATION_MISMATCH, obj, problem)
        if ips is None:
            return None
        self.claim(obj, switch, owner, "pod", ips, mac)
        self.alive_ips.update(ips)
        return Net(
            pod,
            provider,
            owner,
            name,
            tuple(ips),
            canonical_mac(mac),
            switch,
        )

    # -- per-network objects -----------------------------------------------------------------

    def check_ip_cr(self, obj: str, owner: str, want: Mapping[str, str]) -> None:
        raw = self.ip_crs.get(owner)
        if raw is None:
            self.add(KIND_IP_CR_MISSING, obj, f"no IP CR {owner}")
            return
        for fld, value in want.items():
            have = field_str(raw, "spec", fld)
            if fld == "ipAddress":
                same = split_ips(have) == split_ips(value) if have else not value
            elif fld == "macAddress":
                same = canonical_mac(have) == canonical_mac(value)
            else:
                same = have == value
            if not same:
                self.add(
                    KIND_IP_CR_MISMATCH, obj, f"IP CR {owner} has {fld} {have!r}, want {value!r}"
                )
        # NOTE: subnet status counters select IP CRs by these labels (kube-ovn createOrUpdateCrdIPs)
        meta = raw.get("metadata")
        labels = (meta.get("labels") if isinstance(meta, Mapping) else None) or {}
        subnet = want.get("subnet", "")
        if (
            isinstance(labels, Mapping)
            and subnet
            and (labels.get(SUBNET_NAME_LABEL) != subnet or subnet not in labels)
        ):
            self.add(
                KIND_IP_CR_MISMATCH,
                obj,
                f"IP CR {owner} labels {dict(labels)} lack {SUBNET_NAME_LABEL}={subnet} / {subnet}",
            )

    def check_lsp(
        self, obj: str, owner: str, switch: str, mac: str, ips: Sequence[str], pod_ref: str
    ) -> None:
        port = self.ports.get(owner)
        if port is None:
            self.add(KIND_LSP_MISSING, obj, f"no logical switch port {owner}")
            return
        if port.switch != switch:
            self.add(
                KIND_LSP_MISMATCH,
                obj,
                f"port {owner} is on switch {port.switch!r}, want {switch!r}",
            )
        have_pod = port.external_ids.get("pod", "")
        if pod_ref and have_pod != pod_ref:
            self.add(
                KIND_LSP_MISMATCH,
                obj,
                f"port {owner} has external_ids:pod={have_pod!r}, want {pod_ref!r}",
            )
        parsed = lsp_addresses(port)
        want = f"{mac} {' '.join(ips)}"
        if parsed is None or parsed[0] != mac or sorted(parsed[1]) != sorted(ips):
            self.add(
                KIND_LSP_ADDRESS_MISMATCH,
                obj,
                f"port {owner} has addresses {list(port.addresses)}, want [{want!r}]",
            )
        if port.port_security:
            # NOTE: stale port_security drops the pod's traffic even when `addresses` is right;
            # dual stack entries carry masks (kube-ovn CreatePort), so compare bare addresses.
            tokens = port.port_security[0].split()
            have_ips = sorted(canonical_ip(t.split("/", 1)[0]) or t for t in tokens[1:])
            if not tokens or canonical_mac(tokens[0]) != mac or have_ips != sorted(ips):
                self.add(
                    KIND_LSP_ADDRESS_MISMATCH,
                    obj,
                    f"port {owner} has port_security {list(port.port_security)}, want [{want!r}]",
                )

    def check_nets(self) -> None:
        for net in self.nets:
            pod = net.pod
            obj = f"pod {pod.key}" + ("" if net.provider == OVN_PROVIDER else f" ({net.provider})")
            self.check_ip_cr(
                obj,
                net.owner,
                {
                    "ipAddress": ",".join(net.ips),
                    "macAddress": net.mac,
                    "subnet": net.switch,
                    "namespace": pod.namespace,
                    "podName": net.pod_name,
                },
            )
            if is_ovn_provider(net.provider):
                self.check_lsp(
                    obj,
                    net.owner,
                    net.switch,
                    net.mac,
                    net.ips,
                    pod_key(pod.namespace, net.pod_name),
                )
                if self.port_groups is not None:
                    self.check_security(obj, net)
            if net.provider == OVN_PROVIDER:
                self.check_routing(net)

    def check_security(self, obj: str, net: Net) -> None:
        """Port security and security-group membership of one OVN network's port."""
        port = self.ports.get(net.owner)
        groups = self.port_groups
        if port is None or groups is None:
            return
        request = ann.PodNetworkRequest.from_annotations(net.pod.annotations, net.provider)
        want = request.security_group_names() if request.port_security else ()
        if request.port_security != bool(port.port_security):
            have = "has" if port.port_security else "lacks"
            self.add(KIND_SG_MISMATCH, obj, f"port {net.owner} {have} port_security")
        have_sgs = ext.split_sgs(port.external_ids.get(ext.SECURITY_GROUPS_KEY, ""))
        if sorted(have_sgs) != sorted(want):
            self.add(
                KIND_SG_MISMATCH,
                obj,
                f"port {net.owner} has security_groups {list(have_sgs)}, want {list(want)}",
            )
        if not want or not port.port_security:
            return
        for sg in (*want, ext.DENY_ALL_SG):
            if not sgaudit.expects_membership(sg, self.sg_names, groups):
                continue
            if net.owner not in groups.get(sg, ()):
                self.add(
                    KIND_SG_MISMATCH, obj, f"port {net.owner} missing from security group {sg}"
                )

    def check_port_groups(self) -> None:
        """No port stays in a security group it no longer belongs to."""
        if self.port_groups is None:
            return
        for sg, members in sorted(self.port_groups.items()):
            for name in sorted(members):
                port = self.ports.get(name)
                if port is None:
                    continue  # not a kube-ovn port
                ids = port.external_ids
                eligible = sg_eligible(port.port_security)
                if sg == ext.DENY_ALL_SG:
                    belongs = eligible and bool(ids.get(ext.SECURITY_GROUPS_KEY))
                else:
                    belongs = eligible and ids.get(ext.associated_sg_key(sg)) == "true"
                if not belongs:
                    self.add(
                        KIND_SG_MISMATCH,
                        f"security group {sg}",
                        f"port {name} is a member but not associated with it",
                    )

    def check_routing(self, net: Net) -> None:
        pod = net.pod
        a = pod.annotations
        subnet = self.subnets.get(net.switch)
        if (
            a.get(ROUTED_ANNOTATION) != "true"
            or not pod.node_name  # reported as annotation-mismatch
            or subnet is None
            or subnet.vlan
            or subnet.vpc != DEFAULT_VPC
        ):
            return
        obj = f"pod {pod.key}"
        eip, snat = a.get(EIP_ANNOTATION, ""), a.get(SNAT_ANNOTATION, "")
        north = a.get(NORTH_GATEWAY_ANNOTATION, "")
        node = self.nodes.get(pod.node_name)
        tunnel = node.annotations.get(IP_ADDRESS_ANNOTATION, "") if node else ""
        node_hops = [h.strip() for h in tunnel.split(",")] if tunnel else None
        own: bool | None = None
        hops: list[str] | None = None
        if self.config.enable_eip_snat and (eip or snat):
            own = True  # via the external gateway (a ConfigMap the audit does not read)
        elif north:
            own, hops = True, [h.strip() for h in north.split(",")]
        elif subnet.gateway_type == GATEWAY_TYPE_DISTRIBUTED:
            own = False
        routed_ips = net.ips
        if own is False and node_hops is not None:
            # kube-ovn (pod.go handleUpdatePod) routes a pod address only via a node (join)
            # address of its own family: with an IPv4-only join subnet a dual-stack pod has no
            # IPv6 entry, and is routed all the same.
            routed_ips = tuple(
                ip for ip in net.ips if any(is_same_family(h, ip) for h in node_hops)
            )
        if own is not None:
            check_pod_routing(
                self,
                routing_index(self),
                obj,
                routed_ips,
                subnet=subnet.name,
                node=pod.node_name,
                node_hops=node_hops,
                pod_hops=hops,
                own_policy=own,
            )
        # else centralized: the subnet controller routes the whole CIDR
        if self.config.enable_eip_snat:
            for ip in net.ips:
                rules = self.nat_by_ip.get(ip, [])
                # each pod address is translated by the external address of its own family
                eip = same_family(a.get(EIP_ANNOTATION, ""), ip)
                snat = same_family(a.get(SNAT_ANNOTATION, ""), ip)
                if eip and not any(
                    n.type == NAT_TYPE_DNAT_AND_SNAT and n.external_ip == eip for n in rules
                ):
                    self.add(KIND_NAT_MISSING, obj, f"no dnat_and_snat {eip} -> {ip}")
                if snat and not any(
                    n.type == NAT_TYPE_SNAT and n.external_ip == snat for n in rules
                ):
                    self.add(KIND_NAT_MISSING, obj, f"no snat {ip} -> {snat}")

    def check_gateways(self) -> None:
        """Each routed subnet's subnet-wide reroute and active gateway, and each node's own
        reroutes (`audit.routing`)."""
        check_subnet_gateways(self, routing_index(self))
        check_node_policies(self, routing_index(self))

    # -- nodes -------------------------------------------------------------------------------

    def check_nodes(self) -> None:
        for node in self.snap.nodes:
            a = node.annotations
            if a.get(ALLOCATED_ANNOTATION) != "true":
                continue
            owner = node_port_name(node.name)
            obj = f"node {node.name}"
            ips = split_ips(a.get(IP_ADDRESS_ANNOTATION, ""))
            mac = canonical_mac(a.get(MAC_ADDRESS_ANNOTATION, ""))
            switch = a.get(LOGICAL_SWITCH_ANNOTATION, "") or self.config.node_switch
            if ips is None or not is_valid_mac(mac):
                self.add(
                    KIND_ANNOTATION_MISMATCH,
                    obj,
                    "allocated but ip_address / mac_address are not valid",
                )
                continue
            self.claim(obj, switch, owner, "node", ips, mac)
            want = {
                "ipAddress": ",".join(ips),
                "macAddress": mac,
                "subnet": switch,
                "namespace": "",
                "podName": node.name,
            }
            self.check_ip_cr(obj, owner, want)
            self.check_lsp(obj, owner, switch, mac, ips, "")
