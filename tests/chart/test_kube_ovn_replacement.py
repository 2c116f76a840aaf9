"""The chart runs the controller the way kube-ovn runs kube-ovn-controller, and keeps kube-ovn's
monitoring working: the ServiceMonitor gives the series job="kube-ovn-controller"."""

from __future__ import annotations

import re
from typing import Any

import helm_python
import pytest

from controller import config as controller_config
from tests.chart import kube_ovn_objects as kube_ovn
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


# --- kube-ovn's tooling finds this controller (kube-ovn v1.8.18 install.sh, kubectl-ko) ----------


def test_deployment_and_pods_carry_kube_ovns_names(default_render: Rendered) -> None:
    # kubectl-ko and kube-ovn's Service look for these names and the `app` label
    deployment = default_render.one("Deployment")
    assert deployment["metadata"]["name"] == kube_ovn.CONTROLLER  # kubectl-ko checkDeployment
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert {"app": "kube-ovn-controller", "component": "network", "type": "infra"}.items() <= (
        labels.items()
    )
    assert labels["app.kubernetes.io/name"] == "kube-ovn-pod-controller"  # the chart's own too
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_kube_ovns_service_and_service_monitor_select_the_pods(default_render: Rendered) -> None:
    # kube-ovn's Service (selector app=kube-ovn-controller) must find our pods as endpoints
    pod = default_render.one("Deployment")["spec"]["template"]
    theirs = kube_ovn.service()
    assert kube_ovn.selects(theirs["spec"]["selector"], pod["metadata"]["labels"])
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports[theirs["spec"]["ports"][0]["name"]] == theirs["spec"]["ports"][0]["port"]
    monitor = kube_ovn.service_monitor()
    assert kube_ovn.selects(
        monitor["spec"]["selector"]["matchLabels"], theirs["metadata"]["labels"]
    )


def test_the_charts_service_and_monitor_are_kube_ovns(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"serviceMonitor": {"enabled": True}})
    service, monitor = rendered.one("Service"), rendered.one("ServiceMonitor")
    theirs = kube_ovn.service()
    assert service["metadata"]["name"] == theirs["metadata"]["name"]
    assert service["spec"]["selector"] == theirs["spec"]["selector"]
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("metrics", 10660)]
    assert service["metadata"]["labels"]["app"] == "kube-ovn-controller"
    assert monitor["metadata"]["name"] == "kube-ovn-controller"
    assert monitor["spec"]["selector"]["matchLabels"] == {"app": "kube-ovn-controller"}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    # job="kube-ovn-controller" either way: from the label on ours, the Service name on theirs
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "kube-ovn-controller"


def test_an_empty_controller_name_keeps_the_release_names(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"controllerName": ""})
    deployment = rendered.one("Deployment")
    assert deployment["metadata"]["name"] == "kopc-kube-ovn-pod-controller"
    assert "app" not in deployment["spec"]["template"]["metadata"]["labels"]
    selector = rendered.one("Service")["spec"]["selector"]
    assert selector == deployment["spec"]["selector"]["matchLabels"]


def test_the_service_can_be_left_to_kube_ovns_install(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"service": {"enabled": False}})
    assert rendered.of_kind("Service") == []
    assert "port-forward deployment/kube-ovn-controller" in rendered.notes


NOTES_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "service": ({}, "the ovn-nb Service of namespace kube-system (tcp:"),
    "ssl-service": (
        {"ovn": {"ssl": {"enabled": True}}},
        "the ovn-nb Service of namespace kube-system (ssl:",
    ),
    "db-ips": (
        {"ovn": {"dbIps": ["10.0.0.1", "10.0.0.2"]}},
        "tcp:[<ip>]:6641 of each of OVN_DB_IPS 10.0.0.1,10.0.0.2",
    ),
    "db-ips-string-ssl": (
        {"ovn": {"dbIps": "10.0.0.1", "ssl": {"enabled": True}}},
        "ssl:[<ip>]:6641 of each of OVN_DB_IPS 10.0.0.1",
    ),
    "nb-addr": ({"ovn": {"nbAddr": "tcp:[10.0.0.9]:6641"}}, "OVN northbound: tcp:[10.0.0.9]:6641."),
}


@pytest.mark.parametrize("case", list(NOTES_CASES))
def test_notes_say_where_the_controller_connects(chart: helm_python.Chart, case: str) -> None:
    # with ovn.dbIps set the controller connects to those addresses, not the ovn-nb Service
    values, expected = NOTES_CASES[case]
    notes = render(chart, values).notes
    assert expected in notes, notes
    if case not in {"service", "ssl-service"}:
        assert "ovn-nb Service" not in notes, notes


def test_notes_list_every_crd_the_chart_installs(default_render: Rendered) -> None:
    # security-groups and the two kube-ovn CRDs are in the list too
    notes = " ".join(default_render.notes.split())
    crds = sorted(
        c["spec"]["names"]["plural"] for c in default_render.of_kind("CustomResourceDefinition")
    )
    listed = re.search(r"The kubeovn.io CRDs \(([^)]*)\)", notes)
    assert listed, notes
    assert sorted(n.strip() for n in listed.group(1).split(",")) == crds
    assert "rollout status deployment/kube-ovn-controller" in notes
    assert "ConfigMap kube-system/ovn-config" in notes


def test_notes_without_leader_election_name_no_lease(chart: helm_python.Chart) -> None:
    values = {"replicaCount": 1, "config": {"leader-elect": False}}
    notes = render(chart, values).notes
    assert "lease" not in notes.lower() and "who leads" not in notes
    assert "who leads" in render(chart).notes
