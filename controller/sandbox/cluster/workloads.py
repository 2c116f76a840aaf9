"""A StatefulSet controller stand-in for the API server emulator, so `kubectl scale statefulset`
works in the demo: the emulator has no kube-controller-manager.

For every StatefulSet it keeps pods `<name>-0 .. <name>-<replicas-1>` (from the template: its
labels plus `statefulset.kubernetes.io/pod-name`, hostname and subdomain, an ownerReference to
the set), creating the missing ones lowest ordinal first and deleting the ones past `replicas`
highest first, as kube-controller-manager's OrderedReady policy does without waiting for each;
it writes `status.replicas`, `readyReplicas` and `availableReplicas` from the pods' Ready
condition. It works on the emulator's `ObjectStore` directly, woken by watches on stateful sets
and pods.

`StatefulSetController(store).start()`; `stop()` returns once its thread has exited.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

from controller.sandbox.apiserver.resources import ApiError, JsonDict
from controller.sandbox.apiserver.selectors import build_selector
from controller.sandbox.apiserver.store import ObjectStore
from controller.sandbox.apiserver.watch import Watcher

LOG = logging.getLogger(__name__)

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
_WAKE = 0.25  # seconds a watch wait lasts, so stop() is seen promptly


def _ready(pod: JsonDict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_for(sts: JsonDict, ordinal: int) -> JsonDict:
    """The pod a StatefulSet has at `ordinal`, from its template."""
    meta = sts["metadata"]
    template = copy.deepcopy((sts.get("spec") or {}).get("template") or {})
    name = f"{meta['name']}-{ordinal}"
    pod_meta: dict[str, Any] = template.get("metadata") or {}
    labels = {**(pod_meta.get("labels") or {}), POD_NAME_LABEL: name}
    spec = template.get("spec") or {}
    spec.setdefault("hostname", name)
    spec.setdefault("subdomain", (sts.get("spec") or {}).get("serviceName", meta["name"]))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **{k: v for k, v in pod_meta.items() if k in ("annotations",)},
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


class StatefulSetController:
    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StatefulSetController:
        everything = build_selector(None, None, None, ())
        watchers = [
            self._store.watch("statefulsets", everything, None),
            self._store.watch("pods", everything, None),
        ]
        self._thread = threading.Thread(
            target=self._loop, args=(watchers,), name="sandbox-statefulsets", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self, watchers: list[Watcher]) -> None:
        sets, pods = watchers
        try:
            while not self._stop.is_set():
                self.sync_all()
                # Either stream wakes the loop; the other is drained on the next pass.
                if not sets.next(0).events:
                    pods.next(_WAKE)
        finally:
            for w in watchers:
                w.close()

    def sync_all(self) -> None:
        for sts in self._store.list("statefulsets"):
            try:
                self.sync(sts)
            except ApiError as exc:  # changed or deleted meanwhile: the next wake sees it
                LOG.info(
                    "sandbox statefulsets: %s/%s: %s",
                    sts["metadata"].get("namespace"),
                    sts["metadata"].get("name"),
                    exc,
                )

    def sync(self, sts: JsonDict) -> None:
        meta = sts["metadata"]
        if meta.get("deletionTimestamp"):
            return
        namespace, name = meta["namespace"], meta["name"]
        replicas = int((sts.get("spec") or {}).get("replicas", 1))
        owned: dict[int, JsonDict] = {}
        for pod in self._store.list("pods", namespace):
            refs = (pod.get("metadata") or {}).get("ownerReferences") or []
            if not any(r.get("uid") == meta["uid"] for r in refs):
                continue
            ordinal = pod["metadata"]["name"].rsplit("-", 1)[-1]
            if ordinal.isdigit():
                owned[int(ordinal)] = pod
        for ordinal in range(replicas):
            if ordinal not in owned:
                self._store.create("pods", pod_for(sts, ordinal))
        for ordinal in sorted((o for o in owned if o >= replicas), reverse=True):
            if not owned[ordinal]["metadata"].get("deletionTimestamp"):
                self._store.delete("pods", namespace, owned[ordinal]["metadata"]["name"])
        live = [p for o, p in owned.items() if o < replicas]
        ready = sum(1 for p in live if _ready(p))
        status = {
            "replicas": len(live),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": len(live),
            "observedGeneration": meta.get("generation", 1),
        }
        current = sts.get("status") or {}
        if any(current.get(k) != v for k, v in status.items()):
            self._store.patch(
                "statefulsets", namespace, name, {"status": status}, subresource="status"
            )
