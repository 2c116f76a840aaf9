"""Waiting for informer caches to sync (client-go `WaitForCacheSync`, `WaitForNamedCacheSync`).

A target is an informer, a handler registration, or any `() -> bool`; the wait polls every
100 ms until all report synced, `stop` is set or the timeout passes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from controller.cache.processor_listener import ResourceEventHandlerRegistration
from controller.cache.shared_informer import SharedIndexInformer

LOG = logging.getLogger(__name__)

Syncable = SharedIndexInformer | ResourceEventHandlerRegistration | Callable[[], bool]


def wait_for_cache_sync(
    *targets: Syncable,
    stop: threading.Event | None = None,
    timeout: float | None = None,
    poll_interval: float = 0.1,
) -> bool:
    """True once every informer / registration / predicate reports synced; False if `stop` is
    set or `timeout` seconds pass first (client-go WaitForCacheSync, checked every 100 ms)."""
    checks = [
        t.has_synced if isinstance(t, SharedIndexInformer | ResourceEventHandlerRegistration) else t
        for t in targets
    ]
    stop = stop or threading.Event()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if all(check() for check in checks):
            return True
        if stop.is_set():
            return False
        wait = poll_interval
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            wait = min(wait, remaining)
        if stop.wait(wait):
            return all(check() for check in checks)


def named_wait_for_cache_sync(
    controller_name: str,
    targets: Iterable[Syncable],
    stop: threading.Event | None = None,
    timeout: float | None = None,
) -> bool:
    """`wait_for_cache_sync` with client-go's WaitForNamedCacheSync log lines."""
    LOG.info("Waiting for caches to sync for %s", controller_name)
    ok = wait_for_cache_sync(*targets, stop=stop, timeout=timeout)
    if ok:
        LOG.info("Caches are synced for %s", controller_name)
    else:
        LOG.error("Unable to sync caches for %s", controller_name)
    return ok
