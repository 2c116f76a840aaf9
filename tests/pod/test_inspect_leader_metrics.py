"""inspect_pods, leader gating and the controller's metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controller.core.object_fields import format_time
from controller.runtime.metrics import ControllerMetrics
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from tests.pod.env import NODE, Env, raw_pod, standard_env


def test_inspection_recreates_a_lost_port_with_the_same_address(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE))
    env.converge()
    mac = env.annotations("default/web")["ovn.kubernetes.io/mac_address"]
    env.nb.delete_port("web.default")  # e.g. NB restored from an old backup
    env.controller.inspect_pods()
    got = env.annotations("default/web")
    assert "ovn.kubernetes.io/allocated" not in got and "ovn.kubernetes.io/routed" not in got
    assert len(env.queues.add) == 1
    # The add may run on the cache from before the reset (a no-op): the informer's update
    # event then brings the pod back to the add queue.
    env.process(env.queues.add)
    assert env.nb.get_port("web.default") is None
    env.converge()
    port = env.nb.get_port("web.default")
    assert port is not None and port.addresses == (f"{mac.lower()} 10.16.0.2",)
    got = env.annotations("default/web")
    assert got["ovn.kubernetes.io/routed"] == "true"


def test_inspection_reroutes_an_unrouted_pod(env: Env) -> None:
    env.create_pod(raw_pod("web"))  # not scheduled: its add allocates, nothing routes it yet
    env.process(env.queues.add)
    env.sync_all()
    env.edit_pod("default/web", lambda o: o["spec"].__setitem__("nodeName", NODE))
    env.drain(env.queues.update)  # the update event was lost (leader change)
    assert "ovn.kubernetes.io/routed" not in env.annotations("default/web")
    env.controller.inspect_pods()
    assert env.drain(env.queues.update) == ["default/web"]


def test_inspection_leaves_terminating_and_healthy_pods_alone(env: Env) -> None:
    env.create_pod(raw_pod("web", node=NODE))
    env.create_pod(raw_pod("old", node=NODE, terminationGracePeriodSeconds=600))
    env.converge()
    env.edit_pod(
        "default/old",
        lambda o: o["metadata"].__setitem__("deletionTimestamp", format_time(env.now)),
    )
    env.nb.delete_port("old.default")  # its delete may already have run
    env.controller.inspect_pods()
    assert all(len(q) == 0 for q in env.queues.all())
    assert env.annotations("default/old")["ovn.kubernetes.io/allocated"] == "true"


def test_non_leader_enqueues_nothing(env: Env) -> None:
    env.leader = False
    env.create_pod(raw_pod("web", node=NODE))
    env.sync_all()
    env.remove_pod("default/web")
    assert all(len(q) == 0 and q.pending() == 0 for q in env.queues.all())
    assert env.controller.pending_deletes() == {}
    env.leader = True
    env.create_pod(raw_pod("db", node=NODE))
    assert env.drain(env.queues.add) == ["default/db"]


def test_metrics_handler_durations_and_inspection() -> None:
    registry = CollectorRegistry()
    env = standard_env(
        metrics=ControllerMetrics(registry), queue_metrics=PrometheusMetricsProvider(registry)
    )
    try:
        env.create_pod(raw_pod("web", node=NODE, annotations={"ovn.kubernetes.io/ip_address": "x"}))
        # bound at once: its add routes it too; "late" is bound after its add, so routing is
        # left to UpdatePod
        env.create_pod(raw_pod("ok", node=NODE))
        env.create_pod(raw_pod("late"))
        env.converge()
        env.edit_pod("default/late", lambda o: o["spec"].__setitem__("nodeName", NODE))
        env.converge()
        env.controller.inspect_pods()

        def count(handler: str, result: str) -> float:
            value = registry.get_sample_value(
                "kube_ovn_controller_pod_handler_duration_seconds_count",
                {"handler": handler, "result": result},
            )
            return value or 0.0

        assert count("AddPod", "success") == 2
        assert count("AddPod", "drop") == 1
        assert count("UpdatePod", "success") == 1
        assert registry.get_sample_value("kube_ovn_controller_pod_inspection_runs_total") == 1
        # client-go's workqueue family, by kube-ovn's queue names, on the same registry.
        assert registry.get_sample_value("workqueue_adds_total", {"name": "AddPod"}) == 3
        assert registry.get_sample_value("workqueue_adds_total", {"name": "UpdatePod"}) == 1
        assert registry.get_sample_value("workqueue_depth", {"name": "AddPod"}) == 0
    finally:
        env.close()


def test_inspection_finds_a_port_the_vendor_listing_misses(env: Env) -> None:
    # inspect reads the kube-ovn ports once per pass; a pod's port outside that listing (here:
    # its vendor id dropped by hand) still exists and must not be re-allocated.
    env.create_pod(raw_pod("web", node=NODE))
    env.create_pod(raw_pod("api", node=NODE))
    env.converge()
    del env.nb.state.ports["web.default"].external_ids["vendor"]
    assert "web.default" not in {p.name for p in env.nb.list_ports()}
    env.controller.inspect_pods()
    assert all(len(q) == 0 for q in env.queues.all())
    assert env.annotations("default/web")["ovn.kubernetes.io/allocated"] == "true"
    assert env.annotations("default/api")["ovn.kubernetes.io/allocated"] == "true"
