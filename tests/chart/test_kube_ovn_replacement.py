"""The chart runs the controller the way kube-ovn runs kube-ovn-controller, and keeps kube-ovn's
monitoring working: the ServiceMonitor gives the series job="kube-ovn-controller"."""

from __future__ import annotations

import re

import helm_python
import pytest

from controller import config as controller_config
from tests.chart.helpers import (
    CHART_DIR,
    DOCKERFILE,
    NAMESPACE,
    Rendered,
    container,
    dockerfile_instructions,
    render,
)

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


def test_pod_runs_like_kube_ovns_controller(default_render: Rendered) -> None:
    pod = default_render.one("Deployment")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["priorityClassName"] == "system-cluster-critical"
    # kube-ovn's install.sh: any Linux node, control-plane taints and CriticalAddonsOnly tolerated
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == [
        {"effect": "NoSchedule", "operator": "Exists"},
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
    ]


def test_host_network_can_be_turned_off(chart: helm_python.Chart) -> None:
    pod = render(chart, {"hostNetwork": False}).one("Deployment")["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod and "dnsPolicy" not in pod


@pytest.mark.parametrize("db_ips", [["10.0.0.1", "10.0.0.2"], "10.0.0.1,10.0.0.2"])
def test_ovn_db_ips_reach_the_controller_as_kube_ovn_passes_them(
    chart: helm_python.Chart, db_ips: object
) -> None:
    rendered = render(chart, {"ovn": {"dbIps": db_ips}})
    c = container(rendered)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["OVN_DB_IPS"] == "10.0.0.1,10.0.0.2"
    environ = {"POD_NAME": "p", "KUBE_NAMESPACE": NAMESPACE, "OVN_DB_IPS": env["OVN_DB_IPS"]}
    cfg = controller_config.parse_args(c["args"], environ)
    assert cfg.ovn_nb_addr == "tcp:[10.0.0.1]:6641,tcp:[10.0.0.2]:6641"
    with_addr = render(chart, {"ovn": {"dbIps": db_ips, "nbAddr": "tcp:[10.0.0.9]:6641"}})
    assert "OVN_DB_IPS" not in {e["name"] for e in container(with_addr)["env"]}


def test_ovn_db_ips_are_validated(chart: helm_python.Chart) -> None:
    with pytest.raises(helm_python.HelmValuesError, match="dbIps"):
        render(chart, {"ovn": {"dbIps": ["not an ip"]}})


def test_each_crd_is_skipped_when_the_cluster_has_it_from_someone_else() -> None:
    # Helm's lookup finds nothing under `helm template` (the renders above), so each CRD
    # template is checked to guard itself by its own name.
    for path in sorted((CHART_DIR / "templates" / "crds").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        name = f"{path.stem}.kubeovn.io"
        assert text.startswith(f'{{{{- if include "kopc.installCrd" (list . "{name}") }}}}'), path
        assert f"name: {name}\n" in text
    helpers = (CHART_DIR / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    assert 'lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name' in helpers
    assert '"meta.helm.sh/release-name"' in helpers


def test_image_base_is_pinned_by_digest_and_has_the_c_json_parser() -> None:
    instructions = dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))
    (base,) = [i.words()[0] for i in instructions if i.name == "FROM"]
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", base), base
    runs = [i.args for i in instructions if i.name == "RUN"]
    assert any("python3-openvswitch" in r for r in runs)
    # the build fails when the parser cannot be loaded, instead of shipping the slow one
    assert any("enable_c_json_parser" in r for r in runs)
