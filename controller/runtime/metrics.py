"""The controller's Prometheus collectors and its metrics/health HTTP endpoint.

Contract:

* `ControllerMetrics(registry)` registers every collector on the injected `CollectorRegistry`
  (one per process, one per test); nothing touches prometheus_client's global registry. Names
  and labels follow kube-ovn v1.8.18 (pkg/controller/net_metrics.go, client_go_adapter.go,
  pkg/ovs/adapter.go) where kube-ovn has them:
  `subnet_available_ip_count` / `subnet_used_ip_count{subnet_name,protocol,subnet_cidr}`,
  `ovs_client_request_latency_milliseconds{db,method,code}`,
  `rest_client_request_latency_seconds{verb,url}`, `rest_client_requests_total{code,method,host}`.
  Ours are prefixed `kube_ovn_controller_`. The `workqueue_*` family belongs to the queues
  package's provider; it registers on the same registry without name clashes.
* The `observe_*` methods have the exact signatures of the hooks they plug into
  (`controller.kube.api.RequestObserver`, the OVN client's latency callback) and never raise.
* With `runtime_collectors` (the default) the registry also carries prometheus_client's process
  collector (`process_resident_memory_bytes`, `process_cpu_seconds_total`, ...), its platform
  and GC collectors (`python_info`, `python_gc_*`), and `klog_lines_total{level}` (INFO, WARN,
  ERROR: lines logged, from `controller.runtime.log.line_counts`), the names kube-ovn's
  dashboards read. `rest_client_requests_total`'s `host` is `host:port`, as client-go's.
* `MetricsServer` serves `/metrics` (Prometheus text or OpenMetrics by content negotiation),
  `/healthz` and `/readyz` (200 "ok" or 503 with a one-line reason) from a daemon-threaded stdlib
  HTTP server; `port=0` binds a free port, read back from `.port` after `start()`. `debug_flags`
  maps a name to a setter: `PUT /debug/flags/<name>` with the new value as the body calls it
  (component-base's `/debug/flags/v`): 200 with its answer, 400 with the error of a bad value,
  403 unless the request comes from loopback (the endpoint has no authentication).
* `port_is_free(host, port)` answers whether `MetricsServer` could bind there now: it binds a
  probe socket with the server's own socket options (SO_REUSEADDR), so connections of an earlier
  run still in TIME-WAIT do not count as "in use", a listening socket does.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from controller.runtime.log import line_counts

LOG = logging.getLogger(__name__)

PREFIX = "kube_ovn_controller"

# kube-ovn: prometheus.ExponentialBuckets(1, 2, 10) milliseconds -> 1 .. 512
OVS_LATENCY_BUCKETS_MS = tuple(float(2**k) for k in range(10))
# client-go adapter in kube-ovn: ExponentialBuckets(0.001, 2, 10) seconds -> 1 ms .. 512 ms
REST_LATENCY_BUCKETS_S = tuple(0.001 * 2**k for k in range(10))
HANDLER_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

MAX_FLAG_BODY = 64
LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})

PROTOCOL_IPV4 = "IPv4"
PROTOCOL_IPV6 = "IPv6"
PROTOCOL_DUAL = "Dual"


def host_port(url: str) -> str:
    """client-go's `host` label: `host:port` of the API server URL (the scheme's port if none)."""
    if not url:
        return ""
    parts = urlsplit(url if "//" in url else f"//{url}")
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 80 if parts.scheme == "http" else 443
    return f"{host}:{port}"


class LogLinesCollector(Collector):
    """`klog_lines_total{level}`: lines logged by this process (kube-ovn's klog metrics)."""

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "klog_lines", "Number of log lines written, by level", labels=("level",)
        )
        for level, count in sorted(line_counts().items()):
            family.add_metric((level,), count)
        yield family


def _as_number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


