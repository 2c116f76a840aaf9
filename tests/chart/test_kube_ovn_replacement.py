"""The chart runs the controller the way kube-ovn runs kube-ovn-controller, and keeps kube-ovn's
monitoring working: the ServiceMonitor gives the series job="kube-ovn-controller"."""

from __future__ import annotations

import helm_python

from tests.chart.helpers import render

JOB_LABEL = "kube-ovn-pod-controller/job"


def test_service_monitor_produces_kube_ovns_job_label(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"serviceMonitor": {"enabled": True}})
    monitor = rendered.one("ServiceMonitor")
    service = rendered.one("Service")
    # The Prometheus operator sets `job` to the value of the Service label named by jobLabel.
    assert monitor["spec"]["jobLabel"] == JOB_LABEL
    assert service["metadata"]["labels"][JOB_LABEL] == "kube-ovn-controller"


def test_an_empty_job_name_falls_back_to_the_chart_name(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"serviceMonitor": {"enabled": True, "jobName": ""}})
    assert rendered.one("ServiceMonitor")["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert JOB_LABEL not in rendered.one("Service")["metadata"]["labels"]
