"""The sandbox kubelet's pod lifecycle: sandbox creation and re-creation, status, readiness
probes, graceful termination and the kubelet's Warning Events (the contract is in kubelet.py's
module docstring). Each call handles one pod's current state and says whether to retry it with
backoff; later work (a probe, the end of a grace period) is put on the queue with a delay.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3
from kubernetes.client.exceptions import ApiException

from controller.queues import Clock
from controller.sandbox.cluster.cniwait import (
    NadGetter,
    NadMissing,
    PodNotReady,
    annotations_of,
    check_network,
    cni_requests,
    pod_ips,
    pod_key,
    text,
)
from controller.sandbox.cluster.nodes import SimNode, call
from controller.sandbox.cluster.podstatus import (
    event,
    new_container_id,
    now_rfc3339,
    running_status,
    sandbox_failed_message,
)
from controller.sandbox.cluster.probes import Prober, Readiness
from controller.sandbox.cluster.wiring import PodWiring

LOG = logging.getLogger(__name__)

JsonDict = dict[str, Any]

REASON_SANDBOX_FAILED = "FailedCreatePodSandBox"
REASON_KILL_FAILED = "FailedKillPod"
REASON_UNHEALTHY = "Unhealthy"


class Delayer(Protocol):
    def add_after(self, item: str, seconds: float) -> None: ...


@dataclass(slots=True)
class _Terminating:
    uid: str
    deadline: float


@dataclass(slots=True)
class _Started:
    uid: str
    node: SimNode
    ips: list[str]
    since: str
    container_ids: dict[str, str]
    readiness: Readiness


class PodWorker:
    """Per-pod state and the steps of a pod's life on the sandbox kubelet's nodes."""

    def __init__(
        self,
        core: Any,
        nodes: Mapping[str, SimNode],
        *,
        wiring: PodWiring,
        prober: Prober,
        clock: Clock,
        queue: Delayer,
        get_nad: NadGetter,
        sigterm_exit: float | None,
    ) -> None:
        self._core = core
        self._nodes = nodes
        self.wiring = wiring
        self._prober = prober
        self._clock = clock
        self._queue = queue
        self._get_nad = get_nad
        self.sigterm_exit = sigterm_exit  # read at each SIGTERM: a test may change it
        self._lock = threading.Lock()
        self._started: dict[str, _Started] = {}  # key -> the pod made Running
        self._wired: dict[str, str] = {}  # key -> uid wired and not yet unwired
        self._sandboxes: dict[str, str] = {}  # key -> id of the sandbox being created
        self._terminating: dict[str, _Terminating] = {}
        self._events_sent: dict[str, set[str]] = {}  # uid -> messages already reported

    # ------------------------------------------------------------------ gone

    def forget(self, key: str, last: Mapping[str, Any] | None) -> None:
        with self._lock:
            wired = self._wired.pop(key, None)
            self._started.pop(key, None)
            self._sandboxes.pop(key, None)
            self._terminating.pop(key, None)
            if last is not None:
                self._events_sent.pop(text(last, "metadata", "uid"), None)
        if wired is not None and last is not None:
            try:
                self.wiring.unwire(last)
            except Exception as exc:  # the pod is gone: a log line is all we can do
                LOG.warning("sandbox kubelet: unwiring deleted pod %s failed: %s", key, exc)

    # ------------------------------------------------------------------ start

    def run(self, key: str, pod: JsonDict) -> bool:
        uid = text(pod, "metadata", "uid")
        with self._lock:
            started = self._started.get(key)
        if started is not None and started.uid == uid:
            return self._probe(key, pod, started)
        if text(pod, "status", "phase") in ("Succeeded", "Failed"):
            return False
        node = self._nodes[text(pod, "spec", "nodeName")]
        if (pod.get("spec") or {}).get("hostNetwork") is True:
            ips = [node.internal_ip]
        else:
            wired = self._create_sandbox(key, pod)
            if wired is None or isinstance(wired, bool):
                return bool(wired)
            ips = wired
        containers = (pod.get("spec") or {}).get("containers") or []
        started = _Started(
            uid,
            node,
            ips,
            now_rfc3339(),
            {str(c.get("name", "")): new_container_id() for c in containers},
            Readiness(uid, pod, self._clock.now()),
        )
        retry = self._write_status(key, pod, started)
        if retry is not None:
            return retry
        with self._lock:
            self._started[key] = started
        LOG.info("sandbox kubelet: pod %s running on %s with %s", key, node.name, ",".join(ips))
        return self._probe(key, pod, started)

    def _create_sandbox(self, key: str, pod: JsonDict) -> list[str] | bool | None:
        """The pod's addresses once its sandbox is networked; else whether to retry."""
        annotations = annotations_of(pod)
        try:
            requests = cni_requests(pod, self._get_nad)
            if not all(check_network(annotations, r) for r in requests):
                return False  # the controller's annotation patch will bring the pod back
        except PodNotReady as exc:
            self.report(pod, REASON_SANDBOX_FAILED, str(exc))
            return False
        except NadMissing as exc:
            self.report(pod, REASON_SANDBOX_FAILED, str(exc))
            return True
        with self._lock:
            sandbox = self._sandboxes.setdefault(key, new_container_id())
        try:
            self.wiring.wire(pod)
        except Exception as exc:  # CNI ADD failed: the kubelet re-creates the sandbox
            self.report(pod, REASON_SANDBOX_FAILED, sandbox_failed_message(sandbox, str(exc)))
            with self._lock:
                self._sandboxes.pop(key, None)
            try:
                self.wiring.unwire(pod)  # StopPodSandbox: CNI DEL of the failed sandbox
            except Exception as del_exc:
                LOG.warning("sandbox kubelet: CNI DEL of sandbox %s failed: %s", sandbox, del_exc)
            return True
        with self._lock:
            self._wired[key] = text(pod, "metadata", "uid")
        return pod_ips(annotations, requests[0].provider) if requests else []

    def _write_status(self, key: str, pod: JsonDict, started: _Started) -> bool | None:
        """None once written; else whether to retry."""
        status = running_status(
            pod,
            started.ips,
            started.node.internal_ip,
            started.since,
            ready=started.readiness.ready,
            container_ids=started.container_ids,
        )
        try:
            call(
                self._core.patch_namespaced_pod_status,
                text(pod, "metadata", "name"),
                text(pod, "metadata", "namespace"),
                {"metadata": {"uid": started.uid}, "status": status},
                _content_type="application/strategic-merge-patch+json",
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False  # deleted or re-created meanwhile: its own event follows
            if exc.status == 422:
                message = f"the API server refused the pod status: {exc.body or exc.reason}"
                self.report(pod, REASON_SANDBOX_FAILED, message)
                return False
            LOG.warning("sandbox kubelet: status of %s not written: %s %s", key, exc.status, exc)
            return True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("sandbox kubelet: status of %s not written: %s", key, exc)
            return True
        return None

    def _probe(self, key: str, pod: JsonDict, started: _Started) -> bool:
        readiness = started.readiness
        due = readiness.next_due()
        if due is None:
            return False
        now = self._clock.now()
        if due > now:
            self._queue.add_after(key, due - now)
            return False
        was_ready = readiness.ready
        # the probes target the address this kubelet reported, which the watch may not show yet
        seen = {
            **pod,
            "status": {**(pod.get("status") or {}), "podIP": next(iter(started.ips), "")},
        }
        for message in readiness.run_due(seen, self._prober, now):
            self.report(pod, REASON_UNHEALTHY, f"Readiness probe failed: {message}")
        if readiness.ready != was_ready:
            retry = self._write_status(key, pod, started)
            if retry is not None:
                return retry
        after = readiness.next_due()
        if after is not None:
            self._queue.add_after(key, max(after - now, 0.0))
        return False

    # ------------------------------------------------------------------ termination

    def terminate(self, key: str, pod: JsonDict) -> bool:
        meta = pod.get("metadata") or {}
        uid = text(pod, "metadata", "uid")
        raw_grace = meta.get("deletionGracePeriodSeconds")
        grace = float(raw_grace) if isinstance(raw_grace, int) and raw_grace > 0 else 0.0
        now = self._clock.now()
        with self._lock:
            running = key in self._started or key in self._wired
            exits = self.sigterm_exit if running else 0.0
            wait = grace if exits is None else min(grace, exits)
            state = self._terminating.get(key)
            if state is None or state.uid != uid:
                state = self._terminating[key] = _Terminating(uid, now + wait)
            else:
                state.deadline = min(state.deadline, now + wait)
            remaining = state.deadline - now
        if remaining > 0:  # SIGTERM sent; the pod keeps its network until its containers exit
            self._queue.add_after(key, remaining)
            return False
        with self._lock:
            wired = self._wired.get(key) == uid
            self._started.pop(key, None)
        if wired:
            try:
                self.wiring.unwire(pod)  # StopPodSandbox: CNI DEL once the containers are gone
            except Exception as exc:  # reported; the delete still goes ahead
                self.report(pod, REASON_KILL_FAILED, f"unwiring the pod failed: {exc}")
            with self._lock:
                self._wired.pop(key, None)
        return self._final_delete(key, pod, uid)

    def _final_delete(self, key: str, pod: JsonDict, uid: str) -> bool:
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            call(
                self._core.delete_namespaced_pod,
                text(pod, "metadata", "name"),
                text(pod, "metadata", "namespace"),
                body=body,
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False  # gone already, or a new pod of that name: its events follow
            LOG.warning("sandbox kubelet: final delete of %s failed: %s %s", key, exc.status, exc)
            return True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("sandbox kubelet: final delete of %s failed: %s", key, exc)
            return True
        LOG.info("sandbox kubelet: pod %s terminated", key)
        return False

    # ------------------------------------------------------------------ events

    def report(self, pod: Mapping[str, Any], reason: str, message: str) -> None:
        """One log line and one Warning Event per distinct message for this pod."""
        key = pod_key(pod)
        uid = text(pod, "metadata", "uid")
        with self._lock:
            sent = self._events_sent.setdefault(uid, set())
            if message in sent:
                return
            sent.add(message)
        LOG.warning("sandbox kubelet: pod %s: %s: %s", key, reason, message)
        namespace = text(pod, "metadata", "namespace")
        try:
            call(self._core.create_namespaced_event, namespace, event(pod, reason, message))
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("sandbox kubelet: event for pod %s not recorded: %s", key, exc)
