"""Independent views of NB rows for the contract suite: the fake's dicts, or ovn-nbctl output.

The real client's rows are read back with `ovn-nbctl` (not through the client's own cache), so a
test sees what is really stored in the database.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from controller.testing.fake_nb import FakeNbClient
from tests.fixtures.nb import nbctl


class NbView(Protocol):
    def switch_ports(self, name: str) -> set[str] | None: ...

    def switch_config(self, name: str) -> tuple[dict[str, str], dict[str, str]] | None: ...

    def router_ports(self, name: str) -> dict[str, list[str]] | None: ...

    def port_group(self, name: str) -> tuple[set[str], dict[str, str]] | None: ...

    def address_set(self, name: str) -> list[str] | None: ...

    def port_column(self, name: str, column: str) -> Any: ...

    def router_policies(self, router: str) -> list[tuple[int, str, str, list[str]]]: ...


class FakeView:
    def __init__(self, nb: FakeNbClient) -> None:
        self.nb = nb

    def switch_ports(self, name: str) -> set[str] | None:
        ls = self.nb.state.switches.get(name)
        return None if ls is None else set(ls.ports)

    def switch_config(self, name: str) -> tuple[dict[str, str], dict[str, str]] | None:
        ls = self.nb.state.switches.get(name)
        return None if ls is None else (dict(ls.external_ids), dict(ls.other_config))

    def router_ports(self, name: str) -> dict[str, list[str]] | None:
        lr = self.nb.state.routers.get(name)
        return None if lr is None else {n: sorted(p.networks) for n, p in lr.ports.items()}

    def port_group(self, name: str) -> tuple[set[str], dict[str, str]] | None:
        pg = self.nb.state.port_groups.get(name)
        return None if pg is None else (set(pg.ports), dict(pg.external_ids))

    def address_set(self, name: str) -> list[str] | None:
        a = self.nb.state.address_sets.get(name)
        return None if a is None else sorted(a)

    def port_column(self, name: str, column: str) -> Any:
        p = self.nb.state.ports[name]
        return getattr(p, column)

    def router_policies(self, router: str) -> list[tuple[int, str, str, list[str]]]:
        lr = self.nb.state.routers[router]
        return sorted(
            (p.priority, p.match, p.action, sorted(p.nexthops)) for p in lr.policies.values()
        )


def _decode(value: Any) -> Any:
    """ovsdb JSON -> python: ["set", [...]], ["map", [[k, v]...]], ["uuid", u]."""
    if isinstance(value, list) and len(value) == 2 and value[0] in ("set", "map", "uuid"):
        kind, inner = value
        if kind == "set":
            return [_decode(v) for v in inner]
        if kind == "map":
            return {k: _decode(v) for k, v in inner}
        return inner
    return value


class NbctlView:
    def __init__(self, remote: str) -> None:
        self.remote = remote

    def _rows(self, table: str, *conditions: str) -> list[dict[str, Any]]:
        doc = json.loads(nbctl(self.remote, "--format=json", "find", table, *conditions))
        return [
            {h: _decode(v) for h, v in zip(doc["headings"], row, strict=True)}
            for row in doc["data"]
        ]

    def _one(self, table: str, name: str) -> dict[str, Any] | None:
        rows = self._rows(table, f"name={json.dumps(name)}")
        assert len(rows) <= 1, rows
        return rows[0] if rows else None

    def _names(self, table: str, uuids: Any) -> set[str]:
        if isinstance(uuids, str):
            uuids = [uuids]
        by_uuid = {r["_uuid"]: r["name"] for r in self._rows(table)}
        return {by_uuid[u] for u in uuids}

    def switch_ports(self, name: str) -> set[str] | None:
        ls = self._one("Logical_Switch", name)
        return None if ls is None else self._names("Logical_Switch_Port", ls["ports"])

    def switch_config(self, name: str) -> tuple[dict[str, str], dict[str, str]] | None:
        ls = self._one("Logical_Switch", name)
        return None if ls is None else (ls["external_ids"], ls["other_config"])

    def router_ports(self, name: str) -> dict[str, list[str]] | None:
        lr = self._one("Logical_Router", name)
        if lr is None:
            return None
        names = self._names("Logical_Router_Port", lr["ports"])
        out = {}
        for n in names:
            lrp = self._one("Logical_Router_Port", n)
            assert lrp is not None
            nets = lrp["networks"]
            out[n] = sorted([nets] if isinstance(nets, str) else nets)
        return out

    def port_group(self, name: str) -> tuple[set[str], dict[str, str]] | None:
        pg = self._one("Port_Group", name)
        if pg is None:
            return None
        return self._names("Logical_Switch_Port", pg["ports"]), pg["external_ids"]

    def address_set(self, name: str) -> list[str] | None:
        a = self._one("Address_Set", name)
        if a is None:
            return None
        addrs = a["addresses"]
        return sorted([addrs] if isinstance(addrs, str) else addrs)

    def port_column(self, name: str, column: str) -> Any:
        row = self._one("Logical_Switch_Port", name)
        assert row is not None
        value = row[column]
        if column in ("addresses", "port_security") and isinstance(value, str):
            return [value]
        return value

    def router_policies(self, router: str) -> list[tuple[int, str, str, list[str]]]:
        lr = self._one("Logical_Router", router)
        assert lr is not None
        uuids = lr["policies"]
        uuids = [uuids] if isinstance(uuids, str) else uuids
        out = []
        for row in self._rows("Logical_Router_Policy"):
            if row["_uuid"] in uuids:
                hops = row["nexthops"]
                hops = [hops] if isinstance(hops, str) else hops
                out.append((row["priority"], row["match"], row["action"], sorted(hops)))
        return sorted(out)
