"""KeyMutex: k8s.io/utils keymutex NewHashed semantics (k8s.io/utils/keymutex hashed.go)."""

from __future__ import annotations

import os
import threading

import pytest

from controller.runtime.keymutex import KeyMutex, fnv1a_32


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968)],
)
def test_fnv1a_32_reference_vectors(data: bytes, expected: int) -> None:
    assert fnv1a_32(data) == expected


def test_stripe_is_fnv1a_modulo_n_and_stable() -> None:
    km = KeyMutex(7)
    assert len(km) == 7
    assert km.stripe("default/nginx") == fnv1a_32(b"default/nginx") % 7
    assert km.stripe("ns/p\u00f6d") == fnv1a_32("ns/p\u00f6d".encode()) % 7  # UTF-8 bytes


def test_non_positive_or_missing_n_uses_cpu_count() -> None:
    cpus = os.cpu_count() or 1
    assert len(KeyMutex()) == len(KeyMutex(0)) == len(KeyMutex(-3)) == cpus


def test_same_key_is_mutually_exclusive() -> None:
    km = KeyMutex(4)
    total = [0]
    inside = [0]
    overlaps = []

    def work() -> None:
        for _ in range(2000):
            with km.locked("ns/pod"):
                inside[0] += 1
                if inside[0] != 1:
                    overlaps.append(inside[0])
                value = total[0]
                total[0] = value + 1
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert overlaps == []
    assert total[0] == 8000


def test_keys_on_different_stripes_are_independent() -> None:
    km = KeyMutex(16)
    first = "ns/a"
    second = next(f"ns/{i}" for i in range(1000) if km.stripe(f"ns/{i}") != km.stripe(first))
    km.lock(first)
    km.lock(second)  # would deadlock if they shared a lock
    km.unlock(second)
    km.unlock(first)


def test_colliding_keys_share_a_lock_that_any_thread_may_release() -> None:
    km = KeyMutex(2)
    first = "ns/a"
    twin = next(f"ns/{i}" for i in range(1000) if km.stripe(f"ns/{i}") == km.stripe(first))
    km.lock(first)
    released = threading.Thread(target=km.unlock, args=(twin,))  # not owned, shared stripe
    released.start()
    released.join(5)
    km.lock(first)  # free again
    km.unlock(first)


def test_unlock_of_an_unlocked_key_raises() -> None:
    km = KeyMutex(2)
    with pytest.raises(RuntimeError):
        km.unlock("ns/a")


def test_locked_releases_on_exception() -> None:
    km = KeyMutex(1)
    with pytest.raises(ValueError, match="boom"), km.locked("ns/a"):
        raise ValueError("boom")
    with km.locked("ns/b"):  # single stripe: proves the lock was released
        pass


def test_bad_input_is_a_clear_error() -> None:
    # wrong types on purpose (hence the ignores)
    with pytest.raises(TypeError):
        KeyMutex("4")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        KeyMutex(2).lock(42)  # type: ignore[arg-type]
