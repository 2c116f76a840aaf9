"""The verb bodies of `OvsdbappNbClient`: what one NB transaction does, in the IDL thread.

Contract:

* `VerbContext` is the per-run state of one transaction (the IDL txn, rows inserted so far,
  addresses claimed, rows deleted), so several ports created in one transaction see each other;
  its helpers find, insert, link and unlink rows through the `NbIndex`, never by a table scan.
* The module functions (`create_port_rows`, `sync_sg`, `attach_router`, ...) are the bodies the
  client's verbs compose; they raise `OvnError` subclasses, which abort the whole transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller.core.constants import VENDOR
from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn.api import (
    OvnConflictError,
    OvnNotFoundError,
    PortSpec,
)
from controller.ovn.idl_index import NbIndex, Row, has_ref
from controller.ovn.tables import ACL, AS, LR, LRP, LS, LSP, PG


class VerbContext:
    """Per-run state of one transaction: the IDL txn, rows inserted so far, claimed IPs."""

    def __init__(self, index: NbIndex, txn: Any) -> None:
        self.index = index
        self.txn = txn
        self.new: dict[tuple[str, str], Row] = {}
        self.new_refs: dict[tuple[uuid.UUID, str], list[Row]] = {}
        self.claims: dict[tuple[uuid.UUID, str], str] = {}
        self.deleted: set[uuid.UUID] = set()

    def named(self, table: str, name: str) -> Row | None:
        row = self.new.get((table, name))
        if row is not None:
            return row
        for r in self.index.rows(table, ("name", name)):
            if r.uuid not in self.deleted:
                return r
        return None

    def insert(self, table: str, **columns: Any) -> Row:
        row = self.txn.insert(self.index._tables[table])
        for col, val in columns.items():
            setattr(row, col, val)
        if "name" in columns:
            self.new[(table, columns["name"])] = row
        return row

    def add_ref(self, parent: Row, column: str, child: Row) -> None:
        if parent._data is None:  # inserted in this txn: mutations do not apply, set the column
            refs = self.new_refs.setdefault((parent.uuid, column), [])
            refs.append(child)
            setattr(parent, column, list(refs))
        else:
            parent.addvalue(column, child)

    def delete(self, row: Row, parent: Row | None, column: str) -> None:
        if parent is not None:
            parent.delvalue(column, row)
        row.delete()
        self.deleted.add(row.uuid)

    def switch_of(self, lsp: Row) -> Row | None:
        hint = self.named(LS, lsp.external_ids.get(ext.LS_KEY, ""))
        if hint is not None and has_ref(hint, "ports", lsp):
            return hint
        # NOTE: a port written by someone else (no or stale ls key): O(switches), not O(ports).
        for ls in self.index._tables[LS].rows.values():
            if has_ref(ls, "ports", lsp):
                return ls
        return None

    def router_of(self, row: Row, column: str) -> Row | None:
        for lr in self.index._tables[LR].rows.values():
            if has_ref(lr, column, row):
                return lr
        return None

    def set_keys(self, row: Row, column: str, wanted: Mapping[str, str]) -> None:
        current = getattr(row, column)
        for k, v in wanted.items():
            if current.get(k) != v:
                row.setkey(column, k, v)

    def ensure_sg_port_group(self, sg: str) -> Row:
        name = ext.sg_port_group_name(sg)
        pg = self.named(PG, name)
        if pg is None:
            pg = self.insert(PG, name=name, external_ids=ext.sg_port_group_ids(sg))
        if sg == ext.DENY_ALL_SG:
            self._ensure_acls(pg, logic.deny_all_acls(name))
        return pg

    def _ensure_acls(self, pg: Row, wanted: Sequence[logic.AclSpec]) -> None:
        have = set()
        if pg._data is not None:
            have = {(a.direction, a.priority, a.match, a.action) for a in pg.acls}
        for acl in wanted:
            if (acl.direction, acl.priority, acl.match, acl.action) in have:
                continue
            row = self.insert(
                ACL,
                direction=acl.direction,
                priority=acl.priority,
                match=acl.match,
                action=acl.action,
            )
            self.add_ref(pg, "acls", row)

    def sync_deny_all(self) -> None:
        """kube-ovn updateDenyAllSgPorts: the deny-all group holds every port with SGs."""
        pg = self.ensure_sg_port_group(ext.DENY_ALL_SG)
        wanted = {
            r.uuid: r
            for r in self.index.rows(LSP, ("has_sg",))
            if r.uuid not in self.deleted
            and logic.deny_all_eligible(r.external_ids, r.port_security)
        }
        if pg._data is None:
            if wanted:
                pg.ports = list(wanted.values())
            return
        datum = pg._data.get("ports")
        current = {atom.value for atom in datum.values} if datum is not None else set()
        lsps = self.index._tables[LSP].rows
        for u in current - wanted.keys():
            row = lsps.get(u)
            if row is not None:
                pg.delvalue("ports", row)
        for u in wanted.keys() - current:
            pg.addvalue("ports", wanted[u])


# -- verb bodies (IDL thread) ----------------------------------------------------------------


def router_row(ctx: VerbContext, name: str) -> Row:
    lr = ctx.named(LR, name)
    if lr is None:
        raise OvnNotFoundError(f"logical router {name} not found")
    return lr


def sync_sg(ctx: VerbContext, sg: str) -> None:
    """kube-ovn syncSgLogicalPort: the group's ports and its v4/v6 address sets."""
    pg = ctx.ensure_sg_port_group(sg)
    members = [r for r in ctx.index.rows(LSP, ("sg", sg)) if logic.sg_eligible(r.port_security)]
    wanted = {r.uuid for r in members}
    current = {r.uuid for r in pg.ports} if pg._data is not None else set()
    if wanted != current:
        pg.ports = members
    for family, addresses in logic.sg_address_sets(r.port_security for r in members).items():
        name = ext.sg_address_set_name(sg, family)
        aset = ctx.named(AS, name)
        if aset is None:
            ids = {ext.PG_SG_KEY: sg}
            ctx.insert(AS, name=name, addresses=addresses, external_ids=ids)
        elif set(aset.addresses) != set(addresses):
            aset.addresses = addresses


