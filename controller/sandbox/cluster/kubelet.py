"""A sandbox kubelet: the node-side half of a pod's life that the controller depends on.

`SandboxKubelet(api_client, nodes, wiring=..., clock=...)` plays the kubelet (and the kube-ovn CNI
call it makes) for a set of simulated nodes, against the API server emulator or a real
kube-apiserver alike, through the official `kubernetes` client and its watch.

Contract:

* `start()` registers every `SimNode` as a Node (created if absent; its status then patched
  Ready, with InternalIP/Hostname addresses and cpu/memory/pods capacity), removes the
  `node.kubernetes.io/not-ready` taint that the TaintNodesByCondition admission plugin puts on new
  nodes (the node lifecycle controller, which would lift it, does not run in the test bed; no
  heartbeats are sent either), then lists and watches all pods and returns.
* For every live pod bound to one of its nodes (`spec.nodeName`) it does what kubelet + multus +
  kube-ovn's CNI daemon (pkg/daemon/handler.go `handleAdd`) do before a pod runs: for the default
  network (provider `ovn`, or the NAD of `v1.multus-cni.io/default-network`) and each attachment
  of `k8s.v1.cni.cncf.io/networks` that kube-ovn serves (NAD `type: kube-ovn`, or its `ipam.type`)
  it waits for `<provider>.kubernetes.io/allocated: "true"` and valid address annotations, and for
  `<provider>.kubernetes.io/routed: "true"` on the interface that carries the default route (eth0
  unless `<provider>.kubernetes.io/default_route` says otherwise). Then it calls
  `PodWiring.wire(pod)` and writes the pod's status through the status subresource: phase
  Running, PodReadyToStartContainers/Initialized/ContainersReady/Ready, podIP/podIPs from the
  default network's `ip_address`, hostIP(s) from the node's InternalIP, startTime and one running
  containerStatus per container. A hostNetwork pod runs at once with the node's address.
  A pod that is never allocated stays Pending.
* A pod with `deletionTimestamp`: unwired at once, then deleted with grace period 0 and a UID
  precondition once its `deletionGracePeriodSeconds` have passed on the injected clock (counted
  from when this kubelet saw the deletion, as a kubelet's kill timeout is). A pod that disappears
  without that (a grace-0 delete, the emulator's immediate delete) is unwired.
* Bad input never kills a thread: invalid annotations, a NAD that is missing or malformed, a
  wiring that raises, an API error: each gives one log line and, for pod problems, one Warning
  Event `FailedCreatePodSandBox` / `FailedKillPod` on the pod per distinct message (a kubelet's
  reasons); retries go through a rate-limited queue on the injected clock.
* With a wiring that has `set_subnets` (`CniWiring`), a `SubnetWatch` feeds it every Subnet
  change, as kube-ovn's daemon reconciles the nodes' ovn0 routes on Subnet events.
* `stop()` ends every thread it started (watch, workers, the queue's timer) and returns once they
  have exited; it never deletes the Node objects.

The clock is `controller.queues.Clock`; with `FakeClock` a test moves the grace period and the
retry backoff forward by `step()` and never sleeps. `last_synced(namespace, name)` is the
resourceVersion of the pod state the kubelet last finished handling, for tests that must know the
kubelet has seen a pod (e.g. to check that it stays Pending).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from controller.core.address import check_cidrs, cidr_contain_ip, is_valid_mac, parse_cidr, parse_ip
from controller.core.constants import (
    ALLOCATED_ANNOTATION_TEMPLATE,
    ATTACHMENT_NETWORK_ANNOTATION,
    CIDR_ANNOTATION_TEMPLATE,
    CNI_TYPE_NAME,
    DEFAULT_NETWORK_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    ROUTED_ANNOTATION_TEMPLATE,
    annotation_key,
)
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import NetworkSelectionElement
from controller.core.network_attachment import (
    ipam_provider_name,
    ovn_provider_name,
    parse_pod_network_annotation,
)
from controller.queues import (
    Clock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    RealClock,
)
from controller.sandbox.cluster.subnetwatch import SubnetWatch
from controller.sandbox.cluster.wiring import NoWiring, PodWiring

LOG = logging.getLogger(__name__)

JsonDict = dict[str, Any]

DEFAULT_ROUTE_ANNOTATION_TEMPLATE = "{provider}.kubernetes.io/default_route"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
EVENT_COMPONENT = "kubelet"
REASON_SANDBOX_FAILED = "FailedCreatePodSandBox"
REASON_KILL_FAILED = "FailedKillPod"
NAD_GROUP, NAD_VERSION, NAD_PLURAL = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
DEFAULT_INTERFACE = "eth0"
# Seconds a watch asks the server to keep it open; the stream then ends and is re-opened from
# the last resourceVersion (a relist only after a 410), so stop() is never stuck behind a watch.
WATCH_SECONDS = 30
REQUEST_TIMEOUT = (5.0, 30.0)
# Backoff between failed list/watch attempts (real seconds; the API server is down or refusing).
RELIST_BACKOFF = (0.2, 5.0)
STOP_TIMEOUT = 10.0


# ------------------------------------------------------------------------------ values


@dataclass(frozen=True, slots=True)
class SimNode:
    """A node this kubelet registers and serves."""

    name: str
    internal_ip: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CniRequest:
    """One CNI ADD the pod needs: the kube-ovn provider whose annotations it reads."""

    provider: str
    interface: str
    default_route: bool


class PodNotReady(Exception):
    """The pod cannot be started yet for a reason worth an Event (the message says which)."""


class NadMissing(Exception):
    """A NetworkAttachmentDefinition the pod asks for cannot be read yet (retried)."""


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(obj: Any, *path: str) -> str:
    for key in path:
        if not isinstance(obj, Mapping):
            return ""
        obj = obj.get(key)
    return obj if isinstance(obj, str) else ""


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    ann = (pod.get("metadata") or {}).get("annotations")
    return ann if isinstance(ann, Mapping) else {}


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# ----------------------------------------------------------------- what the CNI waits for


NadGetter = Callable[[str, str], Mapping[str, Any] | None]


def _nad_providers(nad: Mapping[str, Any], element: NetworkSelectionElement) -> str | None:
    """The kube-ovn provider the CNI is called with for `element`, or None when kube-ovn does
    not serve this attachment (another CNI and another IPAM). Raises PodNotReady on a config
    that is not a CNI conf."""
    where = f"network-attachment-definition {element.namespace}/{element.name}"
    config = _text(nad, "spec", "config")
    try:
        conf = json.loads(config) if config else {}
    except ValueError as exc:
        raise PodNotReady(f"{where}: spec.config is not JSON: {exc}") from None
    if not isinstance(conf, Mapping):
        raise PodNotReady(f"{where}: spec.config is not a JSON object")
    plugins = conf.get("plugins") if not conf.get("type") else [conf]
    if not isinstance(plugins, list):
        raise PodNotReady(f"{where}: spec.config has neither 'type' nor 'plugins'")
    for plugin in plugins:
        if not isinstance(plugin, Mapping):
            continue
        if plugin.get("type") == CNI_TYPE_NAME:
            provider = plugin.get("provider")
            return (
                provider if isinstance(provider, str) and provider else (ovn_provider_name(element))
            )
        ipam = plugin.get("ipam")
        if isinstance(ipam, Mapping) and ipam.get("type") == CNI_TYPE_NAME:
            provider = ipam.get("provider")
            return (
                provider
                if isinstance(provider, str) and provider
                else (ipam_provider_name(element))
            )
    return None


def _default_route(annotations: Mapping[str, Any], provider: str, interface: str) -> bool:
    value = annotations.get(annotation_key(DEFAULT_ROUTE_ANNOTATION_TEMPLATE, provider))
    if value == "true":
        return True
    if value == "false":
        return False
    return interface == DEFAULT_INTERFACE


def cni_requests(pod: Mapping[str, Any], get_nad: NadGetter) -> list[CniRequest]:
    """The CNI ADDs multus makes for `pod`, default network first.

    `get_nad(namespace, name)` returns the NAD or None when it does not exist (NadMissing is
    raised then: multus fails the sandbox and the kubelet retries). Raises PodNotReady on a
    malformed network annotation."""
    annotations = _annotations(pod)
    namespace = _text(pod, "metadata", "namespace")
    out: list[CniRequest] = []

    def elements(key: str) -> list[NetworkSelectionElement]:
        value = annotations.get(key)
        if not value:
            return []
        if not isinstance(value, str):
            raise PodNotReady(f"annotation {key} is not a string")
        try:
            return parse_pod_network_annotation(value, namespace)
        except InvalidPodNetworkError as exc:
            raise PodNotReady(f"invalid annotation {key}: {exc}") from None

    def provider_of(element: NetworkSelectionElement) -> str | None:
        nad = get_nad(element.namespace, element.name)
        if nad is None:
            raise NadMissing(
                f"network-attachment-definition {element.namespace}/{element.name} not found"
            )
        return _nad_providers(nad, element)

    defaults = elements(DEFAULT_NETWORK_ANNOTATION)
    if defaults:
        provider = provider_of(defaults[0])
        if provider is not None:
            out.append(
                CniRequest(
                    provider,
                    DEFAULT_INTERFACE,
                    _default_route(annotations, provider, DEFAULT_INTERFACE),
                )
            )
    else:
        out.append(
            CniRequest(
                OVN_PROVIDER,
                DEFAULT_INTERFACE,
                _default_route(annotations, OVN_PROVIDER, DEFAULT_INTERFACE),
            )
        )
    for index, element in enumerate(elements(ATTACHMENT_NETWORK_ANNOTATION), start=1):
        provider = provider_of(element)
        if provider is None:
            continue
        interface = element.interface or f"net{index}"
        out.append(
            CniRequest(provider, interface, _default_route(annotations, provider, interface))
        )
    return out


def check_network(annotations: Mapping[str, Any], request: CniRequest) -> bool:
    """Whether the CNI ADD of `request` would go through now: allocated, valid and (for the
    default-route interface) routed. False: not yet (the controller has work to do); raises
    PodNotReady when the controller says allocated but the addresses are unusable."""
    provider = request.provider

    def value(template: str) -> str:
        raw = annotations.get(annotation_key(template, provider), "")
        return raw if isinstance(raw, str) else ""

    if value(ALLOCATED_ANNOTATION_TEMPLATE) != "true":
        return False
    errors: list[str] = []
    ip_key = annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider)
    ips = value(IP_ADDRESS_ANNOTATION_TEMPLATE)
    cidr = value(CIDR_ANNOTATION_TEMPLATE)
    if not ips:
        errors.append(f"{ip_key} is empty")
    for ip in ips.split(",") if ips else ():
        ok = parse_cidr(ip) is not None if "/" in ip else parse_ip(ip) is not None
        if not ok:
            errors.append(f"{ip!r} is not a valid {ip_key}")
        elif cidr and (not check_cidrs(cidr) or not cidr_contain_ip(cidr, ip)):
            errors.append(f"{ip} is not in cidr {cidr!r}")
    mac = value(MAC_ADDRESS_ANNOTATION_TEMPLATE)
    if mac and not is_valid_mac(mac):
        errors.append(
            f"{mac!r} is not a valid {annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider)}"
        )
    if errors:
        raise PodNotReady(f"provider {provider}: " + "; ".join(errors))
    return not request.default_route or value(ROUTED_ANNOTATION_TEMPLATE) == "true"


def pod_ips(annotations: Mapping[str, Any], provider: str) -> list[str]:
    raw = annotations.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
    if not isinstance(raw, str):
        return []
    return [ip.split("/", 1)[0] for ip in raw.split(",") if ip]


def running_status(pod: Mapping[str, Any], ips: Sequence[str], host_ip: str, now: str) -> JsonDict:
    """The status a kubelet reports for a pod whose containers all started."""
    spec = pod.get("spec") or {}
    uid = _text(pod, "metadata", "uid")
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    statuses = [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": f"sandbox://{uid}/{c.get('name', '')}",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for c in containers
    ]
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
    ]
    status: JsonDict = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": now,
        "containerStatuses": statuses,
    }
    if ips:
        status["podIP"] = ips[0]
        status["podIPs"] = [{"ip": ip} for ip in ips]
    return status


# ------------------------------------------------------------------------------ the kubelet


@dataclass(slots=True)
class _Terminating:
    uid: str
    deadline: float


class SandboxKubelet:
    """See the module docstring."""

    def __init__(
        self,
        api_client: Any,
        nodes: Sequence[SimNode],
        *,
        wiring: PodWiring | None = None,
        clock: Clock | None = None,
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
        self._api = api_client
        self._core = k8s_client.CoreV1Api(api_client)
        self._custom = k8s_client.CustomObjectsApi(api_client)
        self.nodes: dict[str, SimNode] = {n.name: n for n in nodes}
        self.wiring: PodWiring = wiring if wiring is not None else NoWiring()
        self.clock: Clock = clock if clock is not None else RealClock()
        self._workers = workers
        self._queue: RateLimitingQueue[str] = RateLimitingQueue(
            ItemExponentialFailureRateLimiter(retry_base, retry_max), clock=self.clock
        )
        self._lock = threading.Lock()
        self._pods: dict[str, JsonDict] = {}  # the watch's view, key -> pod
        self._last_seen: dict[str, JsonDict] = {}  # last known state, kept after a delete
        self._started: dict[str, str] = {}  # key -> uid of the pod we made Running
        self._wired: dict[str, str] = {}  # key -> uid wired and not yet unwired
        self._terminating: dict[str, _Terminating] = {}
        self._events_sent: dict[str, set[str]] = {}  # uid -> messages already reported
        self._synced: dict[str, str] = {}  # key -> resourceVersion last handled
        self._synced_cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watch: k8s_watch.Watch | None = None
        self._list_ready = threading.Event()
        self._subnet_watch: SubnetWatch | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 30.0) -> SandboxKubelet:
        """Register the nodes, start watching pods; returns once the first list is in."""
        for node in self.nodes.values():
            self.register_node(node)
        watcher = threading.Thread(target=self._watch_loop, name="kubelet-watch", daemon=True)
        self._threads.append(watcher)
        watcher.start()
        for index in range(self._workers):
            worker = threading.Thread(
                target=self._worker_loop, name=f"kubelet-worker-{index}", daemon=True
            )
            self._threads.append(worker)
            worker.start()
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
        labels = {
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **node.labels,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node.name, "labels": labels},
            "spec": {},
        }
        try:
            self._call(self._core.create_node, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        now = _now_rfc3339()
        capacity = {"cpu": node.cpu, "memory": node.memory, "pods": node.pods}
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [
                {"type": "InternalIP", "address": node.internal_ip},
                {"type": "Hostname", "address": node.name},
            ],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "sandbox kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "sandbox",
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "sandbox://0",
                "osImage": "sandbox",
                "kernelVersion": "",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        }
        self._call(self._core.patch_node_status, node.name, {"status": status})
        self._untaint(node.name)

    def _untaint(self, name: str) -> None:
        # A node is born with the not-ready taint on a real API server; lift it, or the
        # scheduler would place nothing here. A 409 means someone else wrote the node: re-read.
        for _ in range(5):
            current = self._read(self._core.read_node, name)
            taints = (current.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
            if len(kept) == len(taints):
                return
            patch = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {"taints": kept or None},
            }
            try:
                self._call(
                    self._core.patch_node, name, patch, _content_type="application/merge-patch+json"
                )
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise

    # ------------------------------------------------------------------ API plumbing

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        # The body is read (and dropped) before the connection goes back to the pool: a
        # connection with an unread body would hand it to the next request as its answer.
        self._read(fn, *args, **kwargs)

    def _read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> JsonDict:
        resp = fn(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        try:
            raw = resp.data
        finally:
            with contextlib.suppress(Exception):
                resp.release_conn()
        data = json.loads(raw) if raw else {}
        if not isinstance(data, dict):
            raise ValueError(f"the API server answered a non-object: {raw[:200]!r}")
        return data

    def _get_nad(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return self._read(
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
        return _text(pod, "spec", "nodeName") in self.nodes

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
        data = self._read(self._core.list_pod_for_all_namespaces)
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
                _request_timeout=(REQUEST_TIMEOUT[0], WATCH_SECONDS + 10),
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
            rv = _text(pod, "metadata", "resourceVersion") if pod is not None else ""
            self._synced[key] = rv
            self._synced_cond.notify_all()

    def _sync(self, key: str) -> bool:
        """Handle the current state of pod `key`; True asks for a rate-limited retry."""
        with self._lock:
            pod = self._pods.get(key)
            last = self._last_seen.get(key)
        try:
            if pod is None:
                self._forget(key, last)
                return False
            if not self._ours(pod):
                return False
            if (pod.get("metadata") or {}).get("deletionTimestamp"):
                return self._terminate(key, pod)
            return self._run(key, pod)
        finally:
            self._mark_synced(key, pod)

    def _forget(self, key: str, last: Mapping[str, Any] | None) -> None:
        with self._lock:
            wired = self._wired.pop(key, None)
            self._started.pop(key, None)
            self._terminating.pop(key, None)
            self._last_seen.pop(key, None)
            if last is not None:
                self._events_sent.pop(_text(last, "metadata", "uid"), None)
        if wired is not None and last is not None:
            try:
                self.wiring.unwire(last)
            except Exception as exc:  # the pod is gone: a log line is all we can do
                LOG.warning("sandbox kubelet: unwiring deleted pod %s failed: %s", key, exc)

    def _run(self, key: str, pod: JsonDict) -> bool:
        uid = _text(pod, "metadata", "uid")
        phase = _text(pod, "status", "phase")
        with self._lock:
            if self._started.get(key) == uid:
                return False
        if phase in ("Succeeded", "Failed"):
            return False
        node = self.nodes[_text(pod, "spec", "nodeName")]
        annotations = _annotations(pod)
        if (pod.get("spec") or {}).get("hostNetwork") is True:
            ips = [node.internal_ip]
        else:
            try:
                requests = cni_requests(pod, self._get_nad)
                if not all(check_network(annotations, r) for r in requests):
                    return False  # the controller's annotation patch will bring the pod back
            except PodNotReady as exc:
                self._report(pod, REASON_SANDBOX_FAILED, str(exc))
                return False
            except NadMissing as exc:
                self._report(pod, REASON_SANDBOX_FAILED, str(exc))
                return True
            try:
                self.wiring.wire(pod)
            except Exception as exc:  # any wiring failure is reported and retried
                self._report(pod, REASON_SANDBOX_FAILED, f"wiring the pod failed: {exc}")
                return True
            with self._lock:
                self._wired[key] = uid
            ips = pod_ips(annotations, requests[0].provider) if requests else []
        status = running_status(pod, ips, node.internal_ip, _now_rfc3339())
        current = pod.get("status") or {}
        if (
            current.get("phase") != "Running"
            or current.get("podIP") != status.get("podIP")
            or current.get("hostIP") != status["hostIP"]
        ):
            try:
                self._call(
                    self._core.patch_namespaced_pod_status,
                    _text(pod, "metadata", "name"),
                    _text(pod, "metadata", "namespace"),
                    {"metadata": {"uid": uid}, "status": status},
                    _content_type="application/strategic-merge-patch+json",
                )
            except ApiException as exc:
                if exc.status in (404, 409):
                    return False  # deleted or re-created meanwhile: its own event follows
                if exc.status == 422:
                    self._report(
                        pod,
                        REASON_SANDBOX_FAILED,
                        f"the API server refused the pod status: {exc.body or exc.reason}",
                    )
                    return False
                LOG.warning(
                    "sandbox kubelet: status of %s not written: %s %s", key, exc.status, exc.reason
                )
                return True
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                LOG.warning("sandbox kubelet: status of %s not written: %s", key, exc)
                return True
        with self._lock:
            self._started[key] = uid
        LOG.info(
            "sandbox kubelet: pod %s running on %s with %s",
            key,
            node.name,
            ",".join(ips) or "no address",
        )
        return False

    def _terminate(self, key: str, pod: JsonDict) -> bool:
        meta = pod.get("metadata") or {}
        uid = _text(pod, "metadata", "uid")
        raw_grace = meta.get("deletionGracePeriodSeconds")
        grace = float(raw_grace) if isinstance(raw_grace, int) and raw_grace > 0 else 0.0
        now = self.clock.now()
        with self._lock:
            state = self._terminating.get(key)
            first = state is None or state.uid != uid
            if first:
                state = _Terminating(uid, now + grace)
                self._terminating[key] = state
            else:
                assert state is not None
                state.deadline = min(state.deadline, now + grace)
            wired = self._wired.get(key) == uid
            deadline = state.deadline
        if first and wired:
            try:
                self.wiring.unwire(pod)
            except Exception as exc:  # reported; the delete still goes ahead
                self._report(pod, REASON_KILL_FAILED, f"unwiring the pod failed: {exc}")
            with self._lock:
                self._wired.pop(key, None)
        remaining = deadline - now
        if remaining > 0:
            self._queue.add_after(key, remaining)
            return False
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            self._call(
                self._core.delete_namespaced_pod,
                _text(pod, "metadata", "name"),
                _text(pod, "metadata", "namespace"),
                body=body,
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False  # gone already, or a new pod of that name: its events follow
            LOG.warning(
                "sandbox kubelet: final delete of %s failed: %s %s", key, exc.status, exc.reason
            )
            return True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("sandbox kubelet: final delete of %s failed: %s", key, exc)
            return True
        LOG.info("sandbox kubelet: pod %s terminated after %.0fs grace", key, grace)
        return False

    # ------------------------------------------------------------------ events

    def _report(self, pod: Mapping[str, Any], reason: str, message: str) -> None:
        """One log line and one Warning Event per distinct message for this pod."""
        key = pod_key(pod)
        uid = _text(pod, "metadata", "uid")
        with self._lock:
            sent = self._events_sent.setdefault(uid, set())
            if message in sent:
                return
            sent.add(message)
        LOG.warning("sandbox kubelet: pod %s: %s: %s", key, reason, message)
        meta = pod.get("metadata") or {}
        namespace = _text(pod, "metadata", "namespace")
        now = _now_rfc3339()
        node = _text(pod, "spec", "nodeName")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'pod')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta.get("name", ""),
                "namespace": namespace,
                "uid": uid,
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": EVENT_COMPONENT, "host": node},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": node,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._call(self._core.create_namespaced_event, namespace, event)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            LOG.warning("sandbox kubelet: event for pod %s not recorded: %s", key, exc)
