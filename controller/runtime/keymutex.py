"""Striped per-key mutex (mirror of k8s.io/utils/keymutex `NewHashed`).

`KeyMutex(n)` owns `n` plain locks; a key uses lock `fnv1a_32(key) % n`. Guarantees and limits,
all as in Go:

* Two threads holding the same key never run concurrently.
* Different keys may share a lock (false sharing): never hold two keys at once, a collision
  would deadlock.
* Not reentrant, and not owned: any thread may unlock; unlocking a key that is not locked raises
  `RuntimeError` (Go aborts the process).

The hash is FNV-1a 32-bit over the key's UTF-8 bytes, not Python's `hash()`: `hash(str)` is
randomised per process, while FNV-1a gives every process (and the Go original) the same key to
stripe mapping, which makes contention reproducible.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

LOG = logging.getLogger(__name__)

_FNV32_OFFSET = 2166136261
_FNV32_PRIME = 16777619


def fnv1a_32(data: bytes) -> int:
    """FNV-1a, 32 bits (Go hash/fnv New32a)."""
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


class KeyMutex:
    """client-go's hashed KeyMutex: `lock(key)` / `unlock(key)` / `with km.locked(key):`."""

    __slots__ = ("_locks",)

    def __init__(self, n: int | None = None) -> None:
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
            raise TypeError(f"n must be an int or None, not {type(n).__name__}")
        if n is None or n <= 0:
            # Go: NewHashed(n <= 0) uses runtime.NumCPU().
            n = os.cpu_count() or 1
        self._locks = tuple(threading.Lock() for _ in range(n))

    def __len__(self) -> int:
        return len(self._locks)

    def stripe(self, key: str) -> int:
        """Index of the lock `key` maps to (collisions share an index)."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a str, not {type(key).__name__}")
        return fnv1a_32(key.encode("utf-8")) % len(self._locks)

    def _lock_for(self, key: str) -> threading.Lock:
        return self._locks[self.stripe(key)]

    def lock(self, key: str) -> None:
        self._lock_for(key).acquire()

    def unlock(self, key: str) -> None:
        self._lock_for(key).release()

    @contextmanager
    def locked(self, key: str) -> Iterator[None]:
        lock = self._lock_for(key)
        lock.acquire()
        try:
            yield
        finally:
            lock.release()
