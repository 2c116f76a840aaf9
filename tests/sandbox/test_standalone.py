"""`python -m controller.sandbox.apiserver` runs standalone, writes a kubeconfig, stops on TERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]


SEED = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team}
spec: {containers: [{name: app, image: busybox}]}
status: {phase: Running}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: team}}
- {apiVersion: kubeovn.io/v1, kind: Subnet, metadata: {name: ovn-default},
   spec: {cidrBlock: 10.16.0.0/16}}
"""


def test_standalone_server_serves_the_official_client(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    seed = tmp_path / "seed.yaml"
    seed.write_text(SEED)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.sandbox.apiserver",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--log-level",
            "WARNING",
            "--seed",
            str(seed),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the kubeconfig is written
        assert line.startswith("listening on http://127.0.0.1:"), line
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        assert cfg.host == line.split()[-1]
        with client.ApiClient(cfg) as api:
            core = client.CoreV1Api(api)
            core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
            assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == [
                "c"
            ]
            seeded = core.read_namespaced_pod("web", "team")
            assert seeded.status.phase == "Running"
            subnet = client.CustomObjectsApi(api).get_cluster_custom_object(
                "kubeovn.io", "v1", "subnets", "ovn-default"
            )
            assert subnet["spec"]["cidrBlock"] == "10.16.0.0/16"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0


def test_standalone_rejects_bad_arguments() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "controller.sandbox.apiserver", "--history-window", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "history_window" in out.stderr


def test_standalone_rejects_a_bad_seed(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text("apiVersion: v9\nkind: Widget\nmetadata: {name: w}\n")
    out = subprocess.run(
        [sys.executable, "-m", "controller.sandbox.apiserver", "--seed", str(seed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "no served resource" in out.stderr
