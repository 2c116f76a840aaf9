"""The real client against real ovsdb-servers: outages, Raft fail-over, foreign writers."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.ovn.api import DuplicateAddressError, OvnError, OvnTimeoutError, PortSpec
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbCluster, NbServer, SandboxPki
from controller.testing.wait import wait_for
from tests.fixtures.nb import nbctl

pytestmark = pytest.mark.timeout(90)

LR, LS = "ovn-cluster", "ovn-default"


def port(i: int, ls: str = LS) -> PortSpec:
    return PortSpec(
        f"p{i}.ns",
        ls,
        f"00:00:00:00:{i // 256:02x}:{i % 256:02x}",
        (f"10.16.{i // 250}.{i % 250 + 2}",),
        pod_name=f"p{i}",
        pod_namespace="ns",
    )


def setup(nb: OvsdbappNbClient) -> None:
    nb.ensure_logical_router(LR)
    nb.ensure_logical_switch(LS, LR, "10.16.0.0/16", "10.16.0.1", {})


def eventually(fn: Callable[[], object], deadline_s: float) -> None:
    """Retry fn until it stops raising OvnError; fail after the deadline with the last one."""

    def succeeded() -> bool:
        fn()
        return True

    wait_for(succeeded, deadline_s, "the call to succeed", tolerate=(OvnError,))


def outcome_within(fn: Callable[[], object], deadline: float) -> BaseException | None:
    """Run `fn` on a thread and return what it raised (None when it returned); fail the test if
    it has not finished after `deadline` seconds, a bound for a hang, not a speed measurement."""
    done = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    wait_for(done.is_set, deadline, "the call to end")
    return raised[0] if raised else None


def test_server_restart_mid_run(nb_server: NbServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    timeout = 2.0
    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=timeout) as nb:
        setup(nb)
        nb.create_port(port(1))
        nb_server.stop()
        # the verb gives up after its timeout instead of waiting for the server to return
        error = outcome_within(lambda: nb.create_port(port(2)), timeout * 10)
        assert isinstance(error, OvnTimeoutError) and "not connected" in str(error), error
        assert not nb.connected
        nb_server.start()
        eventually(lambda: nb.create_port(port(2)), 15)
        nb.create_port(port(3))
        assert nb.connected
        assert nb.list_pod_ports("p1", "ns") == ["p1.ns"]
        assert {p.name for p in nb.list_ports()} >= {"p1.ns", "p2.ns", "p3.ns"}
    # python-ovs's own reconnect messages arrive through stdlib logging
    vlog = [r.getMessage() for r in caplog.records if r.name.endswith("ovs_idl.vlog")]
    assert any("connected" in m for m in vlog), vlog


def test_calls_queued_during_an_outage_all_fail_in_time(nb_server: NbServer) -> None:
    timeout = 1.0
    calls = 8
    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=timeout) as nb:
        setup(nb)
        nb_server.stop()
        errors: list[BaseException] = []

        def call(i: int) -> None:
            try:
                nb.create_port(port(i))
            except OvnError as e:
                errors.append(e)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(calls)]
        for t in threads:
            t.start()
        # each queued call runs on its own timeout: one after another they would take 8 s
        wait_for(
            lambda: len(errors) == calls,
            timeout * calls / 2,
            "every queued call failed within its own timeout, not after the ones before it",
        )
        for t in threads:
            t.join(10)
        assert all(isinstance(e, OvnTimeoutError) for e in errors), errors


def test_restart_with_a_fresh_database_drops_stale_index(short_tmp: Path) -> None:
    server = NbServer(short_tmp).start()
    try:
        with OvsdbappNbClient.from_addr(server.remote, timeout=3.0) as nb:
            setup(nb)
            nb.create_port(port(1))
            server.stop()
            shutil.move(str(server.db), str(short_tmp / "old.db"))
            server.start()  # empty database, same socket
            eventually(lambda: setup(nb), 15)
            assert nb.get_port("p1.ns") is None
            assert nb.list_pod_ports("p1", "ns") == []
            nb.create_port(port(1))  # no ghost duplicate of 10.16.0.3
    finally:
        server.stop()


def test_raft_leader_killed_client_carries_on(short_tmp: Path) -> None:
    cluster = NbCluster(short_tmp, size=3).start()
    try:
        with OvsdbappNbClient.from_addr(cluster.remote, timeout=10.0) as nb:
            setup(nb)
            nb.create_ports([port(i) for i in range(10)])
            leader = cluster.wait_for_leader()
            cluster.kill(leader)
            nb.create_port(port(10))  # waits for the re-election within the timeout
            nb.delete_port("p0.ns")
            new_leader = cluster.wait_for_leader()
            assert new_leader != leader
            assert len(nb.list_ports()) == 11  # 10 pods + the router port
            # a surviving member agrees
            survivor = next(i for i in range(3) if i != leader)
            names = nbctl(
                cluster.member_remote(survivor),
                "--no-leader-only",
                "--columns=name",
                "--bare",
                "list",
                "Logical_Switch_Port",
            ).split()
            assert "p10.ns" in names and "p0.ns" not in names
    finally:
        cluster.stop()


def test_foreign_writers_are_seen(real_client: OvsdbappNbClient, nb_server: NbServer) -> None:
    # The cache follows other writers asynchronously (ms later): wait for it, as a controller
    # would see it on its next reconcile.
    nb = real_client
    setup(nb)
    nbctl(
        nb_server.remote,
        "lsp-add",
        LS,
        "foreign",
        "--",
        "lsp-set-addresses",
        "foreign",
        "00:00:00:00:99:99 10.16.0.50",
    )
    wait_for(lambda: nb.get_port("foreign") is not None, 10.0)
    with pytest.raises(DuplicateAddressError, match="foreign"):
        nb.create_port(PortSpec("mine.ns", LS, "00:00:00:00:00:01", ("10.16.0.50",)))
    nb.create_port(port(1))
    nbctl(nb_server.remote, "lsp-del", "p1.ns")
    wait_for(lambda: nb.get_port("p1.ns") is None, 10.0)
    nb.delete_port("p1.ns")
    nb.delete_port("foreign")  # no ls external_id: found by its switch
    assert nbctl(nb_server.remote, "lsp-list", LS).count("(") == 1  # only the router port


def test_two_clients_do_not_share_a_connection(short_tmp: Path) -> None:
    a = NbServer(short_tmp / "a").start()
    b = NbServer(short_tmp / "b").start()
    try:
        with (
            OvsdbappNbClient.from_addr(a.remote, timeout=3) as ca,
            OvsdbappNbClient.from_addr(b.remote, timeout=3) as cb,
        ):
            ca.ensure_logical_router("only-a")
            cb.ensure_logical_router("only-b")
            assert "only-a" in nbctl(a.remote, "lr-list")
            assert "only-a" not in nbctl(b.remote, "lr-list")
            assert "only-b" in nbctl(b.remote, "lr-list")
    finally:
        a.stop()
        b.stop()


def test_request_observer(nb_server: NbServer) -> None:
    seen: list[tuple[str, float, bool]] = []
    with OvsdbappNbClient.from_addr(
        nb_server.remote, timeout=3, on_request=lambda m, s, ok: seen.append((m, s, ok))
    ) as nb:
        nb.ensure_logical_router(LR)
        with pytest.raises(OvnError):
            nb.create_port(port(1))  # no switch
    assert [(m, ok) for m, _, ok in seen] == [
        ("ensure_logical_router", True),
        ("create_port", False),
    ]
    assert all(s >= 0 for _, s, _ in seen)


def test_removing_an_absent_nat_sends_no_transaction(nb_server: NbServer) -> None:
    # The update handler calls update_nat_rule(..., "") twice for every pod without EIP/SNAT
    # (kube-ovn does); with nothing to remove that must not cost an NB round trip.
    seen: list[str] = []
    with OvsdbappNbClient.from_addr(
        nb_server.remote, timeout=3, on_request=lambda m, s, ok: seen.append(m)
    ) as nb:
        setup(nb)
        seen.clear()
        nb.update_nat_rule("dnat_and_snat", "10.16.0.2", "", LR, "00:00:00:00:00:01", "p1.ns")
        nb.update_nat_rule("snat", "10.16.0.2", "", LR)
        assert seen == []
        nb.update_nat_rule("snat", "10.16.0.2", "172.18.0.1", LR)
        nb.update_nat_rule("snat", "10.16.0.2", "", LR)  # something to remove: a transaction
        assert seen == ["update_nat_rule", "update_nat_rule"]
        assert nb.list_nat_rules(LR) == []
        with pytest.raises(OvnError):
            nb.update_nat_rule("snat", "10.16.0.2", "", "no-such-router")


def test_connect_to_nothing_fails_rather_than_waiting(short_tmp: Path) -> None:
    error = outcome_within(
        lambda: OvsdbappNbClient.from_addr(f"unix:{short_tmp}/absent.sock", timeout=1.0), 10
    )
    assert isinstance(error, OvnError), error


def test_tcp_remote(short_tmp: Path) -> None:
    server = NbServer(short_tmp, tcp=True).start()
    try:
        with OvsdbappNbClient.from_addr(server.tcp_remote, timeout=3) as nb:
            setup(nb)
            nb.create_port(port(1))
            assert nb.get_port("p1.ns") is not None
    finally:
        server.stop()


def test_close_is_idempotent_and_later_calls_fail(nb_server: NbServer) -> None:
    nb = OvsdbappNbClient.from_addr(nb_server.remote, timeout=3)
    nb.ensure_logical_router(LR)
    nb.close()
    nb.close()
    with pytest.raises(OvnError, match="closed"):
        nb.ensure_logical_router(LR)


def test_ssl_remote(short_tmp: Path) -> None:
    pki = SandboxPki.create(short_tmp / "pki")
    server = NbServer(short_tmp, pki=pki).start()
    try:
        with OvsdbappNbClient.from_addr(
            server.ssl_remote,
            timeout=5,
            ssl_private_key=str(pki.client_key),
            ssl_certificate=str(pki.client_cert),
            ssl_ca_cert=str(pki.ca_cert),
        ) as nb:
            setup(nb)
            nb.create_port(port(1))
            assert nb.get_port("p1.ns") is not None
    finally:
        server.stop()


def test_big_switch_membership_stays_exact(
    real_client: OvsdbappNbClient, nb_server: NbServer
) -> None:
    # Past 64 members the client applies set diffs in place: membership must stay exact.
    nb = real_client
    setup(nb)
    nb.create_ports([port(i) for i in range(150)])
    nb.delete_ports([f"p{i}.ns" for i in range(0, 150, 2)])
    nb.create_port(port(150))
    with pytest.raises(DuplicateAddressError, match=r"p149\.ns"):
        nb.create_port(PortSpec("dup.ns", LS, "00:00:00:00:ff:01", port(149).ips))
    nb.create_port(PortSpec("reuse.ns", LS, "00:00:00:00:ff:02", port(0).ips))  # freed IP
    info = nb.get_port("p149.ns")
    assert info is not None and info.switch == LS
    expected = {f"p{i}.ns" for i in range(1, 151, 2)} | {"p150.ns", "reuse.ns", f"{LS}-{LR}"}
    listed = nbctl(nb_server.remote, "--bare", "--columns=name", "list", "Logical_Switch_Port")
    assert set(listed.split()) == expected
    assert {p.name for p in nb.list_ports()} == expected


def test_deferred_start_syncs_later_and_a_close_meanwhile_stops_it(nb_server: NbServer) -> None:
    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=20.0) as writer:
        setup(writer)
        writer.create_ports([port(1)])
    # not started: nothing read yet, not connected, and readiness must not wait on it
    late = OvsdbappNbClient.from_addr(nb_server.remote, timeout=20.0, start=False)
    assert not late.synced and not late.connected
    late.start()
    assert late.synced and late.connected
    assert "p1.ns" in [p.name for p in late.list_ports()]
    late.start()  # idempotent
    late.close()
    # closed while the dump is held up (the server stopped): start() ends the connection
    held = OvsdbappNbClient.from_addr(nb_server.remote, timeout=20.0, start=False)
    nb_server.pause()
    try:
        starting = threading.Thread(target=held.start)
        starting.start()
        wait_for(lambda: held._starting, timeout=10, message="start() waiting for the dump")
        held.close()  # returns at once
        assert starting.is_alive()
    finally:
        nb_server.resume()
    starting.join(20)
    assert not starting.is_alive()
    assert not held.synced and not held.connected
    assert not held._conn.is_running
    # never started, then closed: start() does nothing
    unused = OvsdbappNbClient.from_addr(nb_server.remote, timeout=20.0, start=False)
    unused.close()
    unused.start()
    assert not unused.synced


def test_a_server_that_stops_answering_mid_transaction_holds_nothing_past_the_timeout(
    nb_server: NbServer,
) -> None:
    # A stopped server keeps the socket open: the transaction is sent and never answered, as
    # when the server hangs or dies between reading a request and replying.
    timeout = 1.0
    with OvsdbappNbClient.from_addr(nb_server.remote, timeout=timeout) as nb:
        setup(nb)
        nb_server.pause()
        try:
            with pytest.raises(OvnTimeoutError, match="may or may not have been applied"):
                nb.create_port(port(1))
            # the IDL thread gave the unanswered transaction up: reads and the next verb do
            # not wait on it for as long as the server is gone
            answered = threading.Event()

            def read() -> None:
                nb.list_ports()
                assert isinstance(nb.connected, bool)
                answered.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert answered.wait(timeout * 5), "a read waited on the unanswered transaction"
            with pytest.raises(OvnTimeoutError):
                nb.create_port(port(2))
        finally:
            nb_server.resume()
        # the client carries on, and retrying the writes it gave up on converges whether or
        # not the server applied them once it resumed
        eventually(lambda: nb.create_port(port(2)), 15)
        nb.create_port(port(1))
        assert {"p1.ns", "p2.ns"} <= {p.name for p in nb.list_ports()}


def test_connected_never_waits_on_the_connection_lock(real_client: OvsdbappNbClient) -> None:
    # The IDL thread holds that lock while a transaction waits for a lost server (up to
    # --ovn-timeout), and the health probes ask `connected` exactly then.
    answers: list[bool] = []
    with real_client._conn.lock:
        asking = threading.Thread(target=lambda: answers.append(real_client.connected))
        asking.start()
        asking.join(10)
        assert not asking.is_alive(), "connected waited on the connection lock"
    assert answers == [True]
