"""The fast datum parser equals python-ovs's Datum.from_json on every OVN_Northbound column."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from ovs.db import data as ovs_data
from ovs.db import error as ovs_error
from ovs.db import schema as ovs_schema

from controller.ovn.datum import datum_from_json
from controller.sandbox.ovn.ovsdb import NB_SCHEMA

U1, U2 = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))

# Wire forms a column may carry, good and bad; each is tried on every column type.
SAMPLES: list[Any] = [
    "",
    "pod1.default",
    "00:00:00:aa:bb:cc 10.16.0.2",
    0,
    7,
    -1,
    2.0,
    2.5,
    True,
    False,
    None,
    ["uuid", U1],
    ["uuid", "not-a-uuid"],
    ["named-uuid", "row1"],
    ["set", []],
    ["set", ["a"]],
    ["set", ["a", "b"]],
    ["set", ["a", "a"]],
    ["set", [1, 2]],
    ["set", [["uuid", U1], ["uuid", U2]]],
    ["set", [["uuid", U1], ["uuid", U1]]],
    ["set", "a"],
    ["map", []],
    ["map", [["pod", "default/p"], ["ls", "ovn-default"]]],
    ["map", [["k", "v"], ["k", "w"]]],
    ["map", [["k", 1]]],
    ["map", [["k"]]],
    ["map", [[1, ["uuid", U1]]]],
    ["map", "x"],
    ["set", ["allow", "drop"]],
    "allow-related",
    "from-lport",
    "src-ip",
    ["bogus", []],
    [],
    {},
]


def column_types() -> Iterator[tuple[str, Any]]:
    with NB_SCHEMA.open() as f:
        schema = ovs_schema.DbSchema.from_json(json.load(f))
    for table in schema.tables.values():
        for name, column in table.columns.items():
            yield f"{table.name}.{name}", column.type


def outcome(parse: Any, type_: Any, value: Any) -> tuple[str, Any]:
    try:
        datum = parse(type_, value)
    except ovs_error.Error as e:
        return "error", str(e)
    assert isinstance(datum, ovs_data.Datum) and datum.type is type_
    atoms = sorted(
        (
            (type(k.value).__name__, k.value, k.type),
            None if v is None else (type(v.value).__name__, v.value, v.type),
        )
        for k, v in datum.values.items()
    )
    for k, v in datum.values.items():
        assert isinstance(k, ovs_data.Atom) and (v is None or isinstance(v, ovs_data.Atom))
    return "datum", atoms


@pytest.mark.parametrize(("where", "type_"), list(column_types()))
def test_same_datums_and_errors_as_python_ovs(where: str, type_: Any) -> None:
    for value in SAMPLES:
        expected = outcome(ovs_data.Datum.from_json, type_, value)
        assert outcome(datum_from_json, type_, value) == expected, (where, value)


def test_the_monitored_string_columns_take_the_fast_path() -> None:
    # the columns that make up the bulk of the initial dump must not fall back silently
    from controller.ovn import datum

    types = dict(column_types())
    for where in (
        "Logical_Switch_Port.name",
        "Logical_Switch_Port.addresses",
        "Logical_Switch_Port.external_ids",
        "Logical_Switch_Port.options",
        "Logical_Switch.ports",
        "Address_Set.addresses",
        "Port_Group.ports",
    ):
        assert datum._column_kinds(types[where]) is not None, where
