"""An image swap into kube-ovn v1.8's controller Deployment: its exact args start the controller,
which then serves pods, and its klog flags put klog-format lines where kube-ovn's tooling looks.

The args are dist/images/install.sh's (v1.8.18) with ENABLE_LB=false and ENABLE_NP=false (the
supported deployment model), behind the NB/SB addresses start-controller.sh prepends; the only
additions are what a pod gets from its environment (--kubeconfig instead of the in-cluster
config, --pprof-port=0 instead of a host port that may be taken), both kube-ovn flags too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Cluster
from tests.e2e.helpers import NODE, allocated_pods, pod, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
KLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] ")


def install_sh_args(nb: str, log_file: Path) -> list[str]:
    return [
        "/kube-ovn/start-controller.sh",
        f"--ovn-nb-addr={nb}",
        "--ovn-sb-addr=tcp:[127.0.0.1]:6642",
        "--default-cidr=10.16.0.0/16",
        "--default-gateway=10.16.0.1",
        "--default-exclude-ips=",
        "--node-switch-cidr=100.64.0.0/16",
        "--network-type=geneve",
        "--default-interface-name=",
        "--default-vlan-id=100",
        "--pod-nic-type=veth-pair",
        "--enable-lb=false",
        "--enable-np=false",
        "--enable-external-vpc=true",
        "--logtostderr=false",
        "--alsologtostderr=true",
        f"--log_file={log_file}",
    ]


def test_kube_ovn_v18_args_start_and_serve_pods(cluster: Cluster, tmp_path: Path) -> None:
    log_file = tmp_path / "kube-ovn" / "kube-ovn-controller.log"
    args = [
        *install_sh_args(cluster.nb_server.remote, log_file),
        f"--kubeconfig={cluster.kubeconfig}",
        "--pprof-port=0",
    ]
    env = {
        **os.environ,
        "POD_NAME": "kube-ovn-controller-6d8f7-x2x4q",
        "KUBE_NAMESPACE": "kube-system",
        "KUBE_NODE_NAME": NODE,
        "ENABLE_SSL": "false",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",  # what makes klog the default format
    }
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cmd.controller", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        store = cluster.server.store
        for i in range(3):
            store.create("pods", pod(f"web-{i}", node_name=NODE))
        ips = wait_for(
            lambda: p if len(p := allocated_pods(store)) == 3 else None,
            timeout=60,
            message="the three pods allocated",
        )
        assert len(set(ips.values())) == 3
        assert all(ip.startswith("10.16.") for ip in ips.values())
        wait_for(lambda: log_file.is_file() and "take" in log_file.read_text(), message="log")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert code == 0, stderr_path.read_text()
    lines = log_file.read_text().splitlines()
    assert lines and all(KLOG_LINE.match(line) for line in lines if not line.startswith(" "))
    assert any("take" in line and "AddPod default/web-0" in line for line in lines)
    # --alsologtostderr=true: stderr has the same lines
    assert any(KLOG_LINE.match(line) for line in stderr_path.read_text().splitlines())
