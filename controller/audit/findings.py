"""The audit's model: what it reads (`ClusterSnapshot`) and what it says (`Finding`,
`AuditReport` and its rendering), with the `KIND_*` names of every finding (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.core.model import Namespace, Node, Pod, StatefulSet, Subnet, VirtualMachine, Vpc
from controller.ovn.api import (
    AddressSetInfo,
    NatRule,
    PortGroupInfo,
    PortInfo,
    RouterPolicy,
    SecurityGroupRows,
    StaticRoute,
)

KIND_MALFORMED = "malformed-object"
KIND_POD_NOT_ALLOCATED = "pod-not-allocated"
KIND_POD_NOT_ROUTED = "pod-not-routed"
KIND_POD_REFUSED = "pod-refused"
KIND_POD_STALLED = "pod-stalled"
KIND_ANNOTATION_MISMATCH = "annotation-mismatch"
KIND_ADDRESS_OUTSIDE_SUBNET = "address-outside-subnet"
KIND_DUPLICATE_ADDRESS = "duplicate-address"
KIND_DUPLICATE_MAC = "duplicate-mac"
KIND_IP_CR_MISSING = "ip-cr-missing"
KIND_IP_CR_MISMATCH = "ip-cr-mismatch"
KIND_LSP_MISSING = "lsp-missing"
KIND_LSP_MISMATCH = "lsp-mismatch"
KIND_LSP_ADDRESS_MISMATCH = "lsp-address-mismatch"
KIND_ROUTE_MISSING = "route-missing"
KIND_ROUTE_MISMATCH = "route-mismatch"
KIND_ROUTE_STALE = "route-stale"
KIND_ROUTE_DUPLICATE = "route-duplicate"
KIND_GATEWAY_MISMATCH = "gateway-mismatch"
KIND_NAT_MISSING = "nat-missing"
KIND_ORPHAN_LSP = "orphan-lsp"
KIND_ORPHAN_IP_CR = "orphan-ip-cr"
KIND_ORPHAN_ROUTE = "orphan-route"
KIND_ORPHAN_NAT = "orphan-nat"
KIND_IPAM_DISAGREES = "ipam-disagrees"
KIND_SG_MISMATCH = "sg-mismatch"

#: Kinds that mean "not converged yet" rather than "wrong".
PENDING_KINDS = frozenset({KIND_POD_NOT_ALLOCATED, KIND_POD_NOT_ROUTED})

#: How long a pod may stay pending (unallocated, or scheduled and unrouted) after its creation
#: before the audit calls it stalled: the controller allocates and routes a pod in well under a
#: second, and retries what failed with a backoff that stays below this.
DEFAULT_PENDING_BOUND_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything the audit reads, fetched once (the caller decides how and when).

    `ips` are raw IP CR dicts (their schema is loose, the audit reads them defensively);
    `routes` and `nat_rules` are those of the cluster router. `problems` lists objects the
    collector could not convert (reported as `malformed-object`). `now` is the time the pods were
    listed, used for the liveness predicate. `statefulsets` / `virtual_machines` are None when
    not read: every StatefulSet / VM address is then taken as legitimately kept.
    """

    now: datetime
    pods: tuple[Pod, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    subnets: tuple[Subnet, ...] = ()
    nodes: tuple[Node, ...] = ()
    ips: tuple[Mapping[str, Any], ...] = ()
    vpcs: tuple[Vpc, ...] = ()
    ports: tuple[PortInfo, ...] = ()
    routes: tuple[StaticRoute, ...] = ()
    nat_rules: tuple[NatRule, ...] = ()
    # the cluster router's policies, and the address sets the routing policies name
    policies: tuple[RouterPolicy, ...] = ()
    address_sets: tuple[AddressSetInfo, ...] = ()
    port_groups: tuple[PortGroupInfo, ...] | None = None  # None: security groups not read
    problems: tuple[str, ...] = ()
    statefulsets: tuple[StatefulSet, ...] | None = None
    virtual_machines: tuple[VirtualMachine, ...] | None = None
    # SecurityGroup objects and their NB rows (audit/security_groups.py); None: not read
    security_groups: tuple[Mapping[str, Any], ...] | None = None
    sg_rows: tuple[SecurityGroupRows, ...] | None = None
    # core/v1 Events (a refused pod's Warning Events say why); None: not read
    events: tuple[Mapping[str, Any], ...] | None = None
    # pod key -> metadata.creationTimestamp, for the bound on pending; a pod absent from it
    # (or `pending_bound` None) stays pending however long it waits
    created: Mapping[str, datetime] = field(default_factory=dict)
    pending_bound: float | None = DEFAULT_PENDING_BOUND_SECONDS


@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement: `kind` (a KIND_* constant), the `object` it is about, and why."""

    kind: str
    object: str
    message: str


@dataclass(frozen=True, slots=True)
class AuditReport:
    """The audit's result. `findings` are errors; `pending` are pods not converged yet."""

    findings: tuple[Finding, ...]
    pending: tuple[Finding, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No disagreement (pods still converging are allowed)."""
        return not self.findings

    @property
    def settled(self) -> bool:
        """No disagreement and nothing pending."""
        return not self.findings and not self.pending

    def kinds(self) -> dict[str, int]:
        """Number of findings (pending included) per kind."""
        out: dict[str, int] = defaultdict(int)
        for f in (*self.findings, *self.pending):
            out[f.kind] += 1
        return dict(out)

    def passed(self, *, strict: bool = False) -> bool:
        """The verdict `check` exits with: `settled` when strict, else `ok`."""
        return self.settled if strict else self.ok

    def status(self, *, strict: bool = False) -> str:
        """The verdict in words; it starts with "OK" exactly when `passed(strict=strict)`."""
        if self.settled:
            return "OK"
        if self.ok and not strict:
            return f"OK, {len(self.pending)} pending"
        if self.ok:
            return f"NOT SETTLED, {len(self.pending)} pending (--strict)"
        return f"{len(self.findings)} finding(s), {len(self.pending)} pending"

    def render(self, *, strict: bool = False) -> str:
        """A readable report: a summary line, then findings grouped by kind, with counts; when
        there are any, the verdict again as the last line, so that both ends of the output
        agree with the exit status (`passed`) in every mode."""
        checked = ", ".join(f"{n} {what}" for what, n in self.counts.items())
        status = self.status(strict=strict)
        lines = [f"cluster audit: {status}" + (f" (checked {checked})" if checked else "")]
        lines.extend(_render_group(self.findings, ""))
        if self.pending:
            lines.append("pending (not converged yet):")
            lines.extend(_render_group(self.pending, "  "))
        if len(lines) > 1:
            lines.append(f"cluster audit: {status}")
        return "\n".join(lines) + "\n"


def _render_group(findings: Iterable[Finding], indent: str) -> list[str]:
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_kind[f.kind].append(f)
    lines = []
    for kind in sorted(by_kind):
        group = sorted(by_kind[kind], key=lambda f: (f.object, f.message))
        lines.append(f"{indent}{kind} ({len(group)}):")
        lines.extend(f"{indent}  {_one_line(f.object)}: {_one_line(f.message)}" for f in group)
    return lines


def _one_line(text: str) -> str:
    """`text` with what would break or hide a report line escaped: the messages quote what
    users wrote (an Event's message names the annotation's value), line separators included."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
