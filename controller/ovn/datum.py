"""Parsing OVSDB datums off the wire, faster than python-ovs for the columns we monitor.

Contract: `datum_from_json(type_, json)` returns what `ovs.db.data.Datum.from_json(type_, json)`
returns (same values, same Atom types) and raises `ovs.db.error.Error` where it raises. It
takes its own path only when every atom of the column is a string, integer, boolean or UUID
without constraints (no enum, no range, no length bound), which covers the name, external_ids,
addresses, ports and options columns of OVN_Northbound. Any other column, and any JSON that is
not what such a column carries, goes to python-ovs, which then parses or raises as usual.

Why: the IDL parses every column of every row of the initial dump and of each update through
`Datum.from_json`, which re-derives the accepted Python types, rounds floats and checks
constraints per atom; for 20,000 logical switch ports that is most of the NB sync time.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

from ovs.db import data as ovs_data
from ovs.db import types as ovs_types

Atom = ovs_data.Atom
Datum = ovs_data.Datum

_STR = ovs_types.StringType
_INT = ovs_types.IntegerType
_BOOL = ovs_types.BooleanType
_UUID = ovs_types.UuidType


def _atom_kind(base: Any) -> Any:
    """The AtomicType of a base type we parse ourselves, else None (python-ovs parses it)."""
    if base is None:
        return None
    if base.enum is not None or base.min is not None or base.max is not None:
        return None
    if base.min_length != 0 or base.max_length != sys.maxsize:
        return None
    if base.type in (_STR, _INT, _BOOL, _UUID):
        return base.type
    return None


# Column types are schema objects (unhashable) that live as long as their IDL: keyed by
# identity, each entry holding its type so that a reused id is never mistaken for it.
_kinds: dict[int, tuple[Any, tuple[Any, Any] | None]] = {}


def _column_kinds(type_: Any) -> tuple[Any, Any] | None:
    """(key kind, value kind or None) for a column type we parse, else None."""
    cached = _kinds.get(id(type_))
    if cached is not None and cached[0] is type_:
        return cached[1]
    key = _atom_kind(type_.key)
    value = _atom_kind(type_.value) if type_.value is not None else None
    kinds = None if key is None or (type_.value is not None and value is None) else (key, value)
    _kinds[id(type_)] = (type_, kinds)
    return kinds


def _atom(kind: Any, json: Any) -> Any:
    """One atom, or None when the JSON is not a plain value of that kind."""
    if kind is _STR:
        return Atom(_STR, json) if type(json) is str else None
    if kind is _UUID:
        if type(json) is list and len(json) == 2 and json[0] == "uuid" and type(json[1]) is str:
            try:
                return Atom(_UUID, uuid.UUID(json[1]))
            except ValueError:
                return None
        return None
    if kind is _INT:
        # bool is an int to python-ovs too, but a float is rounded there: leave it to python-ovs
        return Atom(_INT, json) if isinstance(json, int) else None
    if kind is _BOOL:
        return Atom(_BOOL, json) if type(json) is bool else None
    return None


def datum_from_json(type_: Any, json: Any) -> Any:
    """`Datum.from_json(type_, json)`, without a symbol table (see the module docstring)."""
    kinds = _column_kinds(type_)
    if kinds is None:
        return Datum.from_json(type_, json)
    key_kind, value_kind = kinds
    values: dict[Any, Any] = {}
    if value_kind is not None:
        if type(json) is not list or len(json) != 2 or json[0] != "map":
            return Datum.from_json(type_, json)
        if type(json[1]) is not list:
            return Datum.from_json(type_, json)
        for pair in json[1]:
            if type(pair) is not list or len(pair) != 2:
                return Datum.from_json(type_, json)
            k = _atom(key_kind, pair[0])
            v = _atom(value_kind, pair[1])
            if k is None or v is None or k in values:
                return Datum.from_json(type_, json)
            values[k] = v
    elif type(json) is list and len(json) == 2 and json[0] == "set":
        if type(json[1]) is not list:
            return Datum.from_json(type_, json)
        for element in json[1]:
            k = _atom(key_kind, element)
            if k is None or k in values:
                return Datum.from_json(type_, json)
            values[k] = None
    else:
        k = _atom(key_kind, json)
        if k is None:
            return Datum.from_json(type_, json)
        values[k] = None
    if not type_.n_min <= len(values) <= type_.n_max:
        return Datum.from_json(type_, json)  # raises the size error
    return Datum(type_, values)
