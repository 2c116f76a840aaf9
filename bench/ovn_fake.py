"""FakeNbClient cost per verb as the NB state grows: undo log vs a deep copy per verb.

Usage: python bench/ovn_fake.py [--quick] [--ports N]

For N and 4N ports on one switch: create them one verb at a time, list each pod's ports, then
delete them, and print microseconds per verb. The baseline, measured in the same run, is the same
fake with the all-or-nothing transaction it had before (a deep copy of the whole NB state per
verb): its time per verb grows with N, the undo log's should stay flat (ratio 4N/N near 1).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import harness  # noqa: F401 - puts the repository root on sys.path

from controller.ovn.api import PortSpec
from controller.testing import fake_nb as fake
from controller.testing.fake_nb_rows import NbState, Undo

T = TypeVar("T")


class DeepCopyNbClient(fake.FakeNbClient):
    """The baseline: every verb works on a deep copy of the state and swaps it in."""

    def _txn(self, method: str, fn: Callable[[NbState, Undo], T]) -> T:
        with self._lock:
            self.requests[method] += 1
            work = copy.deepcopy(self.state)
            result = fn(work, Undo())
            self.state = work
            return result


def spec(i: int) -> PortSpec:
    return PortSpec(
        f"p{i}.bench",
        "ls",
        f"00:00:00:{(i >> 16) & 255:02x}:{(i >> 8) & 255:02x}:{i & 255:02x}",
        (f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",),
        pod_name=f"p{i}",
        pod_namespace="bench",
    )


def cycle(nb: fake.FakeNbClient, n: int) -> float:
    """Microseconds per verb for n creates, n list_pod_ports and n deletes."""
    nb.ensure_logical_switch("ls", "", "10.0.0.0/8", "10.0.0.1", {})
    specs = [spec(i) for i in range(1, n + 1)]
    start = time.perf_counter()
    for s in specs:
        nb.create_port(s)
    for s in specs:
        nb.list_pod_ports(s.pod_name, s.pod_namespace)
    for s in specs:
        nb.delete_port(s.name)
    elapsed = time.perf_counter() - start
    if nb.list_ports():
        raise AssertionError("ports left behind")
    return elapsed / (3 * n) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--ports", type=int, default=None, help="N (the larger run is 4N)")
    args = parser.parse_args(argv)
    n = args.ports or (100 if args.quick else 500)
    if n <= 0:
        parser.error("--ports must be positive")
    print(f"{'client':<22}{'N':>7}{'us/verb':>10}{'4N':>7}{'us/verb':>10}{'4N/N':>7}")
    for name, make in (("deep copy (baseline)", DeepCopyNbClient), ("undo log", fake.FakeNbClient)):
        small, large = cycle(make(), n), cycle(make(), 4 * n)
        print(f"{name:<22}{n:>7}{small:>10.1f}{4 * n:>7}{large:>10.1f}{large / small:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
