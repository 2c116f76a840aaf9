"""`apply_routing` on the IDL: one reconciler key's routing rows on a router, in one transaction.

`pending` reads the IDL cache (under the connection lock) and keeps only the parts of a checked
change that would change a row, so a key whose rows are in place costs no transaction;
`lock_keys` names the rows the transaction touches (group commit lets changes of different
keys share one); `write` applies the parts inside the transaction, writes first and removals
after. `set_nat`, `policy_rows` and `policy_is` serve the single-row verbs of idl_routing.py too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping

from controller.ovn import logic
from controller.ovn.api import NatChange, SetChange
from controller.ovn.idl_context import VerbContext, router_row
from controller.ovn.idl_index import NbIndex, Row, committed, has_ref, has_string, opt_value
from controller.ovn.logic import CheckedRoutingChange
from controller.ovn.tables import AS, LR, NAT, POLICY, ROUTE


def policy_rows(index: NbIndex, lr: Row, priority: int, match: str) -> list[Row]:
    """The router's policies at (priority, match): one, or none, or duplicates to collapse."""
    return [
        r for r in index.rows(POLICY, ("policy", priority, match)) if has_ref(lr, "policies", r)
    ]


def policy_is(row: Row, action: str, hops: tuple[str, ...], ids: Mapping[str, str]) -> bool:
    """The committed policy row has this action, these nexthops and (at least) these ids."""
    return (
        committed(row, "action") == action
        and tuple(committed(row, "nexthops")) == hops
        and logic.ids_match(committed(row, "external_ids"), ids)
    )


def _set_pending(
    index: NbIndex, item: tuple[SetChange, str, list[str], set[str]]
) -> tuple[bool, bool]:
    """(whether the set change would write, whether it creates the set)."""
    c, name, add, remove = item
    row = index.first(AS, ("name", name))
    if c.delete:
        return row is not None, False
    if row is None:
        return bool(add), bool(add)
    changes = (
        not logic.ids_match(committed(row, "external_ids"), c.external_ids)
        or not all(has_string(row, "addresses", e) for e in add)
        or any(has_string(row, "addresses", e) for e in remove)
    )
    return changes, False


def _nat_in_place(index: NbIndex, lr: Row, item: tuple[NatChange, str, str]) -> bool:
    n, lip, eip = item
    rows = [r for r in index.rows(NAT, ("lip", n.type, lip)) if has_ref(lr, "nat", r)]
    if not eip:
        return not rows
    return (
        len(rows) == 1
        and rows[0].external_ip == eip
        and (
            not n.port
            or (
                opt_value(rows[0].logical_port) == n.port
                and opt_value(rows[0].external_mac) == n.logical_mac.lower()
            )
        )
    )


def pending(
    index: NbIndex, router: str, change: CheckedRoutingChange
) -> tuple[CheckedRoutingChange, set[str]] | None:
    """The parts of `change` that would change something, and the address sets they create;
    None when the router is missing (call under the IDL lock)."""
    lr = index.first(LR, ("name", router))
    if lr is None:
        return None
    sets = []
    missing: set[str] = set()
    for item in change.sets:
        writes, creates = _set_pending(index, item)
        if writes:
            sets.append(item)
        if creates:
            missing.add(item[1])
    todo = dataclasses.replace(
        change,
        policies=tuple(
            item
            for item in change.policies
            if len(rows := policy_rows(index, lr, item[0].priority, item[1])) != 1
            or not policy_is(rows[0], item[0].action, item[2], item[0].external_ids)
        ),
        drops=tuple(d for d in change.drops if policy_rows(index, lr, *d)),
        sets=tuple(sets),
        nats=tuple(item for item in change.nats if not _nat_in_place(index, lr, item)),
        routes=tuple(
            prefix
            for prefix in change.routes
            if any(
                has_ref(lr, "static_routes", r)
                for r in index.rows(ROUTE, ("route", prefix, "src-ip"))
            )
        ),
        dst_routes=tuple(pair for pair in change.dst_routes if dst_route_rows(index, lr, *pair)),
    )
    return todo, missing


def dst_route_rows(index: NbIndex, lr: Row, prefix: str, hop: str) -> list[Row]:
    """The router's dst-ip static routes at `prefix` via `hop`."""
    return [
        r
        for r in index.rows(ROUTE, ("route", prefix, "dst-ip"))
        if has_ref(lr, "static_routes", r) and r.nexthop == hop
    ]


