"""Readiness probes run by the sandbox kubelet on the data plane, as the real kubelet runs them:
an exec probe in the pod's network namespace (here a ping of the node's ovn0, which proves the
node <-> pod route), an httpGet probe from the node's namespace to the pod's IP. The pod is
Ready only once its probe passes; a failing probe leaves it Running, not Ready, with an
`Unhealthy` Warning."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.dataplane.helpers import NS, Net
from tests.e2e.helpers import NODE, wait_for


def _create(net: Net, name: str, probe: dict[str, Any]) -> None:
    spec = {
        "containers": [{"name": "app", "image": "busybox", "readinessProbe": probe}],
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 0,
    }
    net.cluster.server.store.create(
        "pods", {"metadata": {"name": name, "namespace": NS}, "spec": spec}
    )


def _ready(net: Net, name: str) -> str:
    pod = net.cluster.server.store.get("pods", NS, name)
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return str(condition["status"])
    return ""


def test_an_exec_probe_runs_in_the_pods_namespace(net: Net) -> None:
    ovn0 = net.node_ip(NODE)
    _create(
        net, "probe-ok", {"exec": {"command": ["ping", "-c1", "-W1", ovn0]}, "periodSeconds": 1}
    )
    pod = net.started("probe-ok")
    wait_for(lambda: _ready(net, "probe-ok") == "True", timeout=20, message="probe-ok Ready")
    net.delete(pod)


def test_a_failing_probe_keeps_the_pod_not_ready_with_an_unhealthy_event(net: Net) -> None:
    _create(
        net,
        "probe-bad",
        {"exec": {"command": ["ping", "-c1", "-W1", "192.0.2.1"]}, "periodSeconds": 1},
    )
    pod = net.started("probe-bad")

    def unhealthy() -> list[dict[str, Any]]:
        return [
            e
            for e in net.cluster.server.store.list("events", NS)
            if e["involvedObject"]["name"] == "probe-bad" and e["reason"] == "Unhealthy"
        ]

    [event, *_] = wait_for(unhealthy, timeout=20, message="an Unhealthy event")
    assert event["message"].startswith("Readiness probe failed: ")
    assert _ready(net, "probe-bad") == "False"
    net.delete(pod)


def test_an_http_probe_comes_from_the_nodes_namespace(net: Net) -> None:
    _create(net, "probe-http", {"httpGet": {"port": 8080, "path": "/"}, "periodSeconds": 1})
    pod = net.started("probe-http")
    assert _ready(net, "probe-http") == "False"  # nothing listens yet
    server = subprocess.Popen(
        ["ip", "netns", "exec", pod.netns, sys.executable, "-m", "http.server", "8080"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _ready(net, "probe-http") == "True", timeout=20, message="Ready")
    finally:
        server.kill()
        server.wait()
    net.delete(pod)
