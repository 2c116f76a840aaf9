"""Independent reads of the test NB database with `ovn-nbctl` (not through the controller's client).

`nb_rows(remote, table)` returns every row of `table` as a plain dict: sets become lists, maps
dicts, references the referenced row's `name` when it has one (else its UUID string), so tests
can assert on port groups, address sets, ACLs, routes and NAT rows as `ovn-nbctl list` shows them.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

_NAMED = ("Logical_Switch_Port", "Logical_Switch", "Logical_Router", "Port_Group")
_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")


@functools.cache
def _set_columns(table: str) -> frozenset[str]:
    """Columns that hold sets (ovn-nbctl prints a one-element set as a bare atom)."""
    columns = json.loads(_SCHEMA.read_text())["tables"][table]["columns"]
    return frozenset(
        name
        for name, col in columns.items()
        if isinstance(col["type"], dict)
        and "value" not in col["type"]
        and col["type"].get("max", 1) != 1
    )


def _nbctl(remote: str, *args: str) -> str:
    result = subprocess.run(
        ["ovn-nbctl", f"--db={remote}", "--timeout=10", *args],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"ovn-nbctl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _atom(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, list) and len(value) == 2 and value[0] == "uuid":
        return names.get(value[1], value[1])
    return value


def _datum(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, list) and len(value) == 2 and value[0] == "set":
        return [_atom(v, names) for v in value[1]]
    if isinstance(value, list) and len(value) == 2 and value[0] == "map":
        return {_atom(k, names): _atom(v, names) for k, v in value[1]}
    return _atom(value, names)


def _raw(remote: str, table: str) -> list[dict[str, Any]]:
    doc = json.loads(_nbctl(remote, "--format=json", "list", table))
    return [dict(zip(doc["headings"], row, strict=True)) for row in doc["data"]]


def nb_rows(remote: str, table: str) -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    for named in _NAMED:
        for row in _raw(remote, named):
            names[row["_uuid"][1]] = row["name"]
    sets = _set_columns(table)
    out = []
    for row in _raw(remote, table):
        item = {k: _datum(v, names) for k, v in row.items()}
        for col in sets & item.keys():
            if not isinstance(item[col], list):
                item[col] = [item[col]]
        out.append(item)
    return out


def nb_row(remote: str, table: str, name: str) -> dict[str, Any] | None:
    for row in nb_rows(remote, table):
        if row.get("name") == name:
            return row
    return None