def lock_keys(
    router: str, change: CheckedRoutingChange, missing: set[str] | None
) -> frozenset[Hashable]:
    """The row keys the transaction touches; a set it creates or deletes is locked whole
    (`missing` None: the router was not found, so every set counts as created)."""
    keys: set[Hashable] = set()
    for p, match, _ in change.policies:
        keys.add(("policy", router, p.priority, match))
    for priority, match in change.drops:
        keys.add(("policy", router, priority, match))
    for c, name, add, remove in change.sets:
        keys.update((AS, name, e) for e in (*add, *remove))
        if c.delete or missing is None or name in missing:
            keys.add((AS, name))  # creates or deletes the set: alone on it
    for n, lip, eip in change.nats:
        keys.update({("nat", router, n.type, lip), ("nat-eip", router, n.type, eip)})
    for prefix in change.routes:
        keys.add(("route", router, prefix, "src-ip"))
    for prefix, _ in change.dst_routes:
        keys.add(("route", router, prefix, "dst-ip"))
    return frozenset(keys)


def _write_policies(ctx: VerbContext, lr: Row, change: CheckedRoutingChange) -> None:
    for p, match, hops in change.policies:
        rows = [r for r in policy_rows(ctx.index, lr, p.priority, match)]
        rows = [r for r in rows if r.uuid not in ctx.deleted]
        for extra in rows[1:]:
            ctx.delete(extra, lr, "policies")
        if not rows:
            row = ctx.insert(
                POLICY,
                priority=p.priority,
                match=match,
                action=p.action,
                nexthops=list(hops),
                external_ids=dict(p.external_ids),
            )
            ctx.add_ref(lr, "policies", row)
            continue
        row = rows[0]
        if row.action != p.action:
            row.action = p.action
        if tuple(row.nexthops) != hops:
            row.nexthops = list(hops)
        ctx.set_keys(row, "external_ids", p.external_ids)


def _write_sets(ctx: VerbContext, change: CheckedRoutingChange) -> None:
    for c, name, add, remove in change.sets:
        row = ctx.named(AS, name)
        if c.delete:
            if row is not None:
                row.delete()
                ctx.deleted.add(row.uuid)
            continue
        if row is None:
            if add:
                ctx.insert(AS, name=name, addresses=add, external_ids=dict(c.external_ids))
            continue
        for entry in add:
            if row._data is None or not has_string(row, "addresses", entry):
                row.addvalue("addresses", entry)
        for entry in sorted(remove):
            if row._data is not None and has_string(row, "addresses", entry):
                row.delvalue("addresses", entry)
        ctx.set_keys(row, "external_ids", c.external_ids)


def _remove_rows(ctx: VerbContext, lr: Row, change: CheckedRoutingChange) -> None:
    for priority, match in change.drops:
        for r in policy_rows(ctx.index, lr, priority, match):
            if r.uuid not in ctx.deleted:
                ctx.delete(r, lr, "policies")
    for prefix in change.routes:
        for r in ctx.index.rows(ROUTE, ("route", prefix, "src-ip")):
            if has_ref(lr, "static_routes", r) and r.uuid not in ctx.deleted:
                ctx.delete(r, lr, "static_routes")
    for prefix, hop in change.dst_routes:
        for r in dst_route_rows(ctx.index, lr, prefix, hop):
            if r.uuid not in ctx.deleted:
                ctx.delete(r, lr, "static_routes")


def write(ctx: VerbContext, router: str, change: CheckedRoutingChange) -> None:
    """The change inside the transaction (raises when the router is missing)."""
    lr = router_row(ctx, router)
    # writes first, removals after: one transaction either way, but a reader of a
    # half-applied change (there is none) would still find a way out
    _write_policies(ctx, lr, change)
    _write_sets(ctx, change)
    for n, lip, eip in change.nats:
        set_nat(ctx, lr, n.type, lip, eip, n.logical_mac, n.port)
    _remove_rows(ctx, lr, change)


def set_nat(
    ctx: VerbContext, lr: Row, policy: str, lip: str, eip: str, logical_mac: str, port: str
) -> None:
    """The router's `policy` NAT of `lip` made to translate to `eip` ("" removes it)."""
    rows = [r for r in ctx.index.rows(NAT, ("lip", policy, lip)) if has_ref(lr, "nat", r)]
    rows = [r for r in rows if r.uuid not in ctx.deleted]
    keep = None
    for r in rows:
        if eip and r.external_ip == eip and keep is None:
            keep = r
        else:
            ctx.delete(r, lr, "nat")
    if not eip:
        return
    if keep is None:
        clash = [
            r.logical_ip
            for r in ctx.index.rows(NAT, ("eip", policy, eip))
            if has_ref(lr, "nat", r) and r.uuid not in ctx.deleted
        ]
        logic.check_nat_clash(lr.name, policy, eip, clash)
        extra = {"logical_port": [port], "external_mac": [logical_mac.lower()]}
        keep = ctx.insert(
            NAT, type=policy, external_ip=eip, logical_ip=lip, **(extra if port else {})
        )
        ctx.add_ref(lr, "nat", keep)
    elif port:
        if opt_value(keep.logical_port) != port:
            keep.logical_port = [port]
        if opt_value(keep.external_mac) != logical_mac.lower():
            keep.external_mac = [logical_mac.lower()]
