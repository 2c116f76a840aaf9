"""Read-only consistency audit of a cluster's pod networking (no I/O but the owner GETs that
confirm a release, when `owner_api` is given).

`audit(snapshot, config)` compares everything kube-ovn's pod add and update flows leave behind
for each pod network: the pod's `<provider>.kubernetes.io/*` annotations, its IP CR, its
logical switch port (OVN providers only), and its router policies, address-set entry / NAT
rules on the cluster router. It returns an `AuditReport` of `Finding`s; `ClusterSnapshot` is
what the caller (`controller.audit.check`) fetched from the API server and the NB database.

What is checked (the `KIND_*` constants name each finding):

* every alive, non-hostNetwork pod: the annotations are well formed and match the subnet
  (`annotation-mismatch`, `address-outside-subnet`); the IP CR exists and says the same
  (`ip-cr-missing`, `ip-cr-mismatch`); OVN networks have their LSP on the right switch with the
  right MAC and addresses, port_security too when set (`lsp-missing`, `lsp-mismatch`,
  `lsp-address-mismatch`); routed pods of the default VPC's overlay subnets have their router
  policies and address-set entries (`route-missing`, `route-mismatch`, `route-duplicate`, and
  `route-stale` for a v1.8 src-ip route still there; `controller.audit.routing`) and EIP/SNAT
  NAT rules (`nat-missing`);
* every centralized overlay subnet of the default VPC: its `status.activateGateway` is a node
  its `spec.gatewayNode` lists, Ready and with a join address (`gateway-mismatch`), and each
  CIDR block's subnet-wide priority-29000 reroute goes to that node's join address
  (`route-missing`, `route-mismatch`); a distributed subnet has no such reroute left
  (`route-stale`);
* every node holding a join address: its `node-<name>` LSP and IP CR;
* no address or MAC is held by two owners in one subnet, counting pod annotations, IP CRs and
  LSPs together (`duplicate-address`, `duplicate-mac`); an owner is the shared LSP / IP CR name;
* security (when the snapshot has the port groups): an OVN port has port_security exactly when
  its pod asks for it, its `security_groups` are the pod's (none without port security), and
  it is a member of each of those groups and of the deny-all group `kubeovn_deny_all`; no
  port is a member of a group it is not associated with (`sg-mismatch`); with the
  SecurityGroups read, their port groups, ACLs and address sets against their rules
  (`audit/security_groups.py`: `sg-acl-mismatch`, `sg-address-set-mismatch`, `orphan-sg`);
* nothing is left behind: kube-ovn LSPs, IP CRs, src-ip host routes, routing-set entries,
  per-pod reroute policies and NAT rules whose owner is gone (`orphan-lsp`, `orphan-ip-cr`,
  `orphan-route`, `orphan-nat`);
* IPAM (`ipam-disagrees`): an audit cannot read the controller's memory, so it re-derives the
  state the controller would rebuild on restart (kube-ovn InitIPAM: subnets, then the IP CRs
  of StatefulSet / VM pods, then every alive or StatefulSet pod, then nodes) and reports every
  address that rebuild could not give to its holder. Those are the addresses a restarted
  controller would hand out twice (kube-ovn #1969, #4304).

Legitimate exceptions, as the flows make them: a StatefulSet pod's LSP and IP CR outlive the pod
(IP CR `podType: StatefulSet`, or the sts pod still present though not alive) while the
StatefulSet exists, is not being deleted and still has that ordinal; likewise a VM's under
keep-vm-ip while the VM exists; `node-<name>` ports and CRs belong to existing nodes;
only the port kinds this controller creates are judged (`ovn.port_kinds`, the gc's rule):
router, localnet, transit and other components' ports are not pod ports; routes and NAT whose prefix
is a network (subnet routes) are not per-pod. IPAM-only attachments (provider without the `.ovn`
suffix) get an IP CR but no LSP.

Not yet converged is not wrong: an alive pod without an allocation, or allocated and scheduled
but not routed, goes to `AuditReport.pending`, which `ok` ignores and `settled` does not; the
caller decides (a fault-injection verdict waits for `settled`). Pending has a bound: a pod the
controller refused (a Warning Event with one of the add's reasons, when the snapshot has the
Events) is a finding, `pod-refused`, naming the reason and message; one still pending longer
than `pending_bound` after its creation is `pod-stalled`. The IP CR, port and routes of an
alive pod whose allocation was cleared (inspection found its port lost) are not orphans.

Liveness is the controller's: a terminating pod whose cleanup has come due
(`pod_logic.release_due`) may or may not have its network any more, and neither is reported
(nor are its leftovers orphans) until kube-ovn's `isPodAlive` says it is dead.

Not checked: attachment networks the pod asks for but has not been allocated (that needs the
NADs), kube-ovn's `appendCheckPodToDel` subnet-change rule
for kept addresses.

The checks live in `controller.audit.pods` (pods and nodes against IP CRs, LSPs, security
groups, routes and NAT), `.orphans` (leftovers and duplicates) and `.ipam_rebuild`, over the
indexes of `.state`; the model (`ClusterSnapshot`, `Finding`, `AuditReport`, `KIND_*`) is
`.findings`, re-exported here.
"""

