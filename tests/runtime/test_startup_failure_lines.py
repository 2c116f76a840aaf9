"""A start-up that cannot reach the API server says so in one human sentence, exits 1, and
never logs that it is shutting down with exit code 0."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_api_server_exits_1_with_a_human_message(tmp_path: Path) -> None:
    port = _closed_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cmd.controller",
            f"--kubeconfig={kubeconfig}",
            "--ovn-nb-addr=tcp:[127.0.0.1]:6641",
            "--ovn-timeout=2",
            "--metrics-port=0",
            "--metrics-addr=127.0.0.1",
            "--leader-elect=false",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert (
        f"waiting for the Kubernetes API server at http://127.0.0.1:{port}: connection refused"
        in err
    )
    assert (
        f"error: the Kubernetes API server at http://127.0.0.1:{port} was unreachable for 2s "
        "(connection refused)"
    ) in err
    assert "shutting down (exit code 1)" in err
    assert "exit code 0" not in err
    assert "MaxRetryError" not in err and "Traceback" not in err
    assert "Retrying" not in err  # urllib3's own retry warnings are held back while waiting
