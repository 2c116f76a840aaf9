"""NbIdl builds inserted rows itself: it must hold what python-ovs's own Idl holds, row for row.

Both IDLs watch one real ovsdb-server with the same tables and columns; rows of every monitored
table are made with ovn-nbctl before they connect (the "initial" dump) and after (inserts of a
live monitor), with columns set, defaulted, optional and referencing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import ovs.poller
import pytest
from ovs.db import idl as ovs_idl

from controller.ovn.connection import NbConnectionConfig, NbIdl, build_idl, fetch_schema_helper
from controller.ovn.idl_index import MONITORED
from controller.sandbox.ovn.ovsdb import NbServer
from tests.fixtures.nb import nbctl

pytestmark = pytest.mark.timeout(90)


class Upstream(ovs_idl.Idl):
    """python-ovs as shipped, recording its notifications."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[tuple[str, str, Any]] = []

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        self.events.append((event, row._table.name, row.uuid))


def run_until(idls: list[Any], done: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for idl in idls:
            idl.run()
        if done():
            return
        if time.monotonic() > deadline:
            raise AssertionError("the IDLs did not catch up")
        poller = ovs.poller.Poller()
        for idl in idls:
            idl.wait(poller)
        poller.timer_wait(100)
        poller.block()


def plain(value: Any) -> Any:
    """A column's Python value with referenced rows replaced by their UUIDs (comparable)."""
    if isinstance(value, ovs_idl.Row):
        return value.uuid
    if isinstance(value, list):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def contents(idl: Any) -> dict[str, dict[Any, dict[str, Any]]]:
    return {
        table: {
            u: {column: plain(getattr(row, column)) for column in MONITORED[table]}
            for u, row in idl.tables[table].rows.items()
        }
        for table in MONITORED
    }


def make_rows(remote: str, suffix: str) -> None:
    ls, lr = f"ls-{suffix}", f"lr-{suffix}"
    steps = [
        ["ls-add", ls, "--", "set", "Logical_Switch", ls, "other_config:subnet=10.16.0.0/16"],
        ["lsp-add", ls, f"p1-{suffix}"],
        ["lsp-set-addresses", f"p1-{suffix}", "00:00:00:00:00:01 10.16.0.2", "unknown"],
        ["lsp-set-port-security", f"p1-{suffix}", "00:00:00:00:00:01 10.16.0.2"],
        ["set", "Logical_Switch_Port", f"p1-{suffix}", "external_ids:pod=default/p1"],
        ["lsp-add", ls, f"p2-{suffix}"],  # nothing but its name: every other column defaulted
        ["lr-add", lr],
        ["lrp-add", lr, f"rp-{suffix}", "00:00:00:00:01:01", "10.16.0.1/16", "fd00::1/64"],
        ["lsp-add", ls, f"sp-{suffix}"],
        ["lsp-set-type", f"sp-{suffix}", "router"],
        ["lsp-set-options", f"sp-{suffix}", f"router-port=rp-{suffix}"],
        ["lr-route-add", lr, "10.17.0.0/16", "100.64.0.2"],
        ["--policy=src-ip", "lr-route-add", lr, "10.16.0.2", "100.64.0.3"],
        ["lr-policy-add", lr, "31000", "ip4.dst == 10.16.0.0/16", "allow"],
        ["lr-policy-add", lr, "29000", "ip4.src == 10.16.0.2", "reroute", "100.64.0.4"],
        ["lr-nat-add", lr, "snat", "172.18.0.5", "10.16.0.2"],
        ["lr-nat-add", lr, "dnat_and_snat", "172.18.0.6", "10.16.0.3"],
        ["pg-add", f"pg_{suffix}", f"p1-{suffix}"],
        ["acl-add", f"pg_{suffix}", "to-lport", "1001", "ip4", "allow-related"],
        ["create", "Address_Set", f"name=as_{suffix}", "addresses=10.16.0.2,10.16.0.3"],
        ["create", "Address_Set", f"name=as_empty_{suffix}"],
    ]
    for step in steps:
        nbctl(remote, *step)


@pytest.fixture
def idls(nb_server: NbServer) -> Iterator[tuple[NbIdl, Upstream]]:
    make_rows(nb_server.remote, "a")
    config = NbConnectionConfig.from_addr(nb_server.remote, 10.0)
    ours = build_idl(config, MONITORED)
    ours.row_notify = lambda event, row, updates: ours_events.append(
        (event, row._table.name, row.uuid)
    )
    ours_events: list[tuple[str, str, Any]] = []
    ours.events = ours_events
    helper = fetch_schema_helper(config)
    for table, columns in MONITORED.items():
        helper.register_columns(table, list(columns))
    theirs = Upstream(nb_server.remote, helper)
    yield ours, theirs
    ours.close()
    theirs.close()


def test_rows_of_initial_dump_and_live_inserts_equal_python_ovs(
    nb_server: NbServer, idls: tuple[NbIdl, Upstream]
) -> None:
    ours, theirs = idls

    def caught_up(count: int) -> Callable[[], bool]:
        return lambda: all(
            len(idl.tables["Logical_Switch_Port"].rows) == count for idl in (ours, theirs)
        )

    run_until([ours, theirs], caught_up(3))
    first = contents(theirs)
    assert contents(ours) == first
    assert sum(len(rows) for rows in first.values()) >= 15  # every table has rows
    make_rows(nb_server.remote, "b")  # inserts into live monitors
    run_until([ours, theirs], caught_up(6))
    assert contents(ours) == contents(theirs)
    assert sorted(ours.events, key=repr) == sorted(theirs.events, key=repr)
    # the defaulted scalar columns read as their defaults, not as python-ovs's wrapped atoms
    bare = next(r for r in ours.tables["Logical_Switch_Port"].rows.values() if r.name == "p2-a")
    assert (bare.type, bare.addresses, bare.options) == ("", [], {})
    route = next(iter(ours.tables["Logical_Router_Static_Route"].rows.values()))
    assert route.route_table == ""
