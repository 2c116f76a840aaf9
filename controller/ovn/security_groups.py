"""The SecurityGroup verbs of the NbClient contract, shared argument checks and IDL bodies.

`check_apply` / `check_group` validate a verb's arguments for both clients (the fake and the
ovsdbapp one), raising `InvalidRequestError` before anything is written. `idl_apply`,
`idl_delete` and `idl_list` are the bodies the ovsdbapp client runs: the first two inside one
transaction (`ctx` is impl_idl's per-transaction context: `named`, `insert`, `add_ref`,
`delete`, `set_keys`, `ensure_sg_port_group`), the last under the IDL lock. No python-ovs import
here: rows are used through their attributes only.

Rows written (kube-ovn v1.8.18 CreateSgPortGroup / CreateSgAssociatedAddressSet / UpdateSgACL):

* port group `ovn.sg.<sg>` with external_ids type=security_group, sg=<sg>, name=<pg>;
* address sets `ovn.sg.<sg>.associated.v4|v6` with external_ids sg=<sg> (their addresses are
  filled by sync_sg_ports from the members' port_security);
* the group's ACLs, attached to its port group. ACL is a non-root NB table, so an ACL dropped
  from the port group, or a deleted port group's ACLs, are removed by the server itself.

`apply` keeps ACL rows that are wanted and unchanged (OVN recomputes flows per changed row, and a
rule edit thus touches only the ACLs it changes), removes every other ACL of the group, and adds
the missing ones, all in one transaction: no moment where the group has lost its old rules and
not yet got the new ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.core.security_group import Acl, acl_sort_key, check_sg_name
from controller.ovn import external_ids as ext
from controller.ovn.api import InvalidRequestError, SecurityGroupRows
from controller.ovn.tables import ACL, AS, PG

ACTIONS = ("allow-related", "allow", "drop", "reject")
DIRECTIONS = ("to-lport", "from-lport")


def check_group(sg: str) -> str:
    problem = check_sg_name(sg)
    if problem is not None:
        raise InvalidRequestError(problem)
    if sg == ext.DENY_ALL_SG:
        raise InvalidRequestError(f"{sg} is the built-in deny-all group, not a SecurityGroup")
    return sg


def check_apply(
    sg: str, acls: Sequence[Acl], remote_groups: Sequence[str]
) -> tuple[list[Acl], list[str]]:
    """The ACLs (unique, sorted) and remote groups of an apply, or InvalidRequestError."""
    check_group(sg)
    pg = ext.sg_port_group_name(sg)
    for acl in acls:
        if acl.direction not in DIRECTIONS or acl.action not in ACTIONS:
            raise InvalidRequestError(f"invalid ACL {acl}")
        if not 0 <= acl.priority <= 32767 or not acl.match.strip():
            raise InvalidRequestError(f"invalid ACL {acl}")
        if f"@{pg}" not in acl.match:
            raise InvalidRequestError(f"ACL {acl.match!r} does not match port group {pg}")
    remotes = []
    for r in dict.fromkeys(remote_groups):
        problem = check_sg_name(r)
        if problem is not None:
            raise InvalidRequestError(problem)
        if r != sg:
            remotes.append(r)
    return sorted(set(acls), key=acl_sort_key), remotes


def address_set_names(sg: str) -> tuple[str, str]:
    return ext.sg_address_set_name(sg, "v4"), ext.sg_address_set_name(sg, "v6")


def acl_of(row: Any) -> Acl:
    return Acl(str(row.direction), int(row.priority), str(row.match), str(row.action))


def _ensure_address_sets(ctx: Any, sg: str) -> None:
    for name in address_set_names(sg):
        if ctx.named(AS, name) is None:
            ctx.insert(AS, name=name, external_ids={ext.PG_SG_KEY: sg})


def idl_apply(ctx: Any, sg: str, acls: Sequence[Acl], remote_groups: Sequence[str]) -> None:
    pg = ctx.ensure_sg_port_group(sg)
    if pg._data is not None:
        ctx.set_keys(pg, "external_ids", ext.sg_port_group_ids(sg))
    for group in (sg, *remote_groups):
        _ensure_address_sets(ctx, group)
    wanted = set(acls)
    kept: set[Acl] = set()
    if pg._data is not None:
        for row in list(pg.acls):
            acl = acl_of(row)
            if acl in wanted and acl not in kept:
                kept.add(acl)
            else:
                pg.delvalue("acls", row)
    rows = [
        ctx.insert(
            ACL, direction=acl.direction, priority=acl.priority, match=acl.match, action=acl.action
        )
        for acl in acls
        if acl not in kept
    ]
    if pg._data is None:
        # NOTE: a port group inserted in this transaction takes its ACL set in one write
        # (add_ref on a new row rewrites the whole column each time: quadratic in the rules).
        if rows:
            pg.acls = rows
        return
    for row in rows:
        ctx.add_ref(pg, "acls", row)


def idl_delete(ctx: Any, sg: str) -> None:
    pg = ctx.named(PG, ext.sg_port_group_name(sg))
    if pg is not None:
        ctx.delete(pg, None, "")
    for name in address_set_names(sg):
        aset = ctx.named(AS, name)
        if aset is not None and aset.external_ids.get(ext.PG_SG_KEY) == sg:
            ctx.delete(aset, None, "")


def rows_by_group(
    port_groups: Sequence[tuple[str, Mapping[str, str], Sequence[str], Sequence[Acl]]],
    address_sets: Sequence[tuple[str, Mapping[str, str], Sequence[str]]],
) -> list[SecurityGroupRows]:
    """Group (name, external_ids, ports, acls) port groups and (name, external_ids, addresses)
    address sets by the security group their external_ids name."""
    pgs: dict[str, tuple[str, tuple[str, ...], tuple[Acl, ...]]] = {}
    for name, ids, ports, acls in port_groups:
        sg = ids.get(ext.PG_SG_KEY, "")
        if ids.get(ext.PG_TYPE_KEY) == ext.PG_TYPE_SECURITY_GROUP and sg:
            pgs[sg] = (name, tuple(sorted(ports)), tuple(sorted(acls, key=acl_sort_key)))
    sets: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, ids, addresses in address_sets:
        sg = ids.get(ext.PG_SG_KEY, "")
        if sg:
            sets.setdefault(sg, {})[name] = tuple(sorted(addresses))
    out = []
    for sg in sorted(pgs.keys() | sets.keys()):
        pg_name, ports, acls = pgs.get(sg, ("", (), ()))
        out.append(
            SecurityGroupRows(sg, pg_name, ports, acls, dict(sorted(sets.get(sg, {}).items())))
        )
    return out


def idl_list(tables: Mapping[str, Any]) -> list[SecurityGroupRows]:
    return rows_by_group(
        [
            (pg.name, pg.external_ids, [p.name for p in pg.ports], [acl_of(a) for a in pg.acls])
            for pg in tables[PG].rows.values()
        ],
        [(a.name, a.external_ids, a.addresses) for a in tables[AS].rows.values()],
    )