from __future__ import annotations

from controller.audit import security_groups as sgaudit
from controller.audit.findings import (
    KIND_ADDRESS_OUTSIDE_SUBNET,
    KIND_ANNOTATION_MISMATCH,
    KIND_DUPLICATE_ADDRESS,
    KIND_DUPLICATE_MAC,
    KIND_GATEWAY_MISMATCH,
    KIND_IP_CR_MISMATCH,
    KIND_IP_CR_MISSING,
    KIND_IPAM_DISAGREES,
    KIND_LSP_ADDRESS_MISMATCH,
    KIND_LSP_MISMATCH,
    KIND_LSP_MISSING,
    KIND_MALFORMED,
    KIND_NAT_MISSING,
    KIND_ORPHAN_IP_CR,
    KIND_ORPHAN_LSP,
    KIND_ORPHAN_NAT,
    KIND_ORPHAN_ROUTE,
    KIND_POD_NOT_ALLOCATED,
    KIND_POD_NOT_ROUTED,
    KIND_POD_REFUSED,
    KIND_POD_STALLED,
    KIND_ROUTE_DUPLICATE,
    KIND_ROUTE_MISMATCH,
    KIND_ROUTE_MISSING,
    KIND_ROUTE_STALE,
    KIND_SG_MISMATCH,
    PENDING_KINDS,
    AuditReport,
    ClusterSnapshot,
    Finding,
)
from controller.audit.ipam_rebuild import IpamRebuildCheck
from controller.audit.orphans import OrphanChecks
from controller.audit.pods import PodChecks
from controller.audit.security_groups import (
    KIND_ORPHAN_SG,
    KIND_SG_ACL_MISMATCH,
    KIND_SG_ADDRESS_SET_MISMATCH,
)
from controller.config import Config
from controller.view import OwnerApi

__all__ = [
    "KIND_ADDRESS_OUTSIDE_SUBNET",
    "KIND_ANNOTATION_MISMATCH",
    "KIND_DUPLICATE_ADDRESS",
    "KIND_DUPLICATE_MAC",
    "KIND_GATEWAY_MISMATCH",
    "KIND_IPAM_DISAGREES",
    "KIND_IP_CR_MISMATCH",
    "KIND_IP_CR_MISSING",
    "KIND_LSP_ADDRESS_MISMATCH",
    "KIND_LSP_MISMATCH",
    "KIND_LSP_MISSING",
    "KIND_MALFORMED",
    "KIND_NAT_MISSING",
    "KIND_ORPHAN_IP_CR",
    "KIND_ORPHAN_LSP",
    "KIND_ORPHAN_NAT",
    "KIND_ORPHAN_ROUTE",
    "KIND_ORPHAN_SG",
    "KIND_POD_NOT_ALLOCATED",
    "KIND_POD_NOT_ROUTED",
    "KIND_POD_REFUSED",
    "KIND_POD_STALLED",
    "KIND_ROUTE_DUPLICATE",
    "KIND_ROUTE_MISMATCH",
    "KIND_ROUTE_MISSING",
    "KIND_ROUTE_STALE",
    "KIND_SG_ACL_MISMATCH",
    "KIND_SG_ADDRESS_SET_MISMATCH",
    "KIND_SG_MISMATCH",
    "PENDING_KINDS",
    "AuditReport",
    "ClusterSnapshot",
    "Finding",
    "audit",
]


class _Auditor(PodChecks, OrphanChecks, IpamRebuildCheck):
    """Every check over one snapshot."""


def audit(
    snapshot: ClusterSnapshot, config: Config, *, owner_api: OwnerApi | None = None
) -> AuditReport:
    """Check `snapshot` (see the module docstring); never raises on odd data, reports it.

    `owner_api`: GETs that confirm a StatefulSet / VM the snapshot's lists do not keep an
    address for (`controller.view.OwnerLookup`'s policy); its errors count as "keep". Without
    it, the lists are final."""
    a = _Auditor(snapshot, config, owner_api)
    for problem in snapshot.problems:
        # the collector's messages read "<Kind> '<name>': <what is wrong>"
        obj, sep, message = problem.partition(": ")
        a.add(KIND_MALFORMED, obj if sep else "object", message if sep else problem)
    a.read_pods()
    a.check_nets()
    a.check_port_groups()
    if snapshot.security_groups is not None and snapshot.sg_rows is not None:
        for kind, obj, message in sgaudit.check_security_groups(
            snapshot.security_groups, snapshot.sg_rows, snapshot.ports
        ):
            a.add(kind, obj, message)
    a.check_nodes()
    a.check_gateways()
    a.read_objects()
    a.check_orphans()
    a.check_duplicates()
    a.check_ipam()
    counts = {
        "pods": len(a.alive),
        "ports": len(snapshot.ports),
        "IP CRs": len(snapshot.ips),
        "routes": len(snapshot.routes),
        "router policies": len(snapshot.policies),
        "NAT rules": len(snapshot.nat_rules),
    }
    return AuditReport(tuple(a.findings), tuple(a.pending), counts)
