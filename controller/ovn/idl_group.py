"""Group commit for `OvsdbappNbClient`: concurrent callers' verbs in one OVSDB transaction.

Contract:

* `GroupCommitter.run(method, fn, keys, timeout)` behaves like one verb in its own transaction
  (returns `fn`'s result or raises its error, within `timeout`), but verbs submitted by other
  threads while the IDL thread is busy are committed together: each IDL loop iteration takes
  every pending verb and runs them, in submission order, in one transaction with one shared
  `VerbContext` (so later verbs see the rows earlier ones inserted, as they would see them
  committed if run one after the other).
* Results and errors stay per verb. A verb that raises is removed from the batch and gets its
  own error; the transaction is rebuilt from the remaining verbs (the partly applied one is
  never committed). If the server rejects a transaction of several verbs, each is retried in a
  transaction of its own, so only the verb at fault fails.
* `keys` are what a verb reads through the row indexes (which do not see rows inserted in the
  open transaction): a verb whose keys meet those of a verb already in the batch waits for the
  next transaction, so two verbs on the same route, NAT rule or port are never combined.
* A caller that gave up (its timeout passed) is never started; one whose verb was already in a
  transaction when it gave up gets the usual "may or may not have been applied" timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from controller.ovn.api import OvnError, OvnTimeoutError
from controller.ovn.idl_context import VerbContext
from controller.ovn.idl_index import NbIndex
from controller.ovn.idl_txn import DeadlineTransaction, VerbCommand, idl_connected

_PENDING, _RUNNING, _DONE = "pending", "running", "done"


@dataclass(eq=False)
class _Slot:
    method: str
    fn: Callable[[VerbContext], Any]
    keys: frozenset[Hashable]
    deadline: float
    state: str = _PENDING
    result: Any = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.state = result, error, _DONE
        self.done.set()


class _VerbFailed(Exception):
    """Raised out of the batch command to abort the transaction after one verb failed."""

    def __init__(self, slot: _Slot, error: BaseException) -> None:
        super().__init__(str(error))
        self.slot = slot
        self.error = error


class _BatchCommand(VerbCommand):
    """Runs the batch's verbs, in order, in one VerbContext (re-run on TRY_AGAIN)."""

    def __init__(self, api: Any, index: NbIndex, slots: list[_Slot]) -> None:
        super().__init__(api, index, "batch", lambda ctx: None)
        self.slots = slots

    def run_idl(self, txn: Any) -> None:
        ctx = VerbContext(self.index, txn)
        results = []
        for slot in self.slots:
            try:
                results.append(slot.fn(ctx))
            except Exception as exc:
                raise _VerbFailed(slot, exc) from exc
        self.result = results


