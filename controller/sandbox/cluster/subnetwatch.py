"""The node side's view of the Subnets: a list-and-watch that hands every change to a callback.

kube-ovn v1.8.18's CNI daemon watches Subnets and reconciles each node's ovn0 routes on every
Subnet event (pkg/daemon/controller.go `enqueueAddSubnet`/`enqueueUpdateSubnet`/
`enqueueDeleteSubnet` then `reconcileRouters`). `SubnetWatch(custom_api, on_change)` does the
same for the sandbox kubelet: after the first list and after every ADDED/MODIFIED/DELETED event
it calls `on_change(subnets)` with the whole current set. A lost watch relists with a capped
backoff; a missing Subnet CRD (404) is retried the same way, never fatal. `stop()` ends the
thread. Works against the emulator and a real kube-apiserver alike (official client).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

LOG = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeovn.io", "v1", "subnets"
WATCH_SECONDS = 60
BACKOFF = (0.2, 5.0)
STOP_TIMEOUT = 10.0
STOP_POLL = 0.05

OnChange = Callable[[list[Mapping[str, Any]]], None]


class SubnetWatch:
    def __init__(self, custom_api: Any, on_change: OnChange) -> None:
        self._api = custom_api
        self._on_change = on_change
        self._subnets: dict[str, Mapping[str, Any]] = {}
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> SubnetWatch:
        self._thread = threading.Thread(target=self._loop, name="subnet-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        # The thread may be between its stop check and opening the next stream, so one
        # shutdown can miss the stream it then blocks on: keep closing whatever stream is
        # current until the thread has left.
        deadline = time.monotonic() + STOP_TIMEOUT
        while thread.is_alive() and time.monotonic() < deadline:
            self._close_stream()
            thread.join(STOP_POLL)

    def _close_stream(self) -> None:
        watch = self._watch
        if watch is None:
            return
        watch.stop()
        resp = getattr(watch, "_resp", None)
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()

    def _changed(self) -> None:
        try:
            self._on_change(list(self._subnets.values()))
        except Exception:
            LOG.exception("subnet watch: handling a change failed")

    def _loop(self) -> None:
        backoff = BACKOFF[0]
        while not self._stop.is_set():
            try:
                data = self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL)
                self._subnets = {
                    str(item["metadata"]["name"]): item for item in data.get("items") or []
                }
                self._changed()
                backoff = BACKOFF[0]
                rv = str((data.get("metadata") or {}).get("resourceVersion") or "")
                while not self._stop.is_set():
                    rv = self._watch_once(rv)
            except ApiException as exc:
                if exc.status != 410:
                    LOG.info("subnet watch: %s %s", exc.status, exc.reason)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                LOG.info("subnet watch: %s", exc)
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, BACKOFF[1])

    def _watch_once(self, rv: str) -> str:
        watch = k8s_watch.Watch()  # type: ignore[no-untyped-call,unused-ignore]
        self._watch = watch
        try:
            for event in watch.stream(  # type: ignore[no-untyped-call,unused-ignore]
                self._api.list_cluster_custom_object,
                GROUP,
                VERSION,
                PLURAL,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
            ):
                if self._stop.is_set():
                    break
                kind, obj = event.get("type"), event.get("raw_object")
                if not isinstance(obj, dict):
                    continue
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if kind == "ERROR":
                    raise ApiException(status=int(obj.get("code") or 0), reason="watch error")
                if kind not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                name = str((obj.get("metadata") or {}).get("name") or "")
                if kind == "DELETED":
                    self._subnets.pop(name, None)
                else:
                    self._subnets[name] = obj
                self._changed()
        finally:
            self._watch = None
        return rv
