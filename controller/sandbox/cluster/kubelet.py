"""A sandbox kubelet: the node-side half of a pod's life that the controller depends on.

`SandboxKubelet(api_client, nodes, wiring=..., clock=...)` plays the kubelet (and the kube-ovn CNI
call it makes) for a set of simulated nodes, against the API server emulator or a real
kube-apiserver alike, through the official `kubernetes` client and its watch. It follows the real
kubelet (1.3x with containerd) where the controller or a test can see the difference
(docs/real-nodes.md lists them).

Contract:

* `start()` registers every `SimNode` (nodes.py: Ready, machine capacity, untainted), renews the
  nodes' Leases in `kube-node-lease` every `lease_renew` seconds while it runs, then lists and
  watches all pods and returns.
* For every live pod bound to one of its nodes it waits for what kube-ovn's CNI waits for
  (cniwait.py), then creates the pod's sandbox: a new sandbox id, `PodWiring.wire(pod)` (CNI
  ADD). If that fails, the kubelet reports `FailedCreatePodSandBox` with containerd's wrapping of
  the error, calls `PodWiring.unwire(pod)` (CNI DEL of the failed sandbox) and retries with a new
  sandbox id after the rate-limited backoff, as the real kubelet re-creates a sandbox. Once wired
  it writes the pod's status (podstatus.py): Running; Ready at once when no container has a
  readiness probe, else only once the probes pass (probes.py; failures give `Unhealthy`
  Warnings). A hostNetwork pod runs at once with the node's address; a pod that is never
  allocated stays Pending.
* A pod with `deletionTimestamp` is sent SIGTERM: its containers exit `sigterm_exit` seconds
  later (default 0: the pause image and the demo's images exit on SIGTERM; None: the containers
  ignore it, as a shell or `sleep` running as PID 1 does) or are killed when its
  `deletionGracePeriodSeconds` run out, whichever is first, on the injected clock from when this
  kubelet saw the deletion. Until then the pod keeps its network. Then the pod is unwired (CNI
  DEL) and deleted with grace period 0 and a UID precondition. A pod that disappears without that
  (a grace-0 delete, the emulator's immediate delete) is unwired.
* Bad input never kills a thread: invalid annotations, a NAD that is missing or malformed, a
  wiring that raises, an API error: each gives one log line and, for pod problems, one Warning
  Event per distinct message with a kubelet's reason; retries go through a rate-limited queue
  on the injected clock.
* With a wiring that has `set_subnets` (`CniWiring`), a `SubnetWatch` feeds it every Subnet
  change, as kube-ovn's daemon reconciles the nodes' ovn0 routes on Subnet events.
* `stop()` ends every thread it started and returns once they have exited; it never deletes the
  Node objects.

With `FakeClock` a test moves the grace period, the probes and the retry backoff forward by
`step()` and never sleeps. `wait_synced(namespace, name, rv)` blocks until the kubelet has handled
the pod state at resourceVersion `rv`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from controller.queues import (
    Clock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    RealClock,
)
from controller.sandbox.cluster.cniwait import (
    CniRequest,
    check_network,
    cni_requests,
    pod_key,
    text,
)
from controller.sandbox.cluster.nodes import (
    LEASE_RENEW_SECONDS,
    NOT_READY_TAINT,
    NodeAgent,
    SimNode,
    read,
)
from controller.sandbox.cluster.podstatus import running_status
from controller.sandbox.cluster.podworker import PodWorker
from controller.sandbox.cluster.probes import HostProber, Prober
from controller.sandbox.cluster.subnetwatch import SubnetWatch
from controller.sandbox.cluster.wiring import NoWiring, PodWiring

# Re-exported: the demo, the tests and the benches import them from here.
__all__ = [
    "NOT_READY_TAINT",
    "CniRequest",
    "SandboxKubelet",
    "SimNode",
    "check_network",
    "cni_requests",
    "running_status",
]

LOG = logging.getLogger(__name__)

JsonDict = dict[str, Any]

NAD_GROUP, NAD_VERSION, NAD_PLURAL = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
# Seconds a watch asks the server to keep it open; the stream then ends and is re-opened from
# the last resourceVersion (a relist only after a 410), so stop() is never stuck behind a watch.
WATCH_SECONDS = 30
# Backoff between failed list/watch attempts (real seconds; the API server is down or refusing).
CONNECT_TIMEOUT = 5.0
RELIST_BACKOFF = (0.2, 5.0)
STOP_TIMEOUT = 10.0


class SandboxKubelet:
    """See the module docstring."""

    def __init__(
        self,
        api_client: Any,
        nodes: Sequence[SimNode],
        *,
        wiring: PodWiring | None = None,
        clock: Clock | None = None,
        prober: Prober | None = None,
        sigterm_exit: float | None = 0.0,
        lease_renew: float = LEASE_RENEW_SECONDS,
        workers: int = 2,
        retry_base: float = 0.5,
        retry_max: float = 10.0,
    ) -> None:
        if not nodes:
            raise ValueError("a sandbox kubelet needs at least one node")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate node names: {names}")
        if workers <= 0:
            raise ValueError("workers must be positive")
        self._core = k8s_client.CoreV1Api(api_client)
        self._custom = k8s_client.CustomObjectsApi(api_client)
        self._node_agent = NodeAgent(api_client)
        self.nodes: dict[str, SimNode] = {n.name: n for n in nodes}
        self.wiring: PodWiring = wiring if wiring is not None else NoWiring()
        self.prober: Prober = prober if prober is not None else HostProber(self.wiring)
        self.clock: Clock = clock if clock is not None else RealClock()
        self._lease_renew = lease_renew
        self._workers = workers
        self._queue: RateLimitingQueue[str] = RateLimitingQueue(
            ItemExponentialFailureRateLimiter(retry_base, retry_max), clock=self.clock
        )
        self._lock = threading.Lock()
        self._pods: dict[str, JsonDict] = {}  # the watch's view, key -> pod
        self._last_seen: dict[str, JsonDict] = {}  # last known state, kept after a delete
        self._pod_worker = PodWorker(
            self._core,
            self.nodes,
            wiring=self.wiring,
            prober=self.prober,
            clock=self.clock,
            queue=self._queue,
            get_nad=self._get_nad,
            sigterm_exit=sigterm_exit,
        )
        self._synced: dict[str, str] = {}  # key -> resourceVersion last handled
        self._synced_cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watch: k8s_watch.Watch | None = None
        self._list_ready = threading.Event()
        self._subnet_watch: SubnetWatch | None = None

    @property
    def sigterm_exit(self) -> float | None:
        """Seconds the containers take to exit on SIGTERM (None: they ignore it); a change
        applies to the deletions this kubelet sees from then on."""
        return self._pod_worker.sigterm_exit

    @sigterm_exit.setter
    def sigterm_exit(self, seconds: float | None) -> None:
        self._pod_worker.sigterm_exit = seconds

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 30.0) -> SandboxKubelet:
        """Register the nodes, start watching pods; returns once the first list is in."""
        for node in self.nodes.values():
            self.register_node(node)
        loops = [("kubelet-watch", self._watch_loop), ("kubelet-lease", self._lease_loop)]
        loops += [(f"kubelet-worker-{i}", self._worker_loop) for i in range(self._workers)]
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        set_subnets = getattr(self.wiring, "set_subnets", None)
        if callable(set_subnets):
            # the CNI daemon's half: the nodes' ovn0 routes follow the Subnets' Ready condition
            self._subnet_watch = SubnetWatch(self._custom, set_subnets).start()
        if not self._list_ready.wait(timeout):
            self.stop()
            raise TimeoutError(f"sandbox kubelet: no pod list within {timeout}s (API down?)")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._queue.shut_down()
        if self._subnet_watch is not None:
            self._subnet_watch.stop()
            self._subnet_watch = None
        watch = self._watch
        if watch is not None:
            watch.stop()  # type: ignore[no-untyped-call,unused-ignore]
            resp = getattr(watch, "_resp", None)
            if resp is not None:
                # NOTE: closing the stream from here unblocks the watch thread's read at once
                # instead of after the server-side watch timeout.
                with contextlib.suppress(Exception):
                    resp.shutdown()
        for thread in self._threads:
            thread.join(STOP_TIMEOUT)
            if thread.is_alive():
                LOG.warning(
                    "sandbox kubelet: thread %s did not stop in %ss", thread.name, STOP_TIMEOUT
                )
        self._threads.clear()

    def __enter__(self) -> SandboxKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ observation (tests)

    def last_synced(self, namespace: str, name: str) -> str | None:
        """resourceVersion of the pod state last handled (None: never handled)."""
        with self._lock:
            return self._synced.get(f"{namespace}/{name}")

    def wait_synced(
        self, namespace: str, name: str, resource_version: str, timeout: float = 10.0
    ) -> bool:
        """Block until the pod state at `resource_version` has been handled."""
        key = f"{namespace}/{name}"
        end = time.monotonic() + timeout
        with self._synced_cond:
            while self._synced.get(key) != resource_version:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return False
                self._synced_cond.wait(remaining)
            return True

    # ------------------------------------------------------------------ nodes

    def register_node(self, node: SimNode) -> None:
        self._node_agent.register(node)

    def _lease_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._node_agent.renew_leases(list(self.nodes))
            except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                LOG.warning("sandbox kubelet: node lease not renewed: %s", exc)
            if self._stop.wait(self._lease_renew):
                return

    def _get_nad(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return read(
                self._custom.get_namespaced_custom_object,
                NAD_GROUP,
                NAD_VERSION,
                namespace,
                NAD_PLURAL,
                name,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    # ------------------------------------------------------------------ watch

    def _ours(self, pod: Mapping[str, Any]) -> bool:
        return text(pod, "spec", "nodeName") in self.nodes

    def _watch_loop(self) -> None:
        backoff = RELIST_BACKOFF[0]
        while not self._stop.is_set():
            try:
                rv = self._relist()
                self._list_ready.set()
                backoff = RELIST_BACKOFF[0]
                while not self._stop.is_set():
                    rv = self._watch_once(rv)
            except ApiException as exc:
                if exc.status == 410:
                    LOG.info("sandbox kubelet: pod watch expired (410), relisting")
                    continue
                LOG.warning("sandbox kubelet: pod list/watch failed: %s %s", exc.status, exc.reason)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                LOG.warning("sandbox kubelet: pod list/watch failed: %s", exc)
            except Exception:
                LOG.exception("sandbox kubelet: unexpected error in the pod watch")
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, RELIST_BACKOFF[1])

    def _relist(self) -> str:
        data = read(self._core.list_pod_for_all_namespaces)
        rv = str((data.get("metadata") or {}).get("resourceVersion", ""))
        listed: dict[str, JsonDict] = {}
        for item in data.get("items") or []:
            if isinstance(item, dict):
                listed[pod_key(item)] = item
        with self._lock:
            gone = [k for k in self._pods if k not in listed]
            self._pods = listed
            self._last_seen.update(listed)
        for key in [*listed, *gone]:
            self._queue.add(key)
        return rv

    def _watch_once(self, rv: str) -> str:
        watch = k8s_watch.Watch()  # type: ignore[no-untyped-call,unused-ignore]
        self._watch = watch
        try:
            for event in watch.stream(  # type: ignore[no-untyped-call,unused-ignore]
                self._core.list_pod_for_all_namespaces,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _request_timeout=(CONNECT_TIMEOUT, WATCH_SECONDS + 10),
            ):
                if self._stop.is_set():
                    break
                kind = event.get("type")
                obj = event.get("raw_object")
                if not isinstance(obj, dict):
                    continue
                new_rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                if kind == "BOOKMARK":
                    rv = new_rv or rv
                    continue
                if kind not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                key = pod_key(obj)
                with self._lock:
                    if kind == "DELETED":
                        self._pods.pop(key, None)
                    else:
                        self._pods[key] = obj
                    self._last_seen[key] = obj
                rv = new_rv or rv
                self._queue.add(key)
        finally:
            self._watch = None
        return rv

    # ------------------------------------------------------------------ workers

    def _worker_loop(self) -> None:
        while True:
            key, shutdown = self._queue.get()
            if shutdown or key is None:
                return
            try:
                retry = self._sync(key)
            except Exception:
                LOG.exception("sandbox kubelet: unexpected error handling pod %s", key)
                retry = True
            finally:
                self._queue.done(key)
            if retry and not self._stop.is_set():
                self._queue.add_rate_limited(key)
            elif not retry:
                self._queue.forget(key)

    def _mark_synced(self, key: str, pod: Mapping[str, Any] | None) -> None:
        with self._synced_cond:
            rv = text(pod, "metadata", "resourceVersion") if pod is not None else ""
            self._synced[key] = rv
            self._synced_cond.notify_all()

    def _sync(self, key: str) -> bool:
        """Handle the current state of pod `key`; True asks for a rate-limited retry."""
        with self._lock:
            pod = self._pods.get(key)
            last = self._last_seen.get(key)
        try:
            if pod is None:
                with self._lock:
                    self._last_seen.pop(key, None)
                self._pod_worker.forget(key, last)
                return False
            if not self._ours(pod):
                return False
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                return self._pod_worker.terminate(key, pod)
            return self._pod_worker.run(key, pod)
        finally:
            self._mark_synced(key, pod)
