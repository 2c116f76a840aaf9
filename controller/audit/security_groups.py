"""Audit of SecurityGroup objects against their NB rows (pure: no I/O).

`check_security_groups(sgs, rows, ports)` compares each `security-groups.kubeovn.io` object with
what `NbClient.list_security_groups` read, and returns `(kind, object, message)` triples that
`controller.audit.audit` turns into findings:

* `sg-acl-mismatch`: a group's port group is missing, or its ACLs are not exactly those its
  valid rules translate to (`controller.core.security_group`; rejected rules have no ACL);
* `sg-address-set-mismatch`: an address set of the group is missing, or does not hold exactly
  the port_security addresses of the group's member ports;
* `orphan-sg`: ACLs on the port group of a SecurityGroup that does not exist (they still
  filter traffic). Empty port groups and address sets without a SecurityGroup are not
  reported: the pod side creates them for every group a pod names, and they filter nothing;
  the gc collects those no port refers to.

Port membership against the pods' annotations is checked by `audit.py` (`sg-mismatch`); with
the SecurityGroups read, a port is not expected in a group that has neither a SecurityGroup
nor a port group (it was deleted; the port keeps its annotation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller.core.constants import DENY_ALL_SECURITY_GROUP
from controller.core.security_group import Acl, acl_sort_key, plan_security_group
from controller.ovn import external_ids as ext
from controller.ovn.api import PortInfo, SecurityGroupRows
from controller.ovn.logic import sg_address_sets, sg_eligible

KIND_SG_ACL_MISMATCH = "sg-acl-mismatch"
KIND_SG_ADDRESS_SET_MISMATCH = "sg-address-set-mismatch"
KIND_ORPHAN_SG = "orphan-sg"

Triple = tuple[str, str, str]


def sg_names(sgs: Iterable[Mapping[str, Any]]) -> set[str]:
    out = set()
    for obj in sgs:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if isinstance(name, str) and name:
            out.add(name)
    return out


def _acl_text(acl: Acl) -> str:
    return f"{acl.direction} {acl.priority} {acl.match!r} {acl.action}"


def _check_group(
    name: str, spec: Any, row: SecurityGroupRows | None, names: set[str], ports: dict[str, PortInfo]
) -> list[Triple]:
    obj = f"security group {name}"
    plan = plan_security_group(name, spec, names.__contains__)
    if row is None or not row.port_group:
        return [(KIND_SG_ACL_MISMATCH, obj, f"port group {plan.port_group} missing")]
    out: list[Triple] = []
    want, have = set(plan.acls), set(row.acls)
    for acl in sorted(want - have, key=acl_sort_key):
        out.append((KIND_SG_ACL_MISMATCH, obj, f"ACL missing: {_acl_text(acl)}"))
    for acl in sorted(have - want, key=acl_sort_key):
        out.append((KIND_SG_ACL_MISMATCH, obj, f"unexpected ACL: {_acl_text(acl)}"))
    members = [ports[p].port_security for p in row.ports if p in ports]
    wanted_sets = sg_address_sets(ps for ps in members if sg_eligible(ps))
    for family, addresses in wanted_sets.items():
        set_name = ext.sg_address_set_name(name, family)
        current = row.address_sets.get(set_name)
        if current is None:
            out.append((KIND_SG_ADDRESS_SET_MISMATCH, obj, f"address set {set_name} missing"))
        elif sorted(current) != sorted(addresses):
            out.append(
                (
                    KIND_SG_ADDRESS_SET_MISMATCH,
                    obj,
                    f"address set {set_name} has {sorted(current)}, want {sorted(addresses)}",
                )
            )
    return out


def check_security_groups(
    sgs: Sequence[Mapping[str, Any]],
    rows: Sequence[SecurityGroupRows],
    ports: Sequence[PortInfo],
) -> list[Triple]:
    """See the module docstring."""
    names = sg_names(sgs)
    by_sg = {r.sg: r for r in rows}
    by_port = {p.name: p for p in ports}
    out: list[Triple] = []
    for sg in sgs:
        for name in sg_names([sg]) - {DENY_ALL_SECURITY_GROUP}:
            out.extend(_check_group(name, sg.get("spec"), by_sg.get(name), names, by_port))
    for r in rows:
        if r.sg != DENY_ALL_SECURITY_GROUP and r.sg not in names and r.acls:
            out.append(
                (
                    KIND_ORPHAN_SG,
                    f"security group {r.sg}",
                    f"port group {r.port_group} has {len(r.acls)} ACLs but no SecurityGroup",
                )
            )
    return out


def expects_membership(sg: str, names: set[str] | None, port_groups: Mapping[str, Any]) -> bool:
    """Whether a port naming `sg` must be in its port group (see the module docstring)."""
    if names is None or sg == DENY_ALL_SECURITY_GROUP:
        return True
    return sg in names or sg in port_groups
