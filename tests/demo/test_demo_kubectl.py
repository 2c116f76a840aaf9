"""A kubectl session against the running emulator demo, as a newcomer would type it: tables with
the server's columns, `apply` with validation, `run` / `wait` / `delete` of a new pod that the
demo's scheduler and sandbox kubelet take through its whole life (wired into the data plane, so
it answers a ping from another pod's namespace), and Events with their columns.

Needs kubectl on PATH (skipped without it); the data plane part needs root, as the demo's."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.sandbox.ovn.runs import NETNS_PREFIX
from controller.testing.wait import wait_for
from tests.demo.conftest import StartDemo
from tests.demo.helpers import SERVING_LINE, WORKDIR_LINE

KUBECTL = shutil.which("kubectl")
CHASSIS_LINE = re.compile(r"chassis kop-(\w+);")

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _kubectl(kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=check,
    )


def _rows(text: str) -> list[list[str]]:
    """A kubectl table: the header's words, then each row split on runs of 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def _names(kubeconfig: Path) -> set[str]:
    out = _kubectl(kubeconfig, "get", "pods", "-n", "demo", "-o", "name").stdout
    return {line.removeprefix("pod/") for line in out.split()}


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    # polling kubectl, as a user would, until the deadline
    wait_for(condition, timeout, what, interval=0.2)


SUBNET = """apiVersion: kubeovn.io/v1
kind: Subnet
metadata:
  name: {name}
spec:
  {field}: 10.{octet}.0.0/24
  protocol: IPv4
  namespaces: []
"""


def test_a_kubectl_session_against_the_emulator_demo(start_demo: StartDemo, tmp_path: Path) -> None:
    root = os.geteuid() == 0
    demo = start_demo(
        "--metrics-port", "0", "--timeout", "60", *([] if root else ["--no-dataplane"])
    )
    workdir = Path(demo.wait_line(WORKDIR_LINE).group(1))
    run_id = demo.wait_line(CHASSIS_LINE).group(1) if root else ""
    demo.wait_line(SERVING_LINE)
    kc = workdir / "kubeconfig"

    # get: the server's columns, nodes with a kubelet's labels, READY from the containers
    nodes = _rows(_kubectl(kc, "get", "nodes", "-L", "kubernetes.io/os").stdout)
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "OS"]
    assert {tuple(r[i] for i in (1, 5)) for r in nodes[1:]} == {("Ready", "linux")}
    pods = _rows(_kubectl(kc, "get", "pods", "-n", "demo", "-o", "wide").stdout)
    assert pods[0][:6] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"]
    assert len(pods) == 7 and {(r[1], r[2]) for r in pods[1:]} == {("1/1", "Running")}
    subnets = _rows(_kubectl(kc, "get", "subnets").stdout)
    assert subnets[0][:5] == ["NAME", "PROVIDER", "VPC", "PROTOCOL", "CIDR"]

    # apply, validated by the server: an unknown field is refused, a good object applies twice
    bad = tmp_path / "bad.yaml"
    bad.write_text(SUBNET.format(name="typo", field="cidrBlok", octet=60))
    refused = _kubectl(kc, "apply", "-f", str(bad), check=False)
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "spec.cidrBlok"' in refused.stderr
    good = tmp_path / "good.yaml"
    good.write_text(SUBNET.format(name="extra", field="cidrBlock", octet=61))
    assert (
        _kubectl(kc, "apply", "-f", str(good)).stdout.strip() == "subnet.kubeovn.io/extra created"
    )
    assert (
        _kubectl(kc, "apply", "-f", str(good)).stdout.strip() == "subnet.kubeovn.io/extra unchanged"
    )

    # run: scheduled, allocated, wired and Ready; then it answers a ping from another pod
    _kubectl(kc, "run", "newcomer", "-n", "demo", "--image=nginx")
    _kubectl(kc, "wait", "-n", "demo", "--for=condition=Ready", "pod/newcomer", "--timeout=60s")
    pod = json.loads(_kubectl(kc, "get", "pod", "-n", "demo", "newcomer", "-o", "json").stdout)
    assert pod["spec"]["nodeName"].startswith("demo-node-")
    ip = pod["status"]["podIP"]
    row = _rows(_kubectl(kc, "get", "pod", "-n", "demo", "newcomer").stdout)[1]
    assert row[1:3] == ["1/1", "Running"]
    if root:
        web0 = json.loads(_kubectl(kc, "get", "pod", "-n", "demo", "web-0", "-o", "json").stdout)
        # the CNI stand-in's namespace name: the run's prefix and a hash of the pod's UID
        netns = (
            f"{NETNS_PREFIX}{run_id}-"
            + hashlib.sha256(web0["metadata"]["uid"].encode()).hexdigest()[:8]
        )
        ping = subprocess.run(
            ["ip", "netns", "exec", netns, "ping", "-c", "1", "-W", "2", ip],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert ping.returncode == 0, ping.stdout + ping.stderr

    # scale: the stateful set's next ordinal is created, scheduled and run; scaling down
    # removes the highest ordinals
    _kubectl(kc, "scale", "statefulset", "web", "-n", "demo", "--replicas=3")
    _wait_for(lambda: "web-2" in _names(kc), "pod web-2 to be created")
    _kubectl(kc, "wait", "-n", "demo", "--for=condition=Ready", "pod/web-2", "--timeout=60s")
    sts = _rows(_kubectl(kc, "get", "statefulset", "web", "-n", "demo").stdout)
    assert sts[1][:2] == ["web", "3/3"]
    _kubectl(kc, "scale", "statefulset", "web", "-n", "demo", "--replicas=1")
    _wait_for(lambda: not {"web-1", "web-2"} & _names(kc), "web-1 and web-2 to be deleted")

    # delete: gone from the API
    _kubectl(kc, "delete", "pod", "-n", "demo", "newcomer", "--wait=true", "--timeout=60s")
    assert "newcomer" not in _kubectl(kc, "get", "pods", "-n", "demo").stdout

    # events, with their columns: the controller's Warning for a pod asking for a bad address
    _kubectl(
        kc,
        "run",
        "bad-address",
        "-n",
        "demo",
        "--image=nginx",
        "--annotations=ovn.kubernetes.io/ip_address=10.100.0.300",
    )
    _wait_for(
        lambda: any(
            e["type"] == "Warning" and e["involvedObject"]["name"] == "bad-address"
            for e in json.loads(_kubectl(kc, "get", "events", "-n", "demo", "-o", "json").stdout)[
                "items"
            ]
        ),
        "a Warning Event for pod bad-address",
    )
    events = _rows(_kubectl(kc, "get", "events", "-n", "demo").stdout)
    assert events[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any(r[1] == "Warning" and r[3] == "pod/bad-address" for r in events[1:]), events

    demo.interrupt()
    assert demo.finish() == 0
