"""The pod controller's memory between work items: pending deletes and unfinished adds.

* The delete queue holds keys; the object to clean up is the key's `DeletingPod`, filled by the
  informer callbacks (or by a handler that found its pod gone) and removed only once a cleanup
  of that very object succeeded, so a newer event for the key is never lost.
* An add that fails keeps what it allocated for its retry (the same address comes back) and
  remembers it here, so the retry can undo an allocation the pod no longer asks for and a key
  never holds two subnets for one network. The delete handler forgets it with the rest.

Both maps are shared by the add, update and delete handlers, under one lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from controller.core.model import PodNet
from controller.kube.api import KubeObject
from controller.queues import Clock, RateLimitingQueue


@dataclass(frozen=True, slots=True)
class DeletingPod:
    """The last seen object of a pod whose delete is pending, and when it may run."""

    obj: KubeObject
    not_before: float | None = None  # on the controller's clock; None: at once


class PendingDeletes:
    """The deleting map (key -> `DeletingPod`) and the unfinished adds (key -> allocations)."""

    def __init__(self, queue: RateLimitingQueue[str], clock: Clock) -> None:
        self._queue = queue
        self._clock = clock
        self._lock = threading.Lock()
        self._deleting: dict[str, DeletingPod] = {}
        self._unfinished: dict[str, list[tuple[PodNet, str]]] = {}

    def enqueue(self, key: str, obj: KubeObject, delay: float = 0.0) -> None:
        """Remember `obj` as the pod to clean up and queue its key (after `delay` seconds)."""
        not_before = self._clock.now() + delay if delay > 0 else None
        with self._lock:
            previous = self._deleting.get(key)
            # Keep the earlier deadline, as the delaying queue does.
            if (
                previous is not None
                and not_before is not None
                and (previous.not_before is None or previous.not_before < not_before)
            ):
                not_before = previous.not_before
            self._deleting[key] = DeletingPod(obj, not_before)
        if delay > 0:
            self._queue.add_after(key, delay)
        else:
            self._queue.add(key)

    def enqueue_vanished(self, key: str, raw: KubeObject) -> None:
        """A handler found its pod gone: clean up, unless the informer already asked to.

        NOTE: kube-ovn `deletePodQueue.AddRateLimited(pod)`. The informer's own delete event
        carries the final object (with its deletionTimestamp, which the StatefulSet keep-IP rule
        reads), so it is never overwritten by the handler's older copy; the rate-limited add gives
        that event time to arrive.
        """
        with self._lock:
            self._deleting.setdefault(key, DeletingPod(raw))
        self._queue.add_rate_limited(key)

    def get(self, key: str) -> DeletingPod | None:
        with self._lock:
            return self._deleting.get(key)

    def done(self, key: str, entry: DeletingPod) -> None:
        """The cleanup of `entry` ran: forget it, but only it (a newer event stays for its own
        run)."""
        with self._lock:
            if self._deleting.get(key) is entry:
                del self._deleting[key]

    def snapshot(self) -> dict[str, KubeObject]:
        """The deleting-pod map (a copy), for tests and debugging."""
        with self._lock:
            return {k: v.obj for k, v in self._deleting.items()}

    def take_unfinished(self, key: str) -> list[tuple[PodNet, str]]:
        """What earlier failed adds of `key` allocated and kept for their retry (now the
        caller's)."""
        with self._lock:
            return self._unfinished.pop(key, [])

    def keep_unfinished(self, key: str, held: list[tuple[PodNet, str]]) -> None:
        """A failed add keeps `held` for its retry."""
        with self._lock:
            self._unfinished[key] = [*self._unfinished.get(key, []), *held]

    def forget_unfinished(self, key: str) -> None:
        """The key's addresses were released with the rest of its network."""
        with self._lock:
            self._unfinished.pop(key, None)
