"""SharedInformerFactory: one shared informer per resource over one `ApiClient` (client-go).

`informer_for(group, version, plural)` returns the same `SharedIndexInformer` every time it is
asked for the same resource, so every controller that watches pods shares one list/watch and one
cache. `start(stop)` runs every informer created so far (and is safe to call again after creating
more); `wait_for_cache_sync` reports per resource whether its cache synced; `shutdown` stops them.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

from controller.cache.cache_sync import wait_for_cache_sync
from controller.cache.listwatch import ListWatch
from controller.cache.shared_informer import SharedIndexInformer
from controller.cache.store import Indexers
from controller.queues.clock import REAL_CLOCK, Clock

LOG = logging.getLogger(__name__)

ResourceId = tuple[str, str, str]


class SharedInformerFactory:
    def __init__(
        self,
        api_client: Any,
        resync: float = 0.0,
        *,
        namespace: str | None = None,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self._api_client = api_client
        self._resync = resync
        self._namespace = namespace
        self._clock = clock
        self._rng = rng
        self._lock = threading.Lock()
        self._informers: dict[ResourceId, SharedIndexInformer] = {}
        self._threads: dict[ResourceId, threading.Thread] = {}
        self._stop: threading.Event | None = None

    def informer_for(
        self,
        group: str,
        version: str,
        plural: str,
        *,
        namespaced: bool = True,
        indexers: Indexers | None = None,
        label_selector: str | None = None,
    ) -> SharedIndexInformer:
        """The shared informer of a resource (`group=""` for the core API group)."""
        rid = (group, version, plural)
        with self._lock:
            informer = self._informers.get(rid)
            if informer is None:
                lw = ListWatch(
                    self._api_client,
                    group=group,
                    version=version,
                    plural=plural,
                    namespace=self._namespace if namespaced else None,
                    label_selector=label_selector,
                )
                informer = SharedIndexInformer(
                    lw,
                    resync_period=self._resync,
                    indexers=indexers,
                    name=f"{plural}.{group or 'core'}",
                    clock=self._clock,
                    rng=random.Random(self._rng.random()) if self._rng else None,
                )
                self._informers[rid] = informer
            return informer

    def start(self, stop: threading.Event) -> None:
        with self._lock:
            self._stop = stop
            for rid, informer in self._informers.items():
                if rid not in self._threads:
                    self._threads[rid] = informer.start(stop)

    def wait_for_cache_sync(
        self, stop: threading.Event | None = None, timeout: float | None = None
    ) -> dict[ResourceId, bool]:
        with self._lock:
            started = {rid: self._informers[rid] for rid in self._threads}
        return {
            rid: wait_for_cache_sync(inf, stop=stop, timeout=timeout)
            for rid, inf in started.items()
        }

    def shutdown(self, timeout: float | None = 10.0) -> None:
        with self._lock:
            if self._stop is not None:
                self._stop.set()
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout)
