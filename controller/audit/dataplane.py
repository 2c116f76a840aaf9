"""The data-plane cross-check of `check --dataplane` (pure: no I/O).

The NB rows the controller writes only become a network once ovn-northd has turned each logical
switch port into a Southbound Port_Binding and an ovn-controller has claimed it for an OVS
interface whose `external_ids:iface-id` names the port. `audit_dataplane(snapshot, dataplane)`
compares the NB side of a `ClusterSnapshot` with a `DataPlaneSnapshot` (the SB's port bindings
and chassis, and optionally one OVS database's interfaces) and returns findings in the audit's
own terms:

* `binding-missing`: a kube-ovn logical switch port with no Port_Binding (ovn-northd is down or
  behind);
* `port-unbound`: the binding of a Running pod's port, or of an existing node's `node-<name>`
  port, names no chassis (no CNI plugged an interface for it, or ovn-controller is down). A pod
  that is alive but not Running yet is *pending*, not a finding; a kept StatefulSet/VM port with
  no pod is expected to be unbound;
* `iface-orphan` (with an OVS database): an OVS interface whose iface-id names no logical switch
  port (a pod sandbox the CNI did not clean up, or a port the controller lost);
* `iface-duplicate` (with an OVS database): two interfaces claiming one port (only one can be
  bound; kube-ovn's CNI clears the stale one's iface-id).

Only VIF ports are compared (bindings of router, localnet, patch and chassisredirect ports are
OVN's own). The NB and SB reads are not one snapshot: a port created a moment before the SB
read may show as `binding-missing` once; callers wanting a verdict re-run until it is stable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from controller.audit.audit import ClusterSnapshot, Finding
from controller.core.constants import LOCALNET_PORT_PREFIX, NODE_PORT_PREFIX

KIND_BINDING_MISSING = "binding-missing"
KIND_PORT_UNBOUND = "port-unbound"
KIND_IFACE_ORPHAN = "iface-orphan"
KIND_IFACE_DUPLICATE = "iface-duplicate"


@dataclass(frozen=True, slots=True)
class PortBinding:
    """One SB Port_Binding row: `chassis` is the chassis name ("" when unbound)."""

    logical_port: str
    chassis: str = ""
    type: str = ""


@dataclass(frozen=True, slots=True)
class OvsInterface:
    """One OVS Interface row with an `external_ids:iface-id`."""

    name: str
    iface_id: str


@dataclass(frozen=True, slots=True)
class DataPlaneSnapshot:
    """What `check --dataplane` read: SB bindings, and OVS interfaces (None: no OVS read)."""

    bindings: tuple[PortBinding, ...]
    interfaces: tuple[OvsInterface, ...] | None = None


@dataclass(frozen=True, slots=True)
class DataPlaneReport:
    findings: tuple[Finding, ...]
    pending: tuple[Finding, ...]
    counts: Mapping[str, int]


def audit_dataplane(snap: ClusterSnapshot, dp: DataPlaneSnapshot) -> DataPlaneReport:
    findings: list[Finding] = []
    pending: list[Finding] = []
    pods = {p.key: p for p in snap.pods if p.deletion_timestamp is None}
    nodes = {n.name for n in snap.nodes}
    bindings = {b.logical_port: b for b in dp.bindings if b.type == ""}
    nb_ports = {p.name for p in snap.ports}

    for port in snap.ports:
        if port.addresses[:1] == ("router",) or port.name.startswith(LOCALNET_PORT_PREFIX):
            continue  # switch-router links and localnet ports: OVN's own bindings
        obj = f"lsp {port.name}"
        binding = bindings.get(port.name)
        if binding is None:
            findings.append(Finding(KIND_BINDING_MISSING, obj, "no Port_Binding in the SB"))
            continue
        if binding.chassis:
            continue
        if port.name.startswith(NODE_PORT_PREFIX) and port.name[len(NODE_PORT_PREFIX) :] in nodes:
            findings.append(
                Finding(KIND_PORT_UNBOUND, obj, "node port bound to no chassis (no ovn0?)")
            )
            continue
        pod = pods.get(port.external_ids.get("pod", ""))
        if pod is None or pod.host_network:
            continue  # a kept StatefulSet/VM port, or not a pod's: nothing plugs it now
        where = f"pod {pod.key} on {pod.node_name or '(unscheduled)'}"
        if pod.phase == "Running":
            findings.append(
                Finding(KIND_PORT_UNBOUND, obj, f"{where} is Running but no chassis claimed it")
            )
        else:
            pending.append(Finding(KIND_PORT_UNBOUND, obj, f"{where} is {pod.phase or 'Pending'}"))

    counts = {"port bindings": len(bindings)}
    if dp.interfaces is not None:
        counts["OVS interfaces"] = len(dp.interfaces)
        claims: dict[str, list[str]] = defaultdict(list)
        for iface in dp.interfaces:
            claims[iface.iface_id].append(iface.name)
            if iface.iface_id not in nb_ports:
                findings.append(
                    Finding(
                        KIND_IFACE_ORPHAN,
                        f"interface {iface.name}",
                        f"iface-id {iface.iface_id} names no logical switch port",
                    )
                )
        for port_name, names in claims.items():
            if len(names) > 1 and port_name in nb_ports:
                findings.append(
                    Finding(
                        KIND_IFACE_DUPLICATE,
                        f"lsp {port_name}",
                        f"claimed by interfaces {', '.join(sorted(names))}",
                    )
                )
    return DataPlaneReport(tuple(findings), tuple(pending), counts)
