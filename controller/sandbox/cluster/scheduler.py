"""A scheduler stand-in for the API server emulator: binds every pod that has no node to one of
the given nodes, so a pod made with `kubectl run` (or any client) reaches the sandbox kubelet.

The emulator has no kube-scheduler (the real control plane of `--control-plane real` has one).
This one is as simple as a scheduler can be and still spread pods: it skips terminating pods and
pods that name a `schedulerName` other than `default-scheduler`, checks no resources, taints or
affinity, and assigns nodes round-robin in the order it sees the pods. It works on the
emulator's `ObjectStore` directly (in the same process), woken by a watch on pods.

`PodScheduler(store, nodes).start()`; `stop()` returns once its thread has exited.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence

from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.selectors import build_selector
from controller.sandbox.apiserver.store import ObjectStore
from controller.sandbox.apiserver.watch import Watcher

LOG = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
_WAKE = 0.5  # seconds a watch wait lasts, so stop() is seen promptly


class PodScheduler:
    def __init__(self, store: ObjectStore, nodes: Sequence[str]) -> None:
        if not nodes:
            raise ValueError("a scheduler needs at least one node")
        self._store = store
        self._next = itertools.cycle(list(nodes))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bound: list[tuple[str, str, str]] = []  # (namespace, name, node), in order

    def start(self) -> PodScheduler:
        watcher = self._store.watch("pods", build_selector(None, None, None, ()), None)
        self._thread = threading.Thread(
            target=self._loop, args=(watcher,), name="sandbox-scheduler", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self, watcher: Watcher) -> None:
        try:
            while not self._stop.is_set():
                self.schedule_pending()
                watcher.next(_WAKE)
        finally:
            watcher.close()

    def schedule_pending(self) -> int:
        """Bind every pod that is waiting for a node; returns how many were bound."""
        bound = 0
        for pod in self._store.list("pods"):
            meta = pod.get("metadata") or {}
            spec = pod.get("spec") or {}
            if meta.get("deletionTimestamp") or spec.get("nodeName"):
                continue
            if spec.get("schedulerName", DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
                continue
            node = next(self._next)
            namespace, name = meta.get("namespace", ""), meta.get("name", "")
            try:
                self._store.patch(
                    "pods",
                    namespace,
                    name,
                    {"metadata": {"uid": meta.get("uid")}, "spec": {"nodeName": node}},
                )
            except ApiError as exc:  # deleted or changed meanwhile: the next wake sees it
                LOG.info("sandbox scheduler: %s/%s not bound: %s", namespace, name, exc)
                continue
            self.bound.append((namespace, name, node))
            bound += 1
        return bound
