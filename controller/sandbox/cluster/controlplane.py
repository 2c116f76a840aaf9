"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, built from the pinned Go modules by `.ci/build-control-plane`.

Contract:

* `find_binaries()` locates the four binaries: `$KUBE_OVN_CONTROL_PLANE_BIN` if set, else the
  build cache the build step writes (`<cache>/k8s-<v>-etcd-<v>/bin`, the versions read from
  hack/control-plane's go.mod files, `<cache>` being `$KUBE_OVN_CONTROL_PLANE_CACHE` or
  `${XDG_CACHE_HOME:-~/.cache}/kube-ovn-pod-controller/control-plane`). It raises
  `BinariesMissing` (a `SandboxError`) naming what is absent and how to build it.
* `RealControlPlane(workdir).start()` (or `with RealControlPlane(workdir) as plane:`) makes a
  throwaway CA, server and client certificates and a service-account signing key with the
  `openssl` CLI, then starts each component as a *foreground child* (PDEATHSIG=SIGKILL, so a
  crashed test run leaves nothing behind) with its output in `<workdir>/<component>.log`, and
  waits for each to be ready (etcd `/health`, kube-apiserver `/readyz`, the others `/healthz`,
  then the `default` ServiceAccount, which proves kube-controller-manager works). Every wait has
  a deadline; a failure raises `SandboxError` naming the component and its log, with the log's
  tail. `stop()` stops them in reverse order by pid (SIGTERM, SIGKILL after a deadline) and reaps
  them; the work directory is left to its owner.
