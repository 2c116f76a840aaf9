"""`helm lint --strict` through Helm's Go SDK, with the default and with overridden values.

Helm's lint mode deliberately lets the templates' `fail` calls pass (it only logs them), so the
chart's cross-field checks are tested by rendering, in test_render.py.
"""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from tests.chart.helpers import CHART_DIR, NAMESPACE

WARNING = 2  # helm's lint severities: 1 info, 2 warning, 3 error

OVERRIDES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "single-replica": {"replicaCount": 1, "config": {"leader-elect": False}},
    "ssl-and-monitoring": {
        "ovn": {"nbAddr": "ssl:[10.0.0.1]:6641,ssl:[10.0.0.2]:6641", "ssl": {"enabled": True}},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    },
    "no-crds-no-rbac": {
        "crds": {"install": False},
        "rbac": {"create": False},
        "serviceAccount": {"create": False, "name": "ovn"},
    },
}


def _problems(report: dict[str, Any]) -> list[str]:
    return [
        f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= WARNING
    ] + list(report["errors"])


@pytest.mark.parametrize("values", OVERRIDES.values(), ids=OVERRIDES.keys())
def test_strict_lint_is_clean(values: dict[str, Any]) -> None:
    report = helm_python.lint(CHART_DIR, values, strict=True, namespace=NAMESPACE)
    assert report["total_charts_linted"] == 1
    assert _problems(report) == []


def test_lint_reports_values_the_schema_refuses() -> None:
    report = helm_python.lint(CHART_DIR, {"replicaCount": 0}, strict=True, namespace=NAMESPACE)
    assert any("/replicaCount" in problem for problem in _problems(report))


def test_chart_metadata(chart: helm_python.Chart) -> None:
    import configparser

    meta = chart.metadata
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == CHART_DIR.name
    setup = configparser.ConfigParser()
    setup.read(CHART_DIR.parents[1] / "setup.cfg", encoding="utf-8")
    # The image is tagged with appVersion by default: it must be the package's version.
    assert meta["appVersion"] == setup["metadata"]["version"]


def test_lint_for_the_oldest_supported_kubernetes() -> None:
    # Chart.yaml's kubeVersion floor: helm lint flags APIs deprecated or removed by that version.
    report = helm_python.lint(CHART_DIR, strict=True, namespace=NAMESPACE, kube_version="v1.25.0")
    assert _problems(report) == []
