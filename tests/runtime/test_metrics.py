"""Collector values read back from the registry, and the HTTP endpoints over real sockets."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from controller.runtime.metrics import ControllerMetrics, MetricsServer
from controller.runtime.queue_metrics import PrometheusMetricsProvider


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> ControllerMetrics:
    return ControllerMetrics(registry, api_host="10.96.0.1:443")


def _get(url: str, accept: str = "") -> tuple[int, str, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def test_subnet_gauges_follow_kube_ovn_protocol_rules(
    metrics: ControllerMetrics, registry: CollectorRegistry
) -> None:
    metrics.set_subnet_ip_counts(
        "dual",
        "Dual",
        "10.16.0.0/16,fd00::/112",
        v4_available=100,
        v6_available=40,
        v4_used=7,
        v6_used=9,
    )
    metrics.observe_subnet(
        {
            "metadata": {"name": "v6"},
            "spec": {"protocol": "IPv6", "cidrBlock": "fd01::/112"},
            "status": {"v4availableIPs": 0, "v6availableIPs": 65530.0, "v6usingIPs": 5},
        }
    )

    def value(metric: str, subnet: str, protocol: str, cidr: str) -> float | None:
        return registry.get_sample_value(
            metric, {"subnet_name": subnet, "protocol": protocol, "subnet_cidr": cidr}
        )

    assert value("subnet_available_ip_count", "dual", "Dual", "10.16.0.0/16,fd00::/112") == 40
    assert value("subnet_used_ip_count", "dual", "Dual", "10.16.0.0/16,fd00::/112") == 7
    assert value("subnet_available_ip_count", "v6", "IPv6", "fd01::/112") == 65530
    assert value("subnet_used_ip_count", "v6", "IPv6", "fd01::/112") == 5


def test_subnet_series_follow_cidr_changes_and_removal(
    metrics: ControllerMetrics, registry: CollectorRegistry
) -> None:
    counts = {"v4_available": 10, "v6_available": 0, "v4_used": 1, "v6_used": 0}
    metrics.set_subnet_ip_counts("net1", "IPv4", "10.1.0.0/24", **counts)
    metrics.set_subnet_ip_counts("net1", "IPv4", "10.1.0.0/16", **counts)

    old = {"subnet_name": "net1", "protocol": "IPv4", "subnet_cidr": "10.1.0.0/24"}
    new = {**old, "subnet_cidr": "10.1.0.0/16"}
    assert registry.get_sample_value("subnet_available_ip_count", old) is None
    assert registry.get_sample_value("subnet_available_ip_count", new) == 10

    metrics.remove_subnet("net1")
    metrics.remove_subnet("never-seen")
    assert registry.get_sample_value("subnet_available_ip_count", new) is None


def test_request_hooks_and_counters(
    metrics: ControllerMetrics, registry: CollectorRegistry
) -> None:
    url = "/api/v1/namespaces/{namespace}/pods/{name}"
    metrics.observe_kube_request("PATCH", url, "200", 0.003)
    metrics.observe_kube_request("PATCH", url, "404", 0.001)
    metrics.observe_ovn_request("OVN_Northbound", "transact", "0", 0.0025)
    metrics.inspection_run()
    metrics.inspection_repair("readd")
    metrics.gc_run()
    metrics.gc_deleted_objects("lsp", 3)
    metrics.gc_deleted_objects("ip", 0)
    metrics.event_dropped()
    metrics.observe_pod_handler("add", "success", 0.02)

    sample = registry.get_sample_value
    assert (
        sample(
            "rest_client_requests_total",
            {"code": "200", "method": "PATCH", "host": "10.96.0.1:443"},
        )
        == 1
    )
    assert sample("rest_client_request_latency_seconds_count", {"verb": "PATCH", "url": url}) == 2
    assert (
        sample(
            "rest_client_request_latency_seconds_bucket",
            {"verb": "PATCH", "url": url, "le": "0.002"},
        )
        == 1
    )
    ovs = {"db": "OVN_Northbound", "method": "transact", "code": "0"}
    assert sample("ovs_client_request_latency_milliseconds_sum", ovs) == pytest.approx(2.5)
    assert sample("ovs_client_request_latency_milliseconds_bucket", {**ovs, "le": "2.0"}) == 0
    assert sample("ovs_client_request_latency_milliseconds_bucket", {**ovs, "le": "4.0"}) == 1
    assert sample("kube_ovn_controller_pod_inspection_runs_total") == 1
    assert sample("kube_ovn_controller_pod_inspection_repairs_total", {"action": "readd"}) == 1
    assert sample("kube_ovn_controller_gc_runs_total") == 1
    assert sample("kube_ovn_controller_gc_deleted_total", {"resource": "lsp"}) == 3
    assert sample("kube_ovn_controller_gc_deleted_total", {"resource": "ip"}) is None
    assert sample("kube_ovn_controller_events_dropped_total") == 1
    assert (
        sample(
            "kube_ovn_controller_pod_handler_duration_seconds_count",
            {"handler": "add", "result": "success"},
        )
        == 1
    )


def test_one_registry_holds_workqueue_metrics_too(registry: CollectorRegistry) -> None:
    queue_metrics = PrometheusMetricsProvider(registry)
    metrics = ControllerMetrics(registry)
    queue_metrics.new_depth_metric("AddOrUpdatePod").inc()
    metrics.gc_run()

    assert registry.get_sample_value("workqueue_depth", {"name": "AddOrUpdatePod"}) == 1
    assert registry.get_sample_value("kube_ovn_controller_gc_runs_total") == 1


@dataclass
class Probes:
    healthy: bool = True
    ready: tuple[bool, str] = (False, "informers not synced")


@pytest.fixture
def probes() -> Probes:
    return Probes()


@pytest.fixture
def server(registry: CollectorRegistry, probes: Probes) -> Iterator[MetricsServer]:
    srv = MetricsServer(registry, 0, lambda: probes.healthy, lambda: probes.ready, host="127.0.0.1")
    with srv:
        yield srv


def test_metrics_endpoint_serves_prometheus_text(
    server: MetricsServer, metrics: ControllerMetrics
) -> None:
    metrics.gc_deleted_objects("lsp", 2)
    status, ctype, body = _get(f"http://127.0.0.1:{server.port}/metrics")

    assert status == 200
    assert ctype.startswith("text/plain")
    assert 'kube_ovn_controller_gc_deleted_total{resource="lsp"} 2.0' in body

    status, ctype, body = _get(
        f"http://127.0.0.1:{server.port}/metrics", accept="application/openmetrics-text"
    )
    assert status == 200 and ctype.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")


def test_health_and_readiness_probes(server: MetricsServer, probes: Probes) -> None:
    base = f"http://127.0.0.1:{server.port}"
    assert _get(f"{base}/healthz")[::2] == (200, "ok\n")
    assert _get(f"{base}/readyz")[::2] == (503, "informers not synced\n")

    probes.ready = (True, "")
    probes.healthy = False
    assert _get(f"{base}/readyz")[::2] == (200, "ok\n")
    assert _get(f"{base}/healthz")[::2] == (503, "not ok\n")
    assert _get(f"{base}/nope")[0] == 404


def test_a_raising_probe_answers_503(registry: CollectorRegistry) -> None:
    def broken() -> bool:
        raise RuntimeError("leader election lost\nsecond line")

    with MetricsServer(registry, 0, ready_check=broken, host="127.0.0.1") as srv:
        status, _, body = _get(f"http://127.0.0.1:{srv.port}/readyz")
        assert status == 503
        assert body == "check failed: RuntimeError: leader election lost\n"
        assert _get(f"http://127.0.0.1:{srv.port}/healthz")[0] == 200


def test_server_lifecycle(registry: CollectorRegistry) -> None:
    srv = MetricsServer(registry, 0, host="127.0.0.1")
    with pytest.raises(RuntimeError):
        _ = srv.port
    srv.start()
    port = srv.port
    with pytest.raises(RuntimeError):
        srv.start()
    srv.stop()
    srv.stop()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
    with pytest.raises(ValueError):
        MetricsServer(registry, 70000)
