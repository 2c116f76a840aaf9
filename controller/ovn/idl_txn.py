"""The transaction plumbing of `OvsdbappNbClient` over ovsdbapp.

Contract:

* `VerbCommand` runs one domain verb (a function of a `VerbContext`) inside ovsdbapp's
  transaction; ovsdbapp re-runs it when the server answers TRY_AGAIN.
* `DeadlineTransaction` gives every transaction one deadline (`--ovn-timeout`) that covers
  queueing behind other transactions, waiting for a (re)connection and the commit; a
  transaction whose caller already gave up is never started, and it never commits against a
  stale cache (it waits, within the deadline, for the connection to be back and in sync).
  The deadline also bounds the wait for the server's answer: a transaction sent to a server
  that never answers (it hangs, or dies between reading it and replying) is given up at the
  deadline as "may or may not have been applied", so the IDL thread, which holds the
  connection lock while it commits, never keeps reads waiting for as long as an outage lasts.
* `NbApi` is ovsdbapp's NB API with that transaction class.
"""

from __future__ import annotations

import ctypes
import queue
import time
from collections.abc import Callable
from typing import Any

from ovs import poller as ovs_poller
from ovsdbapp import exceptions as ovsdbapp_exc
from ovsdbapp.backend.ovs_idl import command as ovsdbapp_command
from ovsdbapp.backend.ovs_idl import idlutils
from ovsdbapp.backend.ovs_idl import transaction as ovsdbapp_transaction
from ovsdbapp.schema.ovn_northbound import impl_idl as nb_impl_idl

from controller.ovn.api import (
    OvnTimeoutError,
)
from controller.ovn.idl_context import VerbContext
from controller.ovn.idl_index import NbIndex


class VerbCommand(ovsdbapp_command.BaseCommand):  # type: ignore[misc]
    """Runs one domain verb inside ovsdbapp's transaction (re-run on TRY_AGAIN)."""

    def __init__(
        self, api: Any, index: NbIndex, verb: str, fn: Callable[[VerbContext], Any]
    ) -> None:
        super().__init__(api)
        self.index = index
        self.verb = verb
        self.fn = fn

    def run_idl(self, txn: Any) -> None:
        self.result = self.fn(VerbContext(self.index, txn))

    def __str__(self) -> str:
        return f"VerbCommand({self.verb})"


class DeadlineTransaction(ovsdbapp_transaction.Transaction):  # type: ignore[misc]
    """One deadline for queueing, reconnect waits and the commit; abandoned txns never start."""

    def commit(self) -> Any:
        self.deadline = time.monotonic() + self.timeout
        self.abandoned = False
        try:
            self.ovsdb_connection.txns.put(self, timeout=self.timeout)
        except queue.Full:
            raise OvnTimeoutError(
                f"OVN NB busy: transaction not started within {self.timeout}s"
            ) from None
        try:
            result = self.results.get(timeout=max(self.deadline - time.monotonic(), 0.0))
        except queue.Empty:
            self.abandoned = True
            raise OvnTimeoutError(
                f"OVN NB transaction timed out after {self.timeout}s"
                f"{'' if idl_connected(self.api.idl) else ' (not connected)'}; it may or may not "
                "have been applied"
            ) from None
        if isinstance(result, idlutils.ExceptionResult):
            raise result.ex
        return result

    def do_commit(self) -> Any:
        if self.abandoned or time.monotonic() >= self.deadline:
            raise OvnTimeoutError("OVN NB transaction expired before it could start")
        self._wait_connected()
        try:
            return super().do_commit()
        except ovsdbapp_exc.TimeoutException:
            raise OvnTimeoutError(
                f"OVN NB transaction timed out after {self.timeout}s waiting for the server"
                f"{'' if idl_connected(self.api.idl) else ' (not connected)'}"
            ) from None

    def pre_commit(self, txn: Any) -> None:
        # NOTE: python-ovs's commit_block() has no bound: a transaction the server read and never
        # answered stays INCOMPLETE until the session reconnects (its disconnect alone does not
        # end it), and ovsdbapp calls commit_block() with the connection lock held. This hook
        # is where ovsdbapp hands over each python-ovs transaction before its commit.
        txn.commit_block = lambda: commit_within(txn, self.deadline)

    def _wait_connected(self) -> None:
        # NOTE: after a disconnect python-ovs keeps state MONITORING until it reconnects, and a
        # verb with nothing to change would "succeed" against the stale cache: refuse that.
        idl = self.api.idl
        while not idl_connected(idl):
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise OvnTimeoutError(
                    f"OVN NB transaction timed out after {self.timeout}s (not connected)"
                )
            idl.run()
            if idl_connected(idl):
                return
            p = ovs_poller.Poller()
            idl.wait(p)
            p.timer_wait(max(int(remaining * 1000), 1))
            p.block()

    def timeout_exceeded(self) -> bool:
        return bool(time.monotonic() >= self.deadline)

    def time_remaining(self) -> float:
        # NOTE: ovsdbapp treats a timeout <= 0 as "wait forever"; never hand it one.
        return float(max(self.deadline - time.monotonic(), 0.001))


class NbApi(nb_impl_idl.OvnNbApiIdlImpl):  # type: ignore[misc]
    def create_transaction(
        self, check_error: bool = False, log_errors: bool = True, **kwargs: Any
    ) -> DeadlineTransaction:
        return DeadlineTransaction(
            self, self.ovsdb_connection, self.ovsdb_connection.timeout, True, False
        )


def commit_within(txn: Any, deadline: float) -> int:
    """Commit python-ovs transaction `txn` and wait for its final status until `deadline`
    (monotonic); past it the transaction is aborted and `OvnTimeoutError` raised."""
    while True:
        status: int = txn.commit()
        if status != txn.INCOMPLETE:
            return status
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            txn.abort()
            raise OvnTimeoutError(
                "OVN NB server did not answer the transaction before its deadline"
                f"{'' if idl_connected(txn.idl) else ' (not connected)'}; it may or may not "
                "have been applied"
            )
        txn.idl.run()
        poller = ovs_poller.Poller()
        txn.idl.wait(poller)
        txn.wait(poller)
        poller.timer_wait(max(int(remaining * 1000), 1))
        poller.block()


def release_sync_garbage() -> None:
    """Hand the initial dump's parse buffers back to the OS (glibc keeps freed arenas)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return


def idl_connected(idl: Any) -> bool:
    return bool(idl.state == idl.IDL_S_MONITORING and idl._session.is_connected())
