"""Group commit in the real client: concurrent verbs share one transaction, errors stay apart.

The IDL thread is held (the test takes the connection lock it needs for every iteration) until
every caller's verb is pending, so which verbs share a transaction is deterministic.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial

import pytest

from controller.ovn.api import DuplicateAddressError, OvnError, OvnNotFoundError
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer
from controller.testing.wait import wait_for
from tests.ovn.test_real import LR, port, setup

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def nb(nb_server: NbServer) -> Iterator[OvsdbappNbClient]:
    client = OvsdbappNbClient.from_addr(nb_server.remote, timeout=20.0)
    setup(client)
    yield client
    client.close()


@contextmanager
def held_idl(nb: OvsdbappNbClient) -> Iterator[None]:
    with nb._conn.lock:
        yield


@contextmanager
def busy_idl_thread(nb: OvsdbappNbClient) -> Iterator[None]:
    """Keep the IDL thread in a transaction of its own, without the connection lock, so verbs
    that read the cache first (under that lock) still reach the group's pending list."""
    started, release = threading.Event(), threading.Event()

    class Blocker:
        results: queue.Queue[object] = queue.Queue()

        def do_commit(self) -> None:
            nb._conn.lock.release()  # taken by the IDL loop around every do_commit
            try:
                started.set()
                release.wait(30)
            finally:
                nb._conn.lock.acquire()

    nb._conn.txns.put(Blocker())
    assert started.wait(10)
    try:
        yield
    finally:
        release.set()


def run_concurrently(
    nb: OvsdbappNbClient,
    calls: list[Callable[[], object]],
    hold: Callable[[OvsdbappNbClient], AbstractContextManager[None]] = held_idl,
) -> list[BaseException | None]:
    """Run each call in its own thread while the IDL thread is held; their outcomes in order."""
    outcomes: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            calls[i]()
        except OvnError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    group = nb._group
    assert group is not None
    with hold(nb):
        for t in threads:
            t.start()
        wait_for(lambda: len(group._pending) == len(calls), 10, "every verb pending")
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_two_threads_verbs_land_in_one_transaction(nb: OvsdbappNbClient) -> None:
    assert nb._group is not None
    before = nb._group.transactions
    outcomes = run_concurrently(
        nb,
        [
            lambda: nb.create_port(port(1)),
            lambda: nb.create_port(port(2)),
            lambda: nb.add_static_route("", "10.16.0.3", "100.64.0.2", LR),
        ],
    )
    assert outcomes == [None, None, None]
    assert nb._group.transactions == before + 1
    assert {p.name for p in nb.list_ports()} >= {"p1.ns", "p2.ns"}
    assert [r.ip_prefix for r in nb.list_static_routes(LR)] == ["10.16.0.3"]


def test_a_failing_verb_fails_only_its_caller(nb: OvsdbappNbClient) -> None:
    assert nb._group is not None
    before = nb._group.transactions
    outcomes = run_concurrently(
        nb,
        [
            lambda: nb.create_port(port(1)),
            lambda: nb.create_port(port(2, ls="no-such-switch")),
            lambda: nb.create_port(port(3)),
        ],
    )
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], OvnNotFoundError)
    assert nb._group.transactions == before + 1  # the rest committed together, once
    names = {p.name for p in nb.list_ports()}
    assert {"p1.ns", "p3.ns"} <= names and "p2.ns" not in names


def test_conflicting_verbs_see_each_other_as_if_sequential(nb: OvsdbappNbClient) -> None:
    # Two ports claiming one address in one batch: the second fails as it would after the first
    # committed; the same port created twice goes in two transactions (keys conflict).
    clash = port(2)
    clash = type(clash)("other.ns", clash.switch, "00:00:00:00:09:09", clash.ips)
    outcomes = run_concurrently(
        nb,
        [
            lambda: nb.create_port(port(2)),
            lambda: nb.create_port(clash),
            lambda: nb.create_port(port(2)),
        ],
    )
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], DuplicateAddressError)
    assert nb.list_pod_ports("p2", "ns") == ["p2.ns"]


@pytest.mark.parametrize("exists", [True, False], ids=["set exists", "set missing"])
def test_entries_of_one_address_set_share_a_transaction(nb: OvsdbappNbClient, exists: bool) -> None:
    # Pods of one node add their addresses to the node's set: mutations, so several may go in
    # one transaction; a verb that may create the set goes alone (two would create two sets).
    ids = {"kube-ovn-route": "gateway"}
    if exists:
        nb.add_address_set_addresses("node1_ip4", ["10.16.0.1"], ids)
    assert nb._group is not None
    before = nb._group.transactions
    ips = ["10.16.0.2", "10.16.0.3", "10.16.0.4"]
    outcomes = run_concurrently(
        nb,
        [partial(nb.add_address_set_addresses, "node1_ip4", [ip], ids) for ip in ips],
        busy_idl_thread,
    )
    assert outcomes == [None, None, None]
    # missing: the three verbs all read "missing" and each may create the set: one each
    assert nb._group.transactions == before + (1 if exists else 3)
    (got,) = nb.list_address_sets(ids)
    assert set(got.addresses) == {*ips, *(["10.16.0.1"] if exists else [])}


def test_an_address_set_created_earlier_in_the_batch_takes_later_entries(
    nb: OvsdbappNbClient,
) -> None:
    ids = {"kube-ovn-route": "gateway"}
    assert nb._group is not None
    before = nb._group.transactions
    outcomes = run_concurrently(
        nb,
        [
            lambda: nb.add_address_set_addresses("node1_ip4", ["10.16.0.2"], ids),
            lambda: nb.add_address_set_addresses("node2_ip4", ["10.16.0.3"], ids),
        ],
        busy_idl_thread,
    )
    assert outcomes == [None, None]
    assert nb._group.transactions == before + 1  # two sets, two keys: one transaction
    got = {a.name: set(a.addresses) for a in nb.list_address_sets(ids)}
    assert got == {"node1_ip4": {"10.16.0.2"}, "node2_ip4": {"10.16.0.3"}}


def test_group_commit_can_be_turned_off(nb_server: NbServer) -> None:
    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=20.0, group_commit=False) as nb:
        setup(nb)
        assert nb._group is None
        nb.create_port(port(1))
        assert nb.list_pod_ports("p1", "ns") == ["p1.ns"]
