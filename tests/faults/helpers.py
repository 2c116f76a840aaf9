"""Shared helpers of the fault-injection suite: a concurrent burst of pod creates and deletes
with a fault fired in its middle, and the verdict (the consistency audit until settled).

`run_burst(store, fault=..., after=...)` creates, deletes and re-creates pods from a few threads
straight in the emulator's store (so injected API faults only hit the controller); the threads
pause at their middle while `fault()` runs, then finish on the faulty cluster; `after()` runs
once they are all done. It returns what should be alive.
`wait_settled(auditor)` polls `controller.audit.audit` over fresh reads of the API and the NB
database (`Auditor`) until the report is `settled` twice in a row, and fails with the rendered
report.
`assert_burst_converged` / `assert_ipam_released` add what the audit cannot see: every pod the
burst left alive is allocated, and an in-process controller's IPAM holds exactly those.
`nb_failures(registry)` counts an in-process controller's failed NB verbs (to end an outage once
handlers have felt it).
`wait_lease_renewed(store, identity)` waits for `identity` to renew the controller's Lease again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from controller.apiclient.errors import KubeApiError
from controller.audit.audit import AuditReport, audit
from controller.audit.check import collect_snapshot
from controller.config import parse_args
from controller.kube.client import KubeClient, load_api_client
from controller.ovn.api import OvnError
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.testing import wait as waiting
from tests.e2e.conftest import Cluster
from tests.e2e.helpers import NODE, Store, allocated_pods, pod, wait_for

NS = "default"
SETTLE_TIMEOUT = 30.0


@dataclass
class Burst:
    """What a burst did: the pods it left alive and the ones it deleted."""

    alive: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    fault_at: int = 0  # operations done when the fault fired
    operations: int = 0


def run_burst(
    store: Store,
    *,
    fault: Callable[[], None] | None = None,
    after: Callable[[], None] | None = None,
    prefix: str = "b",
    threads: int = 2,
    creates: int = 30,
    timeout: float = 30.0,
) -> Burst:
    """`threads` threads each create `creates` pods, delete every third one they made a moment
    ago (its add likely in flight) and re-create every other deleted name at once (a new pod
    under an old name); even pods are scheduled, so they get routed.

    Every thread stops once it has done half of its creates; `fault()` then runs on the calling
    thread (while the controller still works through the first half), the threads go on as soon
    as it returns (so the second half lands on the faulty cluster: an outage, a dead controller),
    and `after()` (e.g. the end of the outage) runs once every operation is done."""
    middle = threading.Barrier(threads + 1)
    resume = threading.Event()
    lock = threading.Lock()
    burst = Burst()
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            made: list[str] = []
            for j in range(creates):
                if j == creates // 2:
                    middle.wait(timeout)
                    if not resume.wait(timeout):
                        return
                name = f"{prefix}{t}-{j}"
                store.create("pods", pod(name, NS, node_name=NODE if j % 2 == 0 else ""))
                made.append(name)
                with lock:
                    burst.alive.add(name)
                    burst.operations += 1
                if j % 3 == 2:
                    victim = made[j - 1]
                    store.delete("pods", NS, victim)
                    with lock:
                        burst.alive.discard(victim)
                        burst.deleted.add(victim)
                        burst.operations += 1
                if j % 6 == 5:
                    # the same name again, a new pod (uid): the old one's cleanup must spare it
                    again = made[j - 1]
                    store.create("pods", pod(again, NS))
                    with lock:
                        burst.deleted.discard(again)
                        burst.alive.add(again)
                        burst.operations += 1
        except BaseException as exc:  # reported by the caller, never swallowed
            errors.append(exc)
            middle.abort()

    workers = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    try:
        middle.wait(timeout)
        if fault is not None:
            burst.fault_at = burst.operations
            fault()
    except threading.BrokenBarrierError:
        pass  # a burst thread failed: its error is raised below
    finally:
        resume.set()
    deadline = time.monotonic() + timeout
    for w in workers:
        w.join(max(deadline - time.monotonic(), 0.0))
        assert not w.is_alive(), "a burst thread did not finish"
    if errors:
        raise errors[0]
    if after is not None:
        after()
    return burst


class Auditor:
    """The read side of the verdict: its own API client and NB connection to `nb_remote`."""

    def __init__(self, cluster: Cluster, nb_remote: str | None = None) -> None:
        self._argv = cluster.argv()
        if nb_remote is not None:
            self._argv.append(f"--ovn-nb-addr={nb_remote}")
        self.config = parse_args(["check", *self._argv], {"KUBE_NAMESPACE": "kube-system"})
        self._api_client = load_api_client(str(cluster.kubeconfig), worker_threads=1)
        self._kube = KubeClient(self._api_client)
        self._nb = OvsdbappNbClient.from_addr(self.config.ovn_nb_addr, timeout=10.0)

    def report(self) -> AuditReport | str:
        """One audit; the read error (a string) when the API or NB cannot be read right now."""
        try:
            snapshot = collect_snapshot(
                self._kube, self._nb, cluster_router=self.config.cluster_router
            )
        except (KubeApiError, OvnError) as exc:
            return f"cannot read the cluster: {exc}"
        return audit(snapshot, self.config)

    def close(self) -> None:
        self._nb.close()
        self._api_client.close()


def wait_settled(
    auditor: Auditor, burst: Burst | None = None, timeout: float = SETTLE_TIMEOUT
) -> AuditReport:
    """Poll the audit until it is `settled` twice in a row (0.3 s apart): the verdict.

    Fails with the last rendered report when the deadline passes. With `burst`, the pods the
    audit saw allocated must also be exactly the burst's alive ones (a pod the controller never
    saw would otherwise pass as "nothing to check")."""
    last: AuditReport | str = "no audit ran"
    streak = 0

    def settled_twice() -> AuditReport | None:
        nonlocal last, streak
        last = auditor.report()
        streak = streak + 1 if isinstance(last, AuditReport) and last.settled else 0
        return last if streak >= 2 and isinstance(last, AuditReport) else None

    try:
        return waiting.wait_for(settled_twice, timeout, "the audit settled", interval=0.3)
    except waiting.WaitTimeout:
        rendered = last if isinstance(last, str) else last.render()
        raise AssertionError(f"not settled after {timeout}s:\n{rendered}") from None


def assert_burst_converged(store: Store, burst: Burst) -> None:
    """Every pod the burst left alive is allocated, with an address of its own."""
    ips = allocated_pods(store)
    missing = burst.alive - set(ips)
    assert not missing, f"alive pods never allocated: {sorted(missing)}"
    owners: dict[str, list[str]] = {}
    for name, ip in ips.items():
        owners.setdefault(ip, []).append(name)
    twice = {ip: names for ip, names in owners.items() if len(names) > 1}
    assert not twice, f"addresses annotated twice: {twice}"


def assert_ipam_released(ipam_of: Callable[[str], Sequence[object]], burst: Burst) -> None:
    """In-memory IPAM (of an in-process controller) holds every alive pod and no deleted one."""
    leaked = sorted(n for n in burst.deleted if ipam_of(f"{NS}/{n}"))
    assert not leaked, f"IPAM still holds deleted pods: {leaked}"
    lost = sorted(n for n in burst.alive if not ipam_of(f"{NS}/{n}"))
    assert not lost, f"IPAM lost alive pods: {lost}"


def nb_failures(registry: CollectorRegistry) -> float:
    """How many NB verbs of an in-process controller failed (its latency histogram, code 1)."""
    total = 0.0
    for family in registry.collect():
        for sample in family.samples:
            if (
                sample.name == "ovs_client_request_latency_milliseconds_count"
                and sample.labels.get("code") == "1"
            ):
                total += sample.value
    return total


LEASE = ("kube-system", "kube-ovn-controller")


def wait_lease_renewed(store: Store, identity: str, timeout: float = 20.0) -> None:
    """Wait until `identity`, holding the controller's Lease, writes it again (a renewal after
    whatever happened before the call)."""
    before = store.get("leases", *LEASE)["metadata"]["resourceVersion"]

    def renewed() -> bool:
        lease = store.get("leases", *LEASE)
        holder = (lease.get("spec") or {}).get("holderIdentity")
        return bool(lease["metadata"]["resourceVersion"] != before and holder == identity)

    wait_for(renewed, timeout=timeout, message=f"{identity} renewing its Lease")