class GroupCommitter:
    """Coalesces concurrent verbs into one transaction per IDL loop iteration."""

    def __init__(self, api: Any, index: NbIndex, conn: Any) -> None:
        self._api = api
        self._index = index
        self._conn = conn
        self._lock = threading.Lock()
        self._pending: list[_Slot] = []
        self._scheduled = False  # a batch transaction is queued and has not taken its verbs yet
        self.transactions = 0  # committed batch transactions (for tests and benches)

    def run(
        self,
        method: str,
        fn: Callable[[VerbContext], Any],
        keys: frozenset[Hashable],
        timeout: float,
    ) -> Any:
        slot = _Slot(method, fn, keys, time.monotonic() + timeout)
        with self._lock:
            self._pending.append(slot)
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._schedule(timeout)
        if not slot.done.wait(max(slot.deadline - time.monotonic(), 0.0)):
            where = "" if idl_connected(self._api.idl) else " (not connected)"
            with self._lock:
                if slot.state == _PENDING:
                    self._pending.remove(slot)
                    raise OvnTimeoutError(
                        f"OVN NB busy: transaction not started within {timeout}s{where}"
                    )
            if not slot.done.wait(0.0):
                raise OvnTimeoutError(
                    f"OVN NB transaction timed out after {timeout}s{where}; it may or may not "
                    "have been applied"
                )
        if slot.error is not None:
            raise slot.error
        return slot.result

    def fail_all(self, error: OvnError) -> None:
        """Fail every verb not yet taken by a transaction (the client is closing)."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._scheduled = False
        for slot in pending:
            slot.finish(error=error)

    def _schedule(self, timeout: float) -> None:
        txn = _BatchTransaction(self, self._api, self._conn, timeout)
        try:
            self._conn.txns.put(txn, timeout=timeout)
        except Exception:  # queue.Full: the IDL thread is stuck; fail what waits
            self.fail_all(OvnTimeoutError(f"OVN NB busy: transaction not queued in {timeout}s"))

    def _take(self, among: set[int] | None = None) -> tuple[list[_Slot], set[int]]:
        """In the IDL thread: the pending verbs for one transaction, without conflicting keys,
        and the ids of those left pending for a conflict (`among`: only from these)."""
        now = time.monotonic()
        taken: list[_Slot] = []
        deferred: set[int] = set()
        seen: set[Hashable] = set()
        with self._lock:
            rest: list[_Slot] = []
            for slot in self._pending:
                if among is not None and id(slot) not in among:
                    rest.append(slot)
                elif slot.deadline <= now:
                    rest.append(slot)  # its caller is about to give up: leave it to them
                elif slot.keys & seen:
                    rest.append(slot)
                    deferred.add(id(slot))
                else:
                    seen |= slot.keys
                    slot.state = _RUNNING
                    taken.append(slot)
            self._pending = rest
            if among is None:
                self._scheduled = False  # later callers queue the next batch
        return taken, deferred

    def commit_batch(self, txn: _BatchTransaction) -> None:
        """In the IDL thread: commit this iteration's verbs, isolating failures; verbs that
        conflicted with an earlier one follow in further transactions of the same iteration."""
        slots, deferred = self._take()
        while slots:
            self._commit(txn, slots)
            if not deferred:
                return
            slots, deferred = self._take(deferred)

    def _commit(self, txn: _BatchTransaction, slots: list[_Slot]) -> None:
        while slots:
            try:
                results = txn.commit_slots(slots)
            except _VerbFailed as failed:
                failed.slot.finish(error=failed.error)
                slots = [s for s in slots if s is not failed.slot]
                continue
            except Exception as exc:
                if len(slots) > 1 and not isinstance(exc, OvnTimeoutError):
                    # The server refused the whole transaction: find the verb at fault.
                    for slot in slots:
                        self._commit_alone(txn, slot)
                    return
                for slot in slots:
                    slot.finish(error=exc)
                return
            self.transactions += 1
            for slot, result in zip(slots, results, strict=True):
                slot.finish(result=result)
            return

    def _commit_alone(self, txn: _BatchTransaction, slot: _Slot) -> None:
        try:
            (result,) = txn.commit_slots([slot])
        except _VerbFailed as failed:
            slot.finish(error=failed.error)
        except Exception as exc:
            slot.finish(error=exc)
        else:
            self.transactions += 1
            slot.finish(result=result)


class _BatchTransaction(DeadlineTransaction):
    """The transaction the IDL thread runs for one iteration's batch of verbs."""

    def __init__(self, group: GroupCommitter, api: Any, conn: Any, timeout: float) -> None:
        super().__init__(api, conn, timeout, True, False)
        self._group = group
        self.deadline = time.monotonic() + timeout
        self.abandoned = False

    def do_commit(self) -> Any:
        self._group.commit_batch(self)
        return None

    def commit_slots(self, slots: list[_Slot]) -> list[Any]:
        self.deadline = max(s.deadline for s in slots)
        command = _BatchCommand(self.api, self._group._index, slots)
        self.commands = [command]
        super().do_commit()
        results: list[Any] = command.result
        return results
