"""The row side of `OvsdbappNbClient`: the monitored NB tables and the indexes over their rows.

Contract:

* `MONITORED` names the only tables and columns the client's IDL syncs (what the verbs read or
  write: an IDL over every NB column costs far more to sync).
* `NbIndex` is fed by the IDL's row notifications (`on_row`, `reset` on a reconnect's clear) and
  maps port names, pods, vendors, security groups, IPs, route prefixes and NAT addresses to rows,
  so no verb scans a table. It is only touched from the IDL thread or under the connection lock.
* `has_ref` and `committed` read a row's committed datum without copying a parent's big sets;
  `text`, `texts` and `text_map` read string, string-set and string-map columns off the datum
  (no round trip through Python values: the initial sync and the gc's listing read every port).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Hashable, Mapping
from typing import Any

from ovs.db import data as ovs_data
from ovs.db import types as ovs_types

from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn.api import (
    InvalidRequestError,
)
from controller.ovn.tables import ACL, AS, LR, LRP, LS, LSP, NAT, PG, POLICY, ROUTE

# Only what the verbs read or write: an IDL over every NB column costs far more to sync.
MONITORED: dict[str, tuple[str, ...]] = {
    LS: ("name", "ports", "external_ids", "other_config"),
    LSP: ("name", "addresses", "port_security", "external_ids", "type", "options"),
    LR: ("name", "ports", "static_routes", "nat", "policies", "external_ids"),
    LRP: ("name", "mac", "networks", "external_ids"),
    ROUTE: ("ip_prefix", "nexthop", "policy", "route_table", "external_ids"),
    POLICY: ("priority", "match", "action", "nexthops", "external_ids"),
    NAT: ("type", "external_ip", "logical_ip", "logical_port", "external_mac", "external_ids"),
    PG: ("name", "ports", "acls", "external_ids"),
    AS: ("name", "addresses", "external_ids"),
    ACL: ("priority", "direction", "match", "action", "external_ids"),
}

Row = Any  # python-ovs ovs.db.idl.Row: untyped

_UUID_INT = operator.attrgetter("int")


def opt_value(value: Any) -> str:
    """Optional columns come back as [] or [value]."""
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return str(value)


def text(row: Row, column: str) -> str:
    """A string column's committed value, read off the datum (no Python-value round trip: the
    initial sync of 50k ports reads three columns of each)."""
    if row._data is None:  # inserted in the open transaction
        return str(getattr(row, column))
    datum = row._data.get(column)
    if datum is None:  # python-ovs leaves a default value out (made on demand)
        return ""
    for atom in datum.values:
        return str(atom.value)
    return ""


def texts(row: Row, column: str) -> list[str]:
    """A set-of-strings column's committed members (see `text`)."""
    if row._data is None:  # inserted in the open transaction
        return list(getattr(row, column))
    datum = row._data.get(column)
    if datum is None:  # python-ovs leaves a default value out (made on demand)
        return []
    return [atom.value for atom in datum.values]


def text_map(row: Row, column: str) -> dict[str, str]:
    """A string-to-string map column's committed value (see `text`)."""
    if row._data is None:  # inserted in the open transaction
        return dict(getattr(row, column))
    datum = row._data.get(column)
    if datum is None:  # python-ovs leaves a default value out (made on demand)
        return {}
    return {k.value: v.value for k, v in datum.values.items()}


