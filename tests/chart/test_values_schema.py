"""values.schema.json: Helm's Go validator rejects bad values."""

from __future__ import annotations

from typing import Any

import helm_python
import jsonschema
import pytest
import yaml

from tests.chart.helpers import CHART_DIR, load_json

BAD_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "negative-replicas": ({"replicaCount": -1}, "/replicaCount"),
    "zero-replicas": ({"replicaCount": 0}, "/replicaCount"),
    "string-replicas": ({"replicaCount": "3"}, "/replicaCount"),
    "unknown-top-level-key": ({"replicas": 3}, "replicas"),
    "unknown-config-flag": ({"config": {"worker-number": 3}}, "worker-number"),
    "chart-owned-flag-in-config": (
        {"config": {"ovn-nb-addr": "tcp:[1.2.3.4]:6641"}},
        "ovn-nb-addr",
    ),
    "lease-namespace-in-config": (
        {"config": {"leader-elect-resource-namespace": "other"}},
        "leader-elect-resource-namespace",
    ),
    "network-type-enum": ({"config": {"network-type": "vxlan"}}, "/config/network-type"),
    "pod-nic-type-enum": ({"config": {"pod-nic-type": "macvlan"}}, "/config/pod-nic-type"),
    "log-level-enum": ({"config": {"log-level": "trace"}}, "/config/log-level"),
    "worker-num-minimum": ({"config": {"worker-num": 0}}, "/config/worker-num"),
    "vlan-id-range": ({"config": {"default-vlan-id": 4096}}, "/config/default-vlan-id"),
    "bool-as-string": ({"config": {"leader-elect": "yes"}}, "/config/leader-elect"),
    "bad-duration": ({"config": {"gc-interval": "6 minutes"}}, "/config/gc-interval"),
    "zero-duration": ({"config": {"inspect-interval": 0}}, "/config/inspect-interval"),
    "three-cidrs": (
        {"config": {"default-cidr": ["10.0.0.0/8", "fd00::/64", "10.1.0.0/16"]}},
        "/config/default-cidr",
    ),
    "nb-addr-without-port": ({"ovn": {"nbAddr": "tcp:10.0.0.1"}}, "/ovn/nbAddr"),
    "nb-addr-bad-scheme": ({"ovn": {"nbAddr": "http://10.0.0.1:6641"}}, "/ovn/nbAddr"),
    "ssl-unknown-key": ({"ovn": {"ssl": {"enable": True}}}, "enable"),
    "metrics-port-range": ({"metrics": {"port": 70000}}, "/metrics/port"),
    "pull-policy-enum": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    "bad-digest": ({"image": {"digest": "latest"}}, "/image/digest"),
    "root-pod": ({"podSecurityContext": {"runAsNonRoot": False}}, "/podSecurityContext"),
    "privileged": ({"securityContext": {"privileged": True}}, "/securityContext"),
    "probe-unknown-field": ({"livenessProbe": {"period": 3}}, "period"),
    "resources-unknown-key": ({"resources": {"request": {"cpu": "1"}}}, "request"),
    "bad-quantity": ({"resources": {"limits": {"memory": "1 GB"}}}, "/resources/limits/memory"),
    "service-monitor-interval": (
        {"serviceMonitor": {"enabled": True, "interval": "fast"}},
        "/serviceMonitor/interval",
    ),
    "crds-install-string": ({"crds": {"install": "true"}}, "/crds/install"),
    "extra-args-not-strings": ({"extraArgs": [1]}, "/extraArgs/0"),
}

GOOD_VALUES: dict[str, dict[str, Any]] = {
    "numeric-durations": {"config": {"gc-interval": 360, "leader-elect-retry-period": 2.5}},
    "compound-duration": {"config": {"gc-interval": "1h30m"}},
    "null-leaves-default": {"config": {"default-cidr": None, "worker-num": None}},
    "dual-stack-list": {"config": {"default-cidr": ["10.16.0.0/16", "fd00:10:16::/64"]}},
    "exclude-ranges": {"config": {"default-exclude-ips": "10.16.0.1..10.16.0.9,10.16.0.20"}},
    "unix-nb": {"ovn": {"nbAddr": "unix:/run/ovn/ovnnb_db.sock"}},
    "ipv6-nb": {"ovn": {"nbAddr": "tcp:[fd00::1]:6641,tcp:[fd00::2]:6641"}},
    "hostname-nb": {"ovn": {"nbAddr": "tcp:ovn-nb.kube-system.svc:6641"}},
    "numeric-quantity": {"resources": {"limits": {"cpu": 2}}},
}


@pytest.mark.parametrize(("values", "where"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
def test_schema_rejects(chart: helm_python.Chart, values: dict[str, Any], where: str) -> None:
    with pytest.raises(helm_python.HelmValuesError) as caught:
        chart.validate_schema(chart.merge_values(values))
    assert where in str(caught.value)


@pytest.mark.parametrize("values", GOOD_VALUES.values(), ids=GOOD_VALUES.keys())
def test_schema_accepts(chart: helm_python.Chart, values: dict[str, Any]) -> None:
    chart.validate_schema(chart.merge_values(values))


def test_render_refuses_values_the_schema_rejects(chart: helm_python.Chart) -> None:
    # The schema guards `helm template/install/upgrade`, not only an explicit validation.
    with pytest.raises(helm_python.HelmValuesError, match="/replicaCount"):
        chart.render(values={"replicaCount": -1}, name="kopc", namespace="kube-system")


def test_defaults_are_valid_for_a_second_validator() -> None:
    # Python's jsonschema as well as Helm's Go validator: the schema is plain draft-07.
    schema = load_json(CHART_DIR / "values.schema.json")
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(defaults)


def test_every_default_value_is_described_by_the_schema() -> None:
    schema = load_json(CHART_DIR / "values.schema.json")
    defaults = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert set(defaults) <= set(schema["properties"])
    assert set(defaults["config"]) == set(schema["properties"]["config"]["properties"])
