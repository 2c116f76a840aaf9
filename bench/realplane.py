"""The real Kubernetes control plane as bench/e2e's API side (`--control-plane real`).

Contract: `RealApi(workdir, seed)` offers what the bench uses of its emulator child, on a fresh
`RealControlPlane` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) in
`<workdir>/control-plane`:

* start-up: the chart's and the watched CRDs installed, the seed's Namespaces created and its
  Nodes registered Ready by the sandbox kubelet (`SandboxKubelet.register_node`: created, status
  Ready with the seed's InternalIP, not-ready taint lifted; no pod watch, so no kubelet traffic
  is measured), a few IP custom resources created and deleted (the CRD's first writes are
  slow), the chart's RBAC applied and `kubeconfig` written for the controller's
  ServiceAccount (the controller never runs as admin);
* `url` (https) and `tls` (CA file, admin bearer token) for the bench's own HTTP pools;
* `counts()` / `reset()`: the requests served since the last reset by "METHOD resource[/sub]
  code", as the emulator counts them, read from kube-apiserver's audit log (written before each
  answer: `--audit-log-mode=blocking`); only the controller's ServiceAccount and the bench's
  admin are counted, not the control plane's own components, and a watch counts once it ends;
* `cpu_seconds()`: CPU of kube-apiserver plus etcd; `stop()`: the plane stopped by pid.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from controller.sandbox.cluster.controlplane import ADMIN_USER, RealControlPlane, render_chart
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode

WARM_UP = "bench-warm-up"
_VERBS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}


def _cpu(pid: int | None) -> float:
    """utime + stime of a process in seconds (as bench/e2e/model.py's cpu_seconds)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RealApi:
    """A real control plane seeded like the bench's emulator (module docstring)."""

    name = "kube-apiserver+etcd"

    def __init__(self, workdir: Path, seed: list[dict[str, Any]]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.plane = RealControlPlane(workdir / "control-plane")
        self.plane.start()
        try:
            chart = render_chart()
            self.plane.install_crds(chart)
            self._setup(seed)
            sa_namespace, sa_name = self.plane.install_controller_rbac(chart)
            self.kubeconfig = self.plane.write_service_account_kubeconfig(
                workdir / "controller.kubeconfig", sa_namespace, sa_name
            )
            self._users = {ADMIN_USER, f"system:serviceaccount:{sa_namespace}:{sa_name}"}
        except BaseException:
            self.plane.stop()
            raise
        self.url = self.plane.url
        assert self.plane.pki is not None
        self.tls = (str(self.plane.pki.ca_cert), self.plane.admin_token)
        self._offset = 0
        self.reset()

    def _setup(self, seed: list[dict[str, Any]]) -> None:
        from kubernetes import client

        nodes = [
            SimNode(
                o["metadata"]["name"],
                next(a["address"] for a in o["status"]["addresses"] if a["type"] == "InternalIP"),
            )
            for o in seed
            if o["kind"] == "Node"
        ]
        with self.plane.api_client() as api:
            core = client.CoreV1Api(api)
            for o in seed:
                if o["kind"] == "Namespace":
                    core.create_namespace(
                        client.V1Namespace(metadata=client.V1ObjectMeta(name=o["metadata"]["name"]))
                    )
            kubelet = SandboxKubelet(api, nodes)
            for node in nodes:
                kubelet.register_node(node)
            # The first writes of a just-established CRD pay for its handler's set-up; do one
            # here, or the first measured burst would carry it and the controller's run (which
            # starts seconds later) would not.
            custom = client.CustomObjectsApi(api)
            warm = {"apiVersion": "kubeovn.io/v1", "kind": "IP", "metadata": {"name": WARM_UP}}
            for _ in range(3):
                custom.create_cluster_custom_object("kubeovn.io", "v1", "ips", warm)
                custom.delete_cluster_custom_object("kubeovn.io", "v1", "ips", WARM_UP)

    def _events(self) -> tuple[list[dict[str, Any]], int]:
        path = self.plane.audit_log
        with path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        events = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
        return events, self._offset + end

    def counts(self) -> dict[str, int]:
        events, _ = self._events()
        counts: Counter[str] = Counter()
        for ev in events:
            if ev.get("stage") != "ResponseComplete":
                continue
            if (ev.get("user") or {}).get("username") not in self._users:
                continue
            ref = ev.get("objectRef") or {}
            if not ref.get("resource"):
                continue  # discovery, /version, ...
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            method = _VERBS.get(ev.get("verb", ""), ev.get("verb", "").upper())
            code = (ev.get("responseStatus") or {}).get("code", 0)
            counts[f"{method} {ref['resource']}{sub} {code}"] += 1
        return dict(counts)

    def reset(self) -> None:
        _, self._offset = self._events()

    def cpu_seconds(self) -> float:
        return _cpu(self.plane.apiserver.pid) + _cpu(self.plane.etcd.pid)

    def stop(self) -> None:
        self.plane.stop()