* kube-apiserver: TLS on 127.0.0.1, RBAC authorization, client certificates (the admin is in
  `system:masters`), static bearer tokens (`admin_token`), service-account tokens (issuer and
  signing key), an audit log of every request at Metadata level (`audit_events()`),
  `--endpoint-reconciler-type=none`, a `kubelet-client` certificate (in `system:masters`) for
  exec/logs on real kubelets (realnode.py), reached at their InternalIP, ServiceAccount
  admission off as in controller-runtime's
  envtest (pods need not wait for their namespace's `default` ServiceAccount), and
  TaintNodesByCondition admission off (it taints new nodes not-ready until the node-lifecycle
  controller, not run here, clears the taint).
  kube-controller-manager runs only the controllers in `CONTROLLERS` (no node lifecycle: nodes
  that post no heartbeats are never tainted or emptied), each with its own ServiceAccount
  credentials as in kubeadm; kube-scheduler binds pods to Ready nodes with capacity.
* Components are `Component`s (`plane.etcd`, `plane.apiserver`, `plane.controller_manager`,
  `plane.scheduler`): `kill()` (SIGKILL), `stop()`, `start()` (same flags, ports and data),
  `restart()`, `wait_ready()`. `compact_etcd()` compacts etcd's history up to its current
  revision (resourceVersions older than that answer 410 where etcd serves them).
* Clients: `api_client()` (an admin `kubernetes.client.ApiClient`), `write_admin_kubeconfig()`,
  `write_service_account_kubeconfig()` (a TokenRequest token), `install_crds()` (the chart's
  kubeovn.io CRDs plus the NetworkAttachmentDefinition and KubeVirt CRDs the controller watches,
  waited for until Established), `install_controller_rbac()` (the chart's ServiceAccount,
  ClusterRole, Role and bindings, rendered with Helm's Go SDK as `helm template` would) and
  `write_controller_kubeconfig()` (both, then a kubeconfig for that ServiceAccount).

The parts live beside it, by responsibility, and are re-exported here: binaries.py (where the
binaries are), pki.py (the certificates), components.py (one process: start, probe, stop),
launch.py (each component's flags and kubeconfig) and manifests.py (the chart, the CRDs).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import ssl
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.sandbox.apiserver import kubeconfig
from controller.sandbox.cluster.binaries import (
    BINARIES,
    ENV_BIN,
    ENV_CACHE,
    Binaries,
    BinariesMissing,
    cache_dir,
    find_binaries,
    pinned_versions,
)
from controller.sandbox.cluster.components import Component
from controller.sandbox.cluster.launch import (
    ADMIN_USER,
    AUDIT_LOG,
    CONTROLLERS,
    Launcher,
    ssl_context,
)
from controller.sandbox.cluster.manifests import CHART_DIR, WATCHED_CRDS, render_chart
from controller.sandbox.cluster.pki import ControlPlanePki
from controller.sandbox.processes import SandboxError, Service, free_tcp_ports

# Re-exported: the tests, the benches and the real-node launcher import them from here.
__all__ = [
    "ADMIN_USER",
    "BINARIES",
    "CHART_DIR",
    "CONTROLLERS",
    "ENV_BIN",
    "ENV_CACHE",
    "Binaries",
    "BinariesMissing",
    "Component",
    "ControlPlanePki",
    "RealControlPlane",
    "cache_dir",
    "find_binaries",
    "pinned_versions",
    "render_chart",
]

LOG = logging.getLogger(__name__)

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


# --------------------------------------------------------------------------- the plane


class RealControlPlane(Service):
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler (module docstring)."""

    def __init__(
        self,
        workdir: Path | str,
        *,
        binaries: Binaries | None = None,
        apiserver_args: Sequence[str] = (),
        controller_manager_args: Sequence[str] = (),
        scheduler: bool = True,
        controller_manager: bool = True,
        ready_timeout: float = 60.0,
    ) -> None:
        self.workdir = Path(workdir)
        self._binaries = binaries
        self._apiserver_args = list(apiserver_args)
        self._kcm_args = list(controller_manager_args)
        self._with_scheduler = scheduler
        self._with_kcm = controller_manager
        self.ready_timeout = ready_timeout
        self.admin_token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        self.pki: ControlPlanePki | None = None
        self.components: list[Component] = []
        self.startup_seconds: dict[str, float] = {}
        self._etcd_port = 0
        self._apiserver_port = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RealControlPlane:
        if self.components:
            raise SandboxError("the control plane is already started")
        binaries = self._binaries or find_binaries()
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = pki = ControlPlanePki.create(
            self.workdir / "pki",
            {
                "admin": f"/O=system:masters/CN={ADMIN_USER}",
                "controller-manager": "/CN=system:kube-controller-manager",
                "scheduler": "/CN=system:kube-scheduler",
                # kube-apiserver's identity towards kubelets (exec, logs, port-forward).
                "kubelet-client": "/O=system:masters/CN=kube-apiserver-kubelet-client",
            },
        )
        self.startup_seconds["pki"] = time.monotonic() - t0
        etcd_port, peer_port, api_port, kcm_port, sched_port = free_tcp_ports(5)
        self._etcd_port, self._apiserver_port = etcd_port, api_port
        launch = Launcher(self.workdir, binaries, pki, self.ready_timeout)
        try:
            self._add(launch.etcd(etcd_port, peer_port))
            self._add(launch.apiserver(api_port, etcd_port, self.admin_token, self._apiserver_args))
            if self._with_kcm:
                self._add(launch.controller_manager(kcm_port, self.url, self._kcm_args))
            if self._with_scheduler:
                self._add(launch.scheduler(sched_port, self.url))
            if self._with_kcm:
                t = time.monotonic()
                self._wait_default_service_account()
                self.startup_seconds["default-serviceaccount"] = time.monotonic() - t
        except BaseException:
            self.stop()
            raise
        self.startup_seconds["total"] = time.monotonic() - t0
        LOG.info("real control plane up in %.1fs at %s", self.startup_seconds["total"], self.url)
        return self

    def _add(self, component: Component) -> None:
        self.components.append(component)
        t = time.monotonic()
        component.start()
        self.startup_seconds[component.name] = time.monotonic() - t

    def stop(self) -> None:
        """Stop every component (reverse start order); safe to call more than once."""
        for component in reversed(self.components):
            component.stop()
        self.components = []

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise SandboxError(f"no component {name!r} (running: {[c.name for c in self.components]})")

    @property
    def etcd(self) -> Component:
        return self.component("etcd")

    @property
    def apiserver(self) -> Component:
        return self.component("kube-apiserver")

    @property
    def controller_manager(self) -> Component:
        return self.component("kube-controller-manager")

    @property
    def scheduler(self) -> Component:
        return self.component("kube-scheduler")

    def _wait_default_service_account(self) -> None:
        """kube-controller-manager's serviceaccount controller creates `default/default`."""
        from kubernetes import client  # noqa: PLC0415 - optional at import time
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        kcm = self.controller_manager
        deadline = time.monotonic() + self.ready_timeout
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            while True:
                try:
                    core.read_namespaced_service_account("default", "default")
                    return
                except ApiException as e:
                    if e.status != 404:
                        raise SandboxError(f"reading ServiceAccount default/default: {e}") from e
                if not kcm.running or time.monotonic() > deadline:
                    raise SandboxError(
                        "kube-controller-manager did not create the ServiceAccount default/default "
                        f"within {self.ready_timeout:.0f}s; log: {kcm.log}\n{kcm.log_tail()}"
                    )
                time.sleep(0.1)

    # ------------------------------------------------------------------ access

    @property
    def url(self) -> str:
        if not self._apiserver_port:
            raise SandboxError("the control plane is not started")
        return f"https://127.0.0.1:{self._apiserver_port}"

    @property
    def etcd_url(self) -> str:
        if not self._etcd_port:
            raise SandboxError("the control plane is not started")
        return f"http://127.0.0.1:{self._etcd_port}"

    @property
    def audit_log(self) -> Path:
        return self.workdir / AUDIT_LOG

    def _require_pki(self) -> ControlPlanePki:
        if self.pki is None:
            raise SandboxError("the control plane is not started")
        return self.pki

    def _ssl_context(self, pki: ControlPlanePki, *, client: bool = True) -> ssl.SSLContext:
        return ssl_context(pki, client=client)

    def write_admin_kubeconfig(self, path: Path | str) -> Path:
        """A kubeconfig for the admin (client certificate in `system:masters`)."""
        pki = self._require_pki()
        cert, key = pki.client("admin")
        return kubeconfig.write_kubeconfig(
            path, self.url, context="sandbox-admin", token=None,
            certificate_authority=pki.ca_cert, client_certificate=cert, client_key=key,
        )  # fmt: skip

    def api_client(self, token: str | None = None) -> Any:
        """A `kubernetes.client.ApiClient`: admin by client certificate, or the bearer `token`
        (caller closes it)."""
        from kubernetes import client  # noqa: PLC0415 - optional at import time

        pki = self._require_pki()
        config = client.Configuration(host=self.url)
        config.ssl_ca_cert = str(pki.ca_cert)
        if token is None:
            cert, key = pki.client("admin")
            config.cert_file, config.key_file = str(cert), str(key)
        else:
            config.api_key = {"authorization": token}
            config.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(config)

    def service_account_token(
        self, namespace: str, name: str, *, expiration_seconds: int = 86_400
    ) -> str:
        """A token for the ServiceAccount `namespace/name` from the TokenRequest API."""
        from kubernetes import client  # noqa: PLC0415
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        # No audiences: the token is for the API server's own (its service-account issuer).
        body = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds)
        )
        with self.api_client() as api:
            try:
                answer = client.CoreV1Api(api).create_namespaced_service_account_token(
                    name, namespace, body
                )
            except ApiException as e:
                raise SandboxError(
                    f"TokenRequest for ServiceAccount {namespace}/{name}: {e.status} {e.reason}"
                ) from e
        if answer.status is None or not answer.status.token:
            raise SandboxError(f"TokenRequest for ServiceAccount {namespace}/{name}: no token")
        token: str = answer.status.token
        return token

    def write_service_account_kubeconfig(
        self, path: Path | str, namespace: str, name: str, *, expiration_seconds: int = 86_400
    ) -> Path:
        """A kubeconfig authenticating as `system:serviceaccount:<namespace>:<name>`."""
        pki = self._require_pki()
        token = self.service_account_token(namespace, name, expiration_seconds=expiration_seconds)
        return kubeconfig.write_kubeconfig(
            path, self.url, context=f"{namespace}-{name}", token=token,
            namespace=namespace, certificate_authority=pki.ca_cert,
        )  # fmt: skip

    # ------------------------------------------------------------------ objects

    def apply(self, manifests: Iterable[Mapping[str, Any]], field_manager: str = "sandbox") -> None:
        """Server-side apply each manifest (as admin); CRDs are waited for until Established."""
        from kubernetes import client, dynamic  # noqa: PLC0415
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        docs = [dict(m) for m in manifests]
        crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
        rest = [d for d in docs if d.get("kind") != "CustomResourceDefinition"]
        with self.api_client() as api:
            for group in (crds, rest):
                if not group:
                    continue
                # A fresh client per group: discovery must see CRDs established just before.
                dyn = dynamic.DynamicClient(api)  # type: ignore[no-untyped-call,unused-ignore]
                for doc in group:
                    what = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}"
                    try:
                        res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
                        res_ns = doc["metadata"].get("namespace") if res.namespaced else None
                        dyn.server_side_apply(  # type: ignore[no-untyped-call,unused-ignore]
                            res, body=doc, namespace=res_ns, field_manager=field_manager,
                            force_conflicts=True,
                        )  # fmt: skip
                    except (ApiException, dynamic.exceptions.DynamicApiError) as e:
                        raise SandboxError(f"applying {what}: {e}") from e
                    except (KeyError, dynamic.exceptions.ResourceNotFoundError) as e:
                        raise SandboxError(f"applying {what}: no such API ({e})") from e
                if group is crds:
                    ext = client.ApiextensionsV1Api(api)
                    for doc in crds:
                        self._wait_established(ext, doc["metadata"]["name"])

    def _wait_established(self, ext: Any, name: str) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while True:
            crd = ext.read_custom_resource_definition(name)
            conditions = (crd.status.conditions if crd.status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"CRD {name} not Established after {self.ready_timeout:.0f}s: "
                    f"{[(c.type, c.status, c.message) for c in conditions]}"
                )
            time.sleep(0.05)

    def install_crds(self, chart_manifests: Iterable[Mapping[str, Any]] | None = None) -> None:
        """The chart's kubeovn.io CRDs and `WATCHED_CRDS`, applied and Established."""
        chart = render_chart() if chart_manifests is None else list(chart_manifests)
        ours = [m for m in chart if m["kind"] == "CustomResourceDefinition"]
        if not ours:
            raise SandboxError("the chart rendered no CustomResourceDefinition")
        self.apply([*ours, *WATCHED_CRDS])

    def install_controller_rbac(
        self, chart_manifests: Iterable[Mapping[str, Any]] | None = None
    ) -> tuple[str, str]:
        """Apply the chart's ServiceAccount, roles and bindings; (namespace, name) of the SA."""
        chart = render_chart() if chart_manifests is None else list(chart_manifests)
        rbac = [m for m in chart if m["kind"] in RBAC_KINDS]
        accounts = [m for m in rbac if m["kind"] == "ServiceAccount"]
        if len(accounts) != 1:
            raise SandboxError(f"the chart rendered {len(accounts)} ServiceAccounts, not one")
        meta = accounts[0]["metadata"]
        namespaces = sorted(
            {m["metadata"]["namespace"] for m in rbac if "namespace" in m["metadata"]}
        )
        self.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                for ns in namespaces
            ]
        )
        self.apply(rbac)
        return meta["namespace"], meta["name"]

    def write_controller_kubeconfig(
        self, path: Path | str, chart_manifests: Iterable[Mapping[str, Any]] | None = None
    ) -> Path:
        """The chart's RBAC applied, then a kubeconfig for the controller's ServiceAccount."""
        namespace, name = self.install_controller_rbac(chart_manifests)
        return self.write_service_account_kubeconfig(path, namespace, name)

    # ------------------------------------------------------------------ etcd and audit

    def _etcd_call(self, method: str, body: Mapping[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.etcd_url}/v3/{method}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise SandboxError(f"etcd {method}: {e.code} {e.read()[:300]!r}") from e
        except OSError as e:
            raise SandboxError(f"etcd {method}: {e}; log: {self.workdir / 'etcd.log'}") from e
        return answer

    def etcd_revision(self) -> int:
        """etcd's current revision (kube-apiserver's newest resourceVersion)."""
        key = base64.b64encode(b"/registry/").decode()
        answer = self._etcd_call("kv/range", {"key": key, "limit": 1, "keys_only": True})
        return int(answer["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to `revision` (default: the current one); returns it."""
        rev = self.etcd_revision() if revision is None else revision
        self._etcd_call("kv/compaction", {"revision": rev, "physical": True})
        return rev

    def audit_events(self) -> Iterator[dict[str, Any]]:
        """The audit log's events so far (one per completed request, Metadata level)."""
        with contextlib.suppress(FileNotFoundError), self.audit_log.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)