class ControllerMetrics:
    """Every controller-owned collector, registered on one registry."""

    def __init__(
        self, registry: CollectorRegistry, *, api_host: str = "", runtime_collectors: bool = True
    ) -> None:
        self.registry = registry
        self._api_host = host_port(api_host)
        if runtime_collectors:
            # The global instances only read process-wide state (/proc/self, gc, the platform);
            # registering them on this registry shares no per-controller data.
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                registry.register(collector)
            registry.register(LogLinesCollector())
        self._lock = threading.Lock()
        self._subnet_labels: dict[str, tuple[str, str]] = {}
        subnet_labels = ("subnet_name", "protocol", "subnet_cidr")
        self.subnet_available_ip_count = Gauge(
            "subnet_available_ip_count",
            "The available number of IP addresses in the subnet",
            subnet_labels,
            registry=registry,
        )
        self.subnet_used_ip_count = Gauge(
            "subnet_used_ip_count",
            "The used number of IP addresses in the subnet",
            subnet_labels,
            registry=registry,
        )
        self.ovs_client_request_latency = Histogram(
            "ovs_client_request_latency_milliseconds",
            "Latency of OVN NB requests in milliseconds, by database, method and result code",
            ("db", "method", "code"),
            buckets=OVS_LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.rest_client_request_latency = Histogram(
            "rest_client_request_latency_seconds",
            "Request latency in seconds. Broken down by verb and URL.",
            ("verb", "url"),
            buckets=REST_LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.rest_client_requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"),
            registry=registry,
        )
        self.pod_handler_duration = Histogram(
            f"{PREFIX}_pod_handler_duration_seconds",
            "Time to handle one pod work item, by handler and outcome",
            ("handler", "result"),
            buckets=HANDLER_BUCKETS_S,
            registry=registry,
        )
        self.pod_inspection_runs = Counter(
            f"{PREFIX}_pod_inspection_runs",
            "Runs of the periodic pod inspection (kube-ovn inspectPod)",
            registry=registry,
        )
        self.pod_inspection_repairs = Counter(
            f"{PREFIX}_pod_inspection_repairs",
            "Pods the inspection re-queued, by action (readd: LSP missing; reroute: not routed)",
            ("action",),
            registry=registry,
        )
        self.gc_runs = Counter(
            f"{PREFIX}_gc_runs",
            "Runs of the periodic logical switch port garbage collection (markAndCleanLSP)",
            registry=registry,
        )
        self.gc_deleted = Counter(
            f"{PREFIX}_gc_deleted",
            "Objects deleted by garbage collection, by resource (lsp, ip, static_route)",
            ("resource",),
            registry=registry,
        )
        self.gc_added = Counter(
            f"{PREFIX}_gc_added",
            "Routing rows a periodic routing gc pass had to write (missing or different), by "
            "resource (router_policy, address_set_entry, nat_rule)",
            ("resource",),
            registry=registry,
        )
        self.events_dropped = Counter(
            f"{PREFIX}_events_dropped",
            "Kubernetes Events dropped because the recorder's buffer was full",
            registry=registry,
        )

    # --- subnets (kube-ovn net_metrics.go, refreshed by resyncSubnetMetrics) ---------------------
    def set_subnet_ip_counts(
        self,
        subnet: str,
        protocol: str,
        cidr: str,
        *,
        v4_available: float,
        v6_available: float,
        v4_used: float,
        v6_used: float,
    ) -> None:
        """Publish one subnet's gauges with kube-ovn's per-protocol rules.

        Available: v4 for IPv4, v6 for IPv6, min(v4, v6) for Dual. Used: v6 for IPv6, else v4.
        A subnet whose protocol or CIDR changed loses its old series.
        """
        if protocol == PROTOCOL_DUAL:
            available = min(v4_available, v6_available)
        elif protocol == PROTOCOL_IPV6:
            available = v6_available
        else:
            available = v4_available
        used = v6_used if protocol == PROTOCOL_IPV6 else v4_used
        with self._lock:
            old = self._subnet_labels.get(subnet)
            if old is not None and old != (protocol, cidr):
                self._remove_subnet_series(subnet, *old)
            self._subnet_labels[subnet] = (protocol, cidr)
            self.subnet_available_ip_count.labels(subnet, protocol, cidr).set(available)
            self.subnet_used_ip_count.labels(subnet, protocol, cidr).set(used)

    def observe_subnet(self, subnet: Mapping[str, Any]) -> None:
        """Publish the gauges from a decoded Subnet CR (spec.protocol/cidrBlock, status.*IPs)."""
        meta = subnet.get("metadata") or {}
        spec = subnet.get("spec") or {}
        status = subnet.get("status") or {}
        name = meta.get("name")
        if not name:
            return
        self.set_subnet_ip_counts(
            str(name),
            str(spec.get("protocol") or PROTOCOL_IPV4),
            str(spec.get("cidrBlock") or ""),
            v4_available=_as_number(status.get("v4availableIPs")),
            v6_available=_as_number(status.get("v6availableIPs")),
            v4_used=_as_number(status.get("v4usingIPs")),
            v6_used=_as_number(status.get("v6usingIPs")),
        )

    def remove_subnet(self, subnet: str) -> None:
        with self._lock:
            old = self._subnet_labels.pop(subnet, None)
            if old is not None:
                self._remove_subnet_series(subnet, *old)

    def _remove_subnet_series(self, subnet: str, protocol: str, cidr: str) -> None:
        for gauge in (self.subnet_available_ip_count, self.subnet_used_ip_count):
            with contextlib.suppress(KeyError):
                gauge.remove(subnet, protocol, cidr)

    # --- request hooks --------------------------------------------------------------------------
    def observe_kube_request(self, verb: str, url: str, code: str, seconds: float) -> None:
        """`controller.kube.api.RequestObserver` for `KubeClient(on_request=...)`."""
        self.rest_client_requests.labels(code, verb, self._api_host).inc()
        self.rest_client_request_latency.labels(verb, url).observe(seconds)

    def observe_ovn_request(self, db: str, method: str, code: str, seconds: float) -> None:
        """OVN NB latency hook; kube-ovn records milliseconds and a code such as "0"/"1"."""
        self.ovs_client_request_latency.labels(db, method, code).observe(seconds * 1000.0)

    def observe_pod_handler(self, handler: str, result: str, seconds: float) -> None:
        self.pod_handler_duration.labels(handler, result).observe(seconds)

    # --- periodic loops -------------------------------------------------------------------------
    def inspection_run(self) -> None:
        self.pod_inspection_runs.inc()

    def inspection_repair(self, action: str) -> None:
        self.pod_inspection_repairs.labels(action).inc()

    def gc_run(self) -> None:
        self.gc_runs.inc()

    def gc_deleted_objects(self, resource: str, count: int = 1) -> None:
        if count > 0:
            self.gc_deleted.labels(resource).inc(count)

    def gc_added_objects(self, resource: str, count: int = 1) -> None:
        if count > 0:
            self.gc_added.labels(resource).inc(count)

    def event_dropped(self) -> None:
        """`on_drop` hook for `controller.kube.events.BackgroundEventRecorder`."""
        self.events_dropped.inc()


CheckResult = bool | tuple[bool, str]
Check = Callable[[], CheckResult]


def _run_check(check: Check | None) -> tuple[bool, str]:
    if check is None:
        return True, "ok"
    try:
        result = check()
    except Exception as exc:  # a broken probe must answer 503, not kill the server thread
        return False, f"check failed: {type(exc).__name__}: {exc}"
    if isinstance(result, tuple):
        ok, reason = result
        return bool(ok), reason or ("ok" if ok else "not ok")
    return bool(result), "ok" if result else "not ok"


def port_is_free(host: str, port: int) -> bool:
    """Whether `MetricsServer(..., port, host=host).start()` could bind now (see module doc)."""
    server_class = ThreadingHTTPServer
    with socket.socket(server_class.address_family, server_class.socket_type) as probe:
        # NOTE: the same options socketserver.TCPServer.server_bind sets before its bind; a bare
        # bind would be refused while an earlier run's connections sit in TIME-WAIT (~60 s).
        if server_class.allow_reuse_address:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if getattr(server_class, "allow_reuse_port", False) and hasattr(socket, "SO_REUSEPORT"):
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class MetricsServer:
    """HTTP endpoint for Prometheus scraping and kubelet probes."""

    def __init__(
        self,
        registry: CollectorRegistry,
        port: int,
        health_check: Check | None = None,
        ready_check: Check | None = None,
        *,
        host: str = "0.0.0.0",  # scraped by Prometheus from other nodes
        debug_flags: Mapping[str, Callable[[str], str]] | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"metrics port must be 0..65535, not {port}")
        self._registry = registry
        self._host = host
        self._requested_port = port
        self._health_check = health_check
        self._ready_check = ready_check
        self._debug_flags = dict(debug_flags or {})
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("metrics server is not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("metrics server already started")
        server = ThreadingHTTPServer((self._host, self._requested_port), self._handler_class())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            # A short poll interval keeps stop() prompt; the loop is otherwise idle.
            target=server.serve_forever,
            args=(0.1,),
            name="metrics-server",
            daemon=True,
        )
        self._thread.start()
        LOG.info("serving /metrics, /healthz and /readyz on %s:%d", self._host, self.port)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> MetricsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "kube-ovn-controller"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                    self._reply(200, encoder(outer._registry), content_type)
                elif path in ("/healthz", "/livez"):
                    self._probe(outer._health_check)
                elif path == "/readyz":
                    self._probe(outer._ready_check)
                else:
                    self._reply(404, b"not found\n", "text/plain; charset=utf-8")

            def do_PUT(self) -> None:
                path = self.path.split("?", 1)[0]
                prefix = "/debug/flags/"
                setter = (
                    outer._debug_flags.get(path[len(prefix) :]) if path.startswith(prefix) else None
                )
                if setter is None:
                    self._reply(404, b"not found\n", "text/plain; charset=utf-8")
                    return
                if self.client_address[0] not in LOOPBACK:
                    # The port is on the host network and unauthenticated: only someone on the
                    # node (kubectl exec, kubectl port-forward) may change how the process runs.
                    self._reply(403, b"only from localhost\n", "text/plain; charset=utf-8")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= MAX_FLAG_BODY:
                    self._reply(400, b"the body must be the new value\n", "text/plain")
                    return
                value = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    answer = setter(value)
                except ValueError as exc:
                    self._reply(400, f"{exc}\n".encode(), "text/plain; charset=utf-8")
                    return
                self._reply(200, f"{answer}\n".encode(), "text/plain; charset=utf-8")

            def _probe(self, check: Check | None) -> None:
                ok, reason = _run_check(check)
                body = (reason.splitlines()[0] if reason else "").encode() + b"\n"
                self._reply(200 if ok else 503, body, "text/plain; charset=utf-8")

            def _reply(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                # Probes hit every few seconds: keep them out of the default log.
                LOG.debug("metrics server: " + format, *args)

        return Handler
