"""`helm template` via Helm's Go SDK: every manifest valid for Kubernetes, values wired right."""

from __future__ import annotations

from typing import Any

import helm_python
import jsonschema
import pytest

from tests.chart.helpers import (
    NAMESPACE,
    RELEASE,
    SERVICEMONITOR_SCHEMA,
    Rendered,
    container,
    flags,
    load_json,
    render,
    validate_k8s,
)

FULLNAME = f"{RELEASE}-kube-ovn-pod-controller"
CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition")

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything-on": {
        "image": {"registry": "registry.example:5000", "tag": "dev", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "pull"}],
        "config": {
            "default-cidr": ["10.16.0.0/16", "fd00:10:16::/64"],
            "node-switch-cidr": "100.64.0.0/16,fd00:100:64::/64",
            "default-exclude-ips": ["10.16.0.1..10.16.0.10", "10.16.0.20"],
            "network-type": "vlan",
            "default-interface-name": "eth1",
            "worker-num": 8,
            "gc-interval": 90,
            "log-format": "json",
        },
        "extraArgs": ["--log-level=debug"],
        "ovn": {"nbAddr": "ssl:[10.0.0.1]:6641", "ssl": {"enabled": True}},
        "service": {"ipFamilyPolicy": "PreferDualStack", "annotations": {"a": "b"}},
        "serviceMonitor": {
            "enabled": True,
            "scrapeTimeout": "10s",
            "labels": {"release": "prometheus"},
            "relabelings": [{"action": "labeldrop", "regex": "pod"}],
        },
        "serviceAccount": {"annotations": {"team": "net"}},
        "priorityClassName": "system-cluster-critical",
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "podAnnotations": {"x": "y"},
        "podLabels": {"tier": "infra"},
        "extraEnv": [{"name": "EXTRA", "value": "1"}],
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    },
    "minimal": {
        "replicaCount": 1,
        "config": {"leader-elect": False},
        "crds": {"install": False},
        "rbac": {"create": False},
        "serviceAccount": {"create": False, "name": "ovn"},
        "podDisruptionBudget": {"enabled": False},
        "resources": {},
        "nodeSelector": {},
    },
}


def _validate(manifest: dict[str, Any]) -> None:
    if manifest["kind"] == "ServiceMonitor":
        # NOTE: kubernetes-validate has no schema for the Prometheus operator's CRD kinds.
        jsonschema.validate(manifest, load_json(SERVICEMONITOR_SCHEMA))
    else:
        validate_k8s(manifest)


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_manifest_is_valid_for_kubernetes(
    chart: helm_python.Chart, values: dict[str, Any]
) -> None:
    rendered = render(chart, values)
    assert rendered.manifests
    for manifest in rendered.manifests:
        _validate(manifest)
        name = manifest["metadata"]["name"]
        assert len(name) <= 63, name
        if manifest["kind"] not in CLUSTER_SCOPED:
            assert manifest["metadata"]["namespace"] == NAMESPACE, name


def test_the_validator_rejects_an_invalid_manifest(default_render: Rendered) -> None:
    # The check above must be able to fail: a misspelt field in a strict schema does.
    import kubernetes_validate

    deployment = dict(default_render.one("Deployment"))
    deployment["spec"] = {**deployment["spec"], "replica": 3}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_k8s(deployment)


def test_the_service_monitor_schema_rejects_a_misspelt_field(chart: helm_python.Chart) -> None:
    monitor = render(chart, {"serviceMonitor": {"enabled": True}}).one("ServiceMonitor")
    endpoint = {**monitor["spec"]["endpoints"][0], "intervall": "15s"}
    bad = {**monitor, "spec": {**monitor["spec"], "endpoints": [endpoint]}}
    with pytest.raises(jsonschema.ValidationError, match="intervall"):
        _validate(bad)


def test_default_objects(default_render: Rendered) -> None:
    assert default_render.kinds() == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            *["CustomResourceDefinition"] * 7,
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )


def test_minimal_values_leave_out_the_optional_objects(chart: helm_python.Chart) -> None:
    rendered = render(chart, VALUE_SETS["minimal"])
    assert rendered.kinds() == ["Deployment", "Service"]
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "ovn"
    assert flags(container(rendered)["args"])["leader-elect"] == "false"


def test_deployment_defaults(default_render: Rendered) -> None:
    deployment = default_render.one("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 3
    pod_labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= pod_labels.items()

    anti = pod["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti
    (term,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = term["podAffinityTerm"]["labelSelector"]
    assert selector["matchLabels"] == spec["selector"]["matchLabels"]

    assert pod["serviceAccountName"] == FULLNAME
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}

    c = container(default_render)
    assert c["image"] == "kube-ovn-pod-controller:0.1.0"  # the chart's appVersion
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"] == {
        "requests": {"cpu": "200m", "memory": "200Mi"},
        "limits": {"cpu": "1000m", "memory": "1Gi"},
    }
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/tmp"}


def test_downward_api_env(default_render: Rendered) -> None:
    env = {e["name"]: e for e in container(default_render)["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["KUBE_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert "ENABLE_SSL" not in env


def test_probes_and_port(default_render: Rendered) -> None:
    c = container(default_render)
    assert c["ports"] == [{"name": "metrics", "containerPort": 10660, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    service = default_render.one("Service")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 10660, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pod_labels = default_render.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_default_args(default_render: Rendered) -> None:
    assert flags(container(default_render)["args"]) == {
        "metrics-addr": "0.0.0.0",
        "metrics-port": "10660",
        "ovn-timeout": "60",
        "default-ls": "ovn-default",
        "default-cidr": "10.16.0.0/16",
        "cluster-router": "ovn-cluster",
        "node-switch": "join",
        "node-switch-cidr": "100.64.0.0/16",
        "network-type": "geneve",
        "default-provider-name": "provider",
        "default-vlan-name": "ovn-vlan",
        "default-vlan-id": "1",
        "pod-nic-type": "veth-pair",
        "enable-eip-snat": "true",
        "keep-vm-ip": "false",
        "enable-subnet-controller": "true",
        "enable-namespace-controller": "true",
        "enable-node-controller": "true",
        "worker-num": "3",
        "inspect-interval": "20s",
        "gc-interval": "6m",
        "routing-resync-period": "1m",
        "leader-elect": "true",
        # kube-ovn v1.8.18's timings (pkg/controller/election.go)
        "leader-elect-lease-duration": "15s",
        "leader-elect-renew-deadline": "10s",
        "leader-elect-retry-period": "2s",
        "leader-elect-resource-name": "kube-ovn-controller",
        "log-level": "info",
    }


def test_config_values_render_as_go_style_flags(chart: helm_python.Chart) -> None:
    values = {
        "config": {
            "default-cidr": ["10.16.0.0/16", "fd00:10:16::/64"],
            "default-gateway": "",  # "" and null leave the controller's derived default
            "default-exclude-ips": None,
            "ovn-timeout": 1000000,  # no 1e+06: YAML numbers are floats inside Helm
            "gc-interval": 0.5,
            "keep-vm-ip": True,
        },
        "extraArgs": ["--some-new-flag=x"],
        "metrics": {"port": 9999},
        "ovn": {"nbAddr": "tcp:[10.0.0.1]:6641,tcp:[10.0.0.2]:6641"},
    }
    rendered = render(chart, values)
    args = container(rendered)["args"]
    assert args[-1] == "--some-new-flag=x"
    got = flags(args)
    assert got["default-cidr"] == "10.16.0.0/16,fd00:10:16::/64"
    assert "default-gateway" not in got
    assert "default-exclude-ips" not in got
    assert got["ovn-timeout"] == "1000000"
    assert got["gc-interval"] == "0.5"
    assert got["keep-vm-ip"] == "true"
    assert got["ovn-nb-addr"] == "tcp:[10.0.0.1]:6641,tcp:[10.0.0.2]:6641"
    assert got["metrics-port"] == "9999"
    assert container(rendered)["ports"][0]["containerPort"] == 9999
    assert rendered.one("Service")["spec"]["ports"][0]["port"] == 9999


def test_ssl_secret_is_mounted_and_passed(chart: helm_python.Chart) -> None:
    values = {
        "ovn": {
            "nbAddr": "ssl:[10.0.0.1]:6641",
            "ssl": {"enabled": True, "secretName": "nb-tls", "caKey": "ca.crt"},
        }
    }
    rendered = render(chart, values)
    c = container(rendered)
    got = flags(c["args"])
    assert got["ovn-nb-addr"] == "ssl:[10.0.0.1]:6641"
    assert got["ovn-nb-ssl-key"] == "/var/run/tls/key"
    assert got["ovn-nb-ssl-cert"] == "/var/run/tls/cert"
    assert got["ovn-nb-ssl-ca"] == "/var/run/tls/ca.crt"
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["ovn-tls"] == {"name": "ovn-tls", "mountPath": "/var/run/tls", "readOnly": True}
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret = volumes["ovn-tls"]["secret"]
    assert secret["secretName"] == "nb-tls"
    assert secret["defaultMode"] == 0o440
    assert [i["key"] for i in secret["items"]] == ["key", "cert", "ca.crt"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["ENABLE_SSL"] == "true"


def test_ssl_without_nb_addr_lets_the_controller_use_the_service(chart: helm_python.Chart) -> None:
    rendered = render(chart, {"ovn": {"ssl": {"enabled": True}}})
    got = flags(container(rendered)["args"])
    assert "ovn-nb-addr" not in got
    assert got["ovn-nb-ssl-key"] == "/var/run/tls/key"


def test_image_reference(chart: helm_python.Chart) -> None:
    digest = "sha256:" + "ab" * 32
    cases = {
        "r.example/t/kopc:v1": {"registry": "r.example/t/", "repository": "kopc", "tag": "v1"},
        f"kopc@{digest}": {"repository": "kopc", "tag": "v1", "digest": digest},
    }
    for want, image in cases.items():
        assert container(render(chart, {"image": image}))["image"] == want


def test_service_monitor_only_when_enabled(
    chart: helm_python.Chart, default_render: Rendered
) -> None:
    assert default_render.of_kind("ServiceMonitor") == []
    rendered = render(chart, {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}})
    monitor = rendered.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s"}
    service_labels = rendered.one("Service")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


def test_pod_disruption_budget_only_with_standbys(chart: helm_python.Chart) -> None:
    assert render(chart).one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    single = render(chart, {"replicaCount": 1, "config": {"leader-elect": False}})
    assert single.of_kind("PodDisruptionBudget") == []


def test_custom_affinity_replaces_the_default(chart: helm_python.Chart) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kube-ovn/role", "operator": "Exists"}]}
                ]
            }
        }
    }
    rendered = render(chart, {"affinity": affinity})
    assert rendered.one("Deployment")["spec"]["template"]["spec"]["affinity"] == affinity


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": 2, "config": {"leader-elect": False}}, "leader-elect"),
        ({"ovn": {"nbAddr": "tcp:[10.0.0.1]:6641", "ssl": {"enabled": True}}}, "ssl: remotes"),
        ({"ovn": {"nbAddr": "ssl:[10.0.0.1]:6641"}}, "ovn.ssl.enabled"),
        ({"config": {"network-type": "vlan"}}, "default-interface-name"),
        ({"serviceAccount": {"create": False}}, "serviceAccount.name"),
    ],
    ids=["standbys-without-election", "ssl-with-tcp", "ssl-remote-without-secret", "vlan", "sa"],
)
def test_inconsistent_values_fail_the_render(
    chart: helm_python.Chart, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm_python.HelmError, match=message):
        render(chart, values)


def test_notes_name_the_nb_source(chart: helm_python.Chart, default_render: Rendered) -> None:
    assert "ovn-nb Service" in default_render.notes
    notes = render(chart, {"ovn": {"nbAddr": "tcp:[10.0.0.9]:6641"}}).notes
    assert "tcp:[10.0.0.9]:6641" in notes
    assert "ovn-nb Service" not in notes
