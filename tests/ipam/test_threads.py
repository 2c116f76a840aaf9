"""Many threads hammering one subnet: no address is ever held by two keys."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from controller.ipam import IPAM, AddressConflictError, IPAMError

THREADS = 8
JOIN_TIMEOUT = 60.0


@pytest.fixture(autouse=True)
def frequent_switches() -> Iterator[None]:
    # Switch threads every few microseconds so calls really interleave.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_threads(target: Callable[[int], None]) -> None:
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            target(index)
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT)
        assert not thread.is_alive(), "worker thread did not finish"
    assert errors == []


def test_concurrent_random_allocation_churn_never_duplicates() -> None:
    im = IPAM(rng=random.Random(3))
    # 62 v4 hosts (minus 2 excluded) for 8 x 10 keys: allocation fails at times, which is fine.
    im.add_or_update_subnet("s", "10.0.0.0/26,fd00::/122", ["10.0.0.1", "fd00::1..fd00::2"])
    held: dict[str, tuple[str, str]] = {}
    held_lock = threading.Lock()

    def worker(index: int) -> None:
        rng = random.Random(index)
        pods = [f"ns/t{index}-{i}" for i in range(10)]
        for _ in range(300):
            pod = rng.choice(pods)
            if rng.random() < 0.6:
                try:
                    v4, v6, _ = im.get_random_address(pod, "s")
                except IPAMError:
                    continue
                with held_lock:
                    held[pod] = (v4, v6)
            else:
                with held_lock:
                    held.pop(pod, None)
                im.release_address_by_pod(pod)

    run_threads(worker)
    assert im.verify() == []
    v4s = [v4 for v4, _ in held.values()]
    v6s = [v6 for _, v6 in held.values()]
    assert len(set(v4s)) == len(v4s) and len(set(v6s)) == len(v6s)
    assert {(a.ip) for pod in held for a in im.get_pod_address(pod)} == set(v4s) | set(v6s)
    usage = im.subnet_usage("s")
    assert usage.v4_used == usage.v6_used == len(held)
    assert usage.v4_available == 62 - 1 - len(held)


def test_concurrent_static_requests_for_one_address_have_one_winner() -> None:
    im = IPAM(rng=random.Random(4))
    im.add_or_update_subnet("s", "10.0.0.0/24", None)
    winners: dict[str, list[str]] = {f"10.0.0.{i}": [] for i in range(1, 101)}
    lock = threading.Lock()

    def worker(index: int) -> None:
        order = list(winners)
        random.Random(index).shuffle(order)
        for ip in order:
            pod = f"ns/t{index}-{ip}"
            try:
                im.get_static_address(pod, ip, "", "s")
            except AddressConflictError:
                continue
            with lock:
                winners[ip].append(pod)

    run_threads(worker)
    assert all(len(pods) == 1 for pods in winners.values())
    assert im.subnet_usage("s").v4_used == 100
    assert im.verify() == []
