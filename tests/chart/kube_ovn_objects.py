"""kube-ovn v1.8.18's own objects that look for its controller, as its install creates them: the
`kube-ovn-controller` Service (dist/images/install.sh) and ServiceMonitor
(dist/monitoring/controller-monitor.yaml), and what `kubectl ko` (dist/images/kubectl-ko:
checkDeployment, `kubectl logs -l app=kube-ovn-controller`) asks of the Deployment. Test data:
the chart must keep every one of them working after kube-ovn's Deployment is replaced.
"""

from __future__ import annotations

from typing import Any

CONTROLLER = "kube-ovn-controller"
POD_LABEL = {"app": CONTROLLER}


def service(namespace: str = "kube-system") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": CONTROLLER, "namespace": namespace, "labels": dict(POD_LABEL)},
        "spec": {"selector": dict(POD_LABEL), "ports": [{"port": 10660, "name": "metrics"}]},
    }


def service_monitor(
    namespace: str = "monitoring", target_namespace: str = "kube-system"
) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": CONTROLLER, "namespace": namespace},
        "spec": {
            "endpoints": [
                {
                    "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                    "interval": "15s",
                    "port": "metrics",
                }
            ],
            "namespaceSelector": {"matchNames": [target_namespace]},
            "selector": {"matchLabels": dict(POD_LABEL)},
        },
    }


def check_deployment(status: dict[str, Any]) -> bool:
    """kubectl-ko's checkDeployment: ready == updated == replicas == available (as strings, so
    an absent field is "" and fails unless all are absent)."""
    fields = ("readyReplicas", "updatedReplicas", "replicas", "availableReplicas")
    values = [str(status.get(f) or "") for f in fields]
    return len(set(values)) == 1 and values[0] not in ("", "0")


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