def create_port_rows(ctx: VerbContext, spec: PortSpec, cols: logic.PortColumns) -> None:
    ls = ctx.named(LS, spec.switch)
    if ls is None:
        raise OvnNotFoundError(f"logical switch {spec.switch} not found (port {spec.name})")
    lsp = ctx.named(LSP, spec.name)
    if lsp is not None and lsp._data is not None:
        current = ctx.switch_of(lsp)
        if current is not None and current.uuid != ls.uuid:
            raise OvnConflictError(
                f"logical switch port {spec.name} already exists on switch {current.name}"
            )
    for ip in cols.ips:
        for other in ctx.index.rows(LSP, ("ip", ip)):
            if (
                other.name != spec.name
                and other.uuid not in ctx.deleted
                and has_ref(ls, "ports", other)
            ):
                raise logic.duplicate_address(spec.switch, ip, other.name)
        owner = ctx.claims.setdefault((ls.uuid, ip), spec.name)
        if owner != spec.name:
            raise logic.duplicate_address(spec.switch, ip, owner)
    if lsp is None:
        lsp = ctx.insert(
            LSP,
            name=spec.name,
            addresses=list(cols.addresses),
            port_security=list(cols.port_security),
            external_ids=dict(cols.external_ids),
        )
        ctx.add_ref(ls, "ports", lsp)
        old_sgs: set[str] = set()
    else:
        if list(lsp.addresses) != list(cols.addresses):
            lsp.addresses = list(cols.addresses)
        if list(lsp.port_security) != list(cols.port_security):
            lsp.port_security = list(cols.port_security)
        old_sgs = ext.associated_sgs(lsp.external_ids)
        ctx.set_keys(lsp, "external_ids", cols.external_ids)
    if cols.security_groups:
        for sg in sorted(old_sgs - set(cols.security_groups)):
            lsp.setkey("external_ids", ext.associated_sg_key(sg), "false")
        set_memberships(ctx, lsp, old_sgs, list(cols.security_groups))


def set_memberships(ctx: VerbContext, lsp: Row, old: Iterable[str], new: list[str]) -> None:
    for sg in sorted(set(old) - set(new)):
        pg = ctx.named(PG, ext.sg_port_group_name(sg))
        if pg is not None and pg._data is not None and has_ref(pg, "ports", lsp):
            pg.delvalue("ports", lsp)
    for sg in new:
        pg = ctx.ensure_sg_port_group(sg)
        if pg._data is None or not has_ref(pg, "ports", lsp):
            ctx.add_ref(pg, "ports", lsp)


def attach_router(ctx: VerbContext, ls: Row, switch: str, router: str, networks: list[str]) -> None:
    lr = router_row(ctx, router)
    lsp_name, lrp_name = ext.router_port_names(switch, router)
    lrp = ctx.named(LRP, lrp_name)
    if lrp is None:
        lrp = ctx.insert(
            LRP,
            name=lrp_name,
            mac=logic.router_port_mac(lrp_name),
            networks=networks,
            external_ids={ext.VENDOR_KEY: VENDOR},
        )
        ctx.add_ref(lr, "ports", lrp)
    elif sorted(lrp.networks) != sorted(networks):
        lrp.networks = networks
    lsp = ctx.named(LSP, lsp_name)
    want_ids = {ext.VENDOR_KEY: VENDOR, ext.LS_KEY: switch}
    if lsp is None:
        lsp = ctx.insert(
            LSP,
            name=lsp_name,
            type="router",
            addresses=["router"],
            options={"router-port": lrp_name},
            external_ids=want_ids,
        )
        ctx.add_ref(ls, "ports", lsp)
        return
    if lsp.type != "router":
        lsp.type = "router"
    if list(lsp.addresses) != ["router"]:
        lsp.addresses = ["router"]
    ctx.set_keys(lsp, "options", {"router-port": lrp_name})
    ctx.set_keys(lsp, "external_ids", want_ids)