def row_keys(table: str, row: Row) -> set[Hashable]:
    """Index keys of one row; only the row's own columns, never a parent's big sets."""
    if table == LSP:
        ids = text_map(row, "external_ids")
        keys: set[Hashable] = {("name", text(row, "name"))}
        if ext.POD_KEY in ids:
            keys.add(("pod", ids[ext.POD_KEY]))
        if ext.VENDOR_KEY in ids:
            keys.add(("vendor", ids[ext.VENDOR_KEY]))
        keys.update(("sg", sg) for sg in ext.associated_sgs(ids))
        if ids.get(ext.SECURITY_GROUPS_KEY):
            keys.add(("has_sg",))
        keys.update(("ip", ip) for ip in logic.address_ips(texts(row, "addresses")))
        return keys
    if table == ROUTE:
        if opt_value(row.route_table):
            return set()
        try:
            prefix = logic.canonical_prefix(row.ip_prefix)
        except InvalidRequestError:
            return set()
        return {("route", prefix, opt_value(row.policy) or "dst-ip"), ("prefix", prefix)}
    if table == NAT:
        try:
            lip = logic.canonical_prefix(row.logical_ip)
        except InvalidRequestError:
            lip = row.logical_ip
        return {("lip", row.type, lip), ("eip", row.type, row.external_ip)}
    if table == POLICY:
        return {("policy", row.priority, row.match.strip())}
    if table == ACL:
        return set()  # reached through their port group only
    return {("name", text(row, "name"))}


class NbIndex:
    """Key -> row UUIDs per table, maintained from IDL notifications (IDL thread, conn lock).

    Memory matters at 50k ports: a key held by one row maps to that UUID itself, not to a
    one-element set, and each row's keys are kept as one tuple.
    """

    def __init__(self, tables: Mapping[str, Any]) -> None:
        self._tables = tables
        self._keys: dict[str, dict[uuid.UUID, tuple[Hashable, ...]]] = {t: {} for t in MONITORED}
        self._by_key: dict[str, dict[Hashable, uuid.UUID | set[uuid.UUID]]] = {
            t: {} for t in MONITORED
        }

    def reset(self) -> None:
        for t in MONITORED:
            self._keys[t].clear()
            self._by_key[t].clear()

    def on_row(self, event: str, row: Row, updates: Row) -> None:
        table = row._table.name
        if table not in self._keys:
            return
        if event == "update" and table in (LS, LR, PG, AS, LRP) and "name" not in updates._data:
            return  # NOTE: the hot path: a switch's port set changed, its name did not.
        u = row.uuid
        new = () if event == "delete" else tuple(row_keys(table, row))
        old = self._keys[table].get(u, ())
        if new == old:
            return
        by_key = self._by_key[table]
        for k in old:
            if k in new:
                continue
            cur = by_key.get(k)
            if cur == u:
                del by_key[k]
            elif isinstance(cur, set):
                cur.discard(u)
                if len(cur) == 1:
                    by_key[k] = next(iter(cur))
        for k in new:
            if k in old:
                continue
            cur = by_key.get(k)
            if cur is None:
                by_key[k] = u
            elif isinstance(cur, set):
                cur.add(u)
            elif cur != u:
                by_key[k] = {cur, u}
        if new:
            self._keys[table][u] = new
        else:
            self._keys[table].pop(u, None)

    def rows(self, table: str, key: Hashable) -> list[Row]:
        found = self._by_key[table].get(key)
        if found is None:
            return []
        rows = self._tables[table].rows
        if not isinstance(found, set):
            row = rows.get(found)
            return [] if row is None else [row]
        # by UUID, compared as integers (UUID.__lt__ is a Python call per comparison)
        return [rows[u] for u in sorted(found, key=_UUID_INT) if u in rows]

    def first(self, table: str, key: Hashable) -> Row | None:
        found = self.rows(table, key)
        return found[0] if found else None


def has_ref(parent: Row, column: str, child: Row) -> bool:
    """O(1) set membership on the committed datum (`parent.<column>` would copy the whole set)."""
    datum = parent._data.get(column) if parent._data is not None else None
    if datum is None:
        return False
    return ovs_data.Atom(ovs_types.UuidType, child.uuid) in datum.values


def has_string(row: Row, column: str, value: str) -> bool:
    """O(log n) membership of a string in a set column's committed datum (no copy)."""
    datum = row._data.get(column) if row._data is not None else None
    if datum is None:
        return False
    return ovs_data.Atom(ovs_types.StringType, value) in datum.values


def committed(row: Row, column: str) -> Any:
    """The committed value of a column, as `getattr(row, column)` gives it outside a txn."""
    datum = row._data.get(column) if row._data is not None else None
    if datum is None:
        return getattr(row, column)
    return datum.to_python(row._uuid_to_row)
