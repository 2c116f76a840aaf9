"""How each control-plane process is launched: its flags, its log, its readiness probe.

`Launcher(workdir, binaries, pki, ready_timeout)` builds the `Component` of etcd,
kube-apiserver, kube-controller-manager and kube-scheduler (ports chosen by the caller), and the
kubeconfigs the latter two use (client certificates from `pki`).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.apiserver import kubeconfig
from controller.sandbox.cluster.binaries import Binaries
from controller.sandbox.cluster.components import Component, http_probe
from controller.sandbox.cluster.pki import ControlPlanePki

#: kube-controller-manager's controllers: what the controller's workloads need, and nothing that
#: acts on nodes without heartbeats (node-lifecycle, taint-eviction, pod-garbage-collector).
CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "statefulset-controller",
    "replicaset-controller",
    "deployment-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
)
SERVICE_CIDR = "10.0.0.0/24"
ADMIN_USER = "kube-ovn-sandbox-admin"
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}
AUDIT_LOG = "audit.log"


def ssl_context(pki: ControlPlanePki, *, client: bool = True) -> ssl.SSLContext:
    """Trusts the plane's CA; with `client`, presents the admin's client certificate."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if client:
        cert, key = pki.client("admin")
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


@dataclass(frozen=True, slots=True)
class Launcher:
    """The components of one plane (module docstring)."""

    workdir: Path
    binaries: Binaries
    pki: ControlPlanePki
    ready_timeout: float

    def etcd(self, port: int, peer_port: int) -> Component:
        client_url = f"http://127.0.0.1:{port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        argv = [
            str(self.binaries.path("etcd")),
            "--name=sandbox",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=sandbox={peer_url}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        probe = http_probe(
            f"{client_url}/health", None, lambda b: json.loads(b).get("health") == "true"
        )
        return Component("etcd", argv, self.workdir / "etcd.log", probe, self.ready_timeout)

    def apiserver(
        self, port: int, etcd_port: int, admin_token: str, extra: Sequence[str]
    ) -> Component:
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
        policy = self.workdir / "audit-policy.json"
        policy.write_text(json.dumps(_AUDIT_POLICY), encoding="utf-8")
        url = f"https://127.0.0.1:{port}"
        argv = [
            str(self.binaries.path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={self.pki.server_cert}",
            f"--tls-private-key-file={self.pki.server_key}",
            f"--client-ca-file={self.pki.ca_cert}",
            f"--token-auth-file={tokens}",
            # Real kubelets (realnode.py) listen on their node's InternalIP; node names resolve
            # nowhere.
            f"--kubelet-client-certificate={self.pki.client('kubelet-client')[0]}",
            f"--kubelet-client-key={self.pki.client('kubelet-client')[1]}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={url}",
            f"--service-account-key-file={self.pki.sa_pub}",
            f"--service-account-signing-key-file={self.pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # TaintNodesByCondition taints every new node not-ready until the node-lifecycle
            # controller, which is not run, clears it: nodes would never take a pod.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={(self.workdir / AUDIT_LOG)}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            *extra,
        ]
        probe = http_probe(f"{url}/readyz", ssl_context(self.pki), lambda b: b.strip() == b"ok")
        return Component(
            "kube-apiserver", argv, self.workdir / "kube-apiserver.log", probe, self.ready_timeout
        )

    def _component_kubeconfig(self, who: str, url: str) -> Path:
        cert, key = self.pki.client(who)
        return kubeconfig.write_kubeconfig(
            self.workdir / f"{who}.kubeconfig",
            url,
            context=who,
            token=None,
            certificate_authority=self.pki.ca_cert,
            client_certificate=cert,
            client_key=key,
        )

    def _secure_serving(self, port: int, name: str) -> list[str]:
        return [
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            f"--tls-cert-file={self.pki.server_cert}",
            f"--tls-private-key-file={self.pki.server_key}",
        ]

    def controller_manager(self, port: int, url: str, extra: Sequence[str]) -> Component:
        config = self._component_kubeconfig("controller-manager", url)
        argv = [
            str(self.binaries.path("kube-controller-manager")),
            f"--kubeconfig={config}",
            "--leader-elect=false",
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.pki.sa_key}",
            f"--root-ca-file={self.pki.ca_cert}",
            *self._secure_serving(port, "kube-controller-manager"),
            *extra,
        ]
        probe = http_probe(
            f"https://127.0.0.1:{port}/healthz", ssl_context(self.pki, client=False),
            lambda b: b.strip() == b"ok",
        )  # fmt: skip
        log = self.workdir / "kube-controller-manager.log"
        return Component("kube-controller-manager", argv, log, probe, self.ready_timeout)

    def scheduler(self, port: int, url: str) -> Component:
        config = self._component_kubeconfig("scheduler", url)
        argv = [
            str(self.binaries.path("kube-scheduler")),
            f"--kubeconfig={config}",
            "--leader-elect=false",
            *self._secure_serving(port, "kube-scheduler"),
        ]
        probe = http_probe(
            f"https://127.0.0.1:{port}/healthz", ssl_context(self.pki, client=False),
            lambda b: b.strip() == b"ok",
        )  # fmt: skip
        log = self.workdir / "kube-scheduler.log"
        return Component("kube-scheduler", argv, log, probe, self.ready_timeout)
