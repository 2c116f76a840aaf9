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
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from controller.sandbox.apiserver import kubeconfig
from controller.sandbox.processes import (
    SandboxError,
    die_with_parent,
    free_tcp_ports,
    run_tool,
    stop_process,
)

LOG = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
GO_MODULE_DIR = REPO_ROOT / "hack" / "control-plane"
CHART_DIR = REPO_ROOT / "charts" / "kube-ovn-pod-controller"
ENV_BIN = "KUBE_OVN_CONTROL_PLANE_BIN"
ENV_CACHE = "KUBE_OVN_CONTROL_PLANE_CACHE"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

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
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata"}],
}


class BinariesMissing(SandboxError):
    """The control-plane binaries are not built (or not where they were looked for)."""


# --------------------------------------------------------------------------- binaries


@dataclass(frozen=True, slots=True)
class Binaries:
    """The directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler."""

    dir: Path

    def path(self, name: str) -> Path:
        return self.dir / name


def _pinned(go_mod: Path, module: str) -> str:
    try:
        text = go_mod.read_text(encoding="utf-8")
    except OSError as e:
        raise BinariesMissing(f"cannot read the pinned versions in {go_mod}: {e}") from e
    m = re.search(rf"^(?:require)?\s*{re.escape(module)} (v\S+)", text, re.M)
    if m is None:
        raise BinariesMissing(f"{go_mod} does not require {module}")
    return m.group(1)


def pinned_versions() -> tuple[str, str]:
    """(Kubernetes version, etcd version) pinned by the wrapper modules in hack/control-plane."""
    return (
        _pinned(GO_MODULE_DIR / "go.mod", "k8s.io/kubernetes"),
        _pinned(GO_MODULE_DIR / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    if env.get(ENV_CACHE):
        return Path(env[ENV_CACHE])
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kube-ovn-pod-controller" / "control-plane"


def find_binaries(env: Mapping[str, str] = os.environ) -> Binaries:
    """Where the binaries are (see the module docstring); raises `BinariesMissing`."""
    if env.get(ENV_BIN):
        where = Path(env[ENV_BIN])
        how = f"${ENV_BIN}={where}"
    else:
        k8s, etcd = pinned_versions()
        top = cache_dir(env) / f"k8s-{k8s}-etcd-{etcd}"
        where = top / "bin"
        how = f"the build cache {where}"
        if not (top / "stamp").is_file():
            raise BinariesMissing(
                f"the control plane (k8s {k8s}, etcd {etcd}) is not built in {top} "
                f"(no stamp file): run `bash .ci/build-control-plane`, or set ${ENV_BIN}"
            )
    missing = [b for b in BINARIES if not os.access(where / b, os.X_OK)]
    if missing:
        raise BinariesMissing(
            f"{how} lacks {', '.join(missing)}: run `bash .ci/build-control-plane`"
        )
    return Binaries(where)


# --------------------------------------------------------------------------- PKI


@dataclass(frozen=True, slots=True)
class ControlPlanePki:
    """A throwaway CA, a loopback serving certificate, client certificates and the SA key."""

    dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    sa_key: Path
    sa_pub: Path

    def client(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) of the client certificate `name` made by `create`."""
        return self.dir / f"{name}.crt", self.dir / f"{name}.key"

    @classmethod
    def create(cls, directory: Path, clients: Mapping[str, str]) -> ControlPlanePki:
        """`clients` maps a file name to the subject of its client certificate."""
        if shutil.which("openssl") is None:
            raise SandboxError(
                "the control plane's certificates need the openssl CLI (Debian: openssl)"
            )
        d = directory
        d.mkdir(parents=True, exist_ok=True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run_tool(
            ["openssl", "req", "-x509", *ec, "-keyout", str(d / "ca.key"),
             "-out", str(d / "ca.crt"), "-subj", "/CN=kube-ovn-sandbox-ca", "-days", "7",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
        )  # fmt: skip
        leaves = {"server": ("/CN=127.0.0.1", "serverAuth", True)}
        leaves.update({name: (subj, "clientAuth", False) for name, subj in clients.items()})
        for name, (subject, usage, san) in leaves.items():
            ext = d / f"{name}.ext"
            lines = [
                "basicConstraints=critical,CA:FALSE",
                "keyUsage=critical,digitalSignature,keyEncipherment",
                f"extendedKeyUsage={usage}",
            ]
            if san:
                lines.append("subjectAltName=IP:127.0.0.1,DNS:localhost")
            ext.write_text("\n".join(lines) + "\n", encoding="utf-8")
            run_tool(
                ["openssl", "req", "-new", *ec, "-keyout", str(d / f"{name}.key"),
                 "-out", str(d / f"{name}.csr"), "-subj", subject]
            )  # fmt: skip
            run_tool(
                ["openssl", "x509", "-req", "-in", str(d / f"{name}.csr"),
                 "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"), "-CAcreateserial",
                 "-out", str(d / f"{name}.crt"), "-days", "7", "-extfile", str(ext)]
            )  # fmt: skip
        run_tool(
            ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(d / "sa.key")]
        )  # fmt: skip
        run_tool(
            ["openssl", "pkey", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub")]
        )
        return cls(
            d, d / "ca.crt", d / "ca.key", d / "server.crt", d / "server.key",
            d / "sa.key", d / "sa.pub",
        )  # fmt: skip


# --------------------------------------------------------------------------- processes

# PDEATHSIG fires when the *thread* that forked the child ends, not the process. Every child is
# forked by this one long-lived worker, so a component started (or restarted) from a short-lived
# thread, as a fault test may do, is not killed when that thread ends.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="cp-spawn")

Probe = Callable[[], "str | None"]


class Component:
    """One control-plane process: started with fixed flags, its output appended to its log."""

    def __init__(
        self, name: str, argv: Sequence[str], log: Path, probe: Probe, ready_timeout: float
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._probe = probe
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, wait: bool = True) -> None:
        """Start the process (no-op if it runs) and, with `wait`, wait until it is ready."""
        if self.running:
            return
        self._close_log()
        self.starts += 1
        fh = self.log.open("ab")
        fh.write(f"==== start {self.starts}: {' '.join(self.argv)}\n".encode())
        fh.flush()
        self._log_fh = fh
        try:
            self.proc = _SPAWNER.submit(
                subprocess.Popen,
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                # One foreign call between fork and exec, no locks (see die_with_parent).
                preexec_fn=die_with_parent(),
            ).result()
        except OSError as e:
            self._close_log()
            raise SandboxError(f"{self.name} could not be started ({self.argv[0]}): {e}") from e
        LOG.debug("%s pid %s", self.name, self.proc.pid)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll the readiness probe until it passes; raise `SandboxError` at the deadline."""
        limit = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        reason: str | None = "not probed"
        while True:
            if self.proc is None:
                raise SandboxError(f"{self.name} is not started")
            code = self.proc.poll()
            if code is not None:
                raise SandboxError(
                    f"{self.name} exited with code {code} before it was ready; "
                    f"log: {self.log}\n{self.log_tail()}"
                )
            reason = self._probe()
            if reason is None:
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"{self.name} not ready after {limit:.0f}s ({reason}); "
                    f"log: {self.log}\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 15.0) -> None:
        """Signal the process and reap it (SIGKILL after `timeout`)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, sig, timeout)
        self._close_log()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self, *, kill: bool = True, wait: bool = True) -> None:
        """SIGKILL (or, with `kill=False`, SIGTERM) and start again with the same flags."""
        self.stop(signal.SIGKILL if kill else signal.SIGTERM)
        self.start(wait=wait)

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _close_log(self) -> None:
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None


def _http_probe(url: str, context: ssl.SSLContext | None, expect: Callable[[bytes], bool]) -> Probe:
    def probe() -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                body: bytes = resp.read()
        except urllib.error.HTTPError as e:
            return f"{url} answered {e.code}: {e.read()[:300].decode(errors='replace')}"
        except (OSError, ssl.SSLError) as e:
            return f"{url}: {e}"
        return None if expect(body) else f"{url} answered {body[:300]!r}"

    return probe


# --------------------------------------------------------------------------- the plane


class RealControlPlane:
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
        try:
            self._add(self._etcd(binaries, etcd_port, peer_port))
            self._add(self._apiserver(binaries, pki, api_port))
            if self._with_kcm:
                self._add(self._controller_manager(binaries, pki, kcm_port))
            if self._with_scheduler:
                self._add(self._scheduler(binaries, pki, sched_port))
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

    def __enter__(self) -> RealControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

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

    # ------------------------------------------------------------------ components

    def _etcd(self, binaries: Binaries, port: int, peer_port: int) -> Component:
        client_url = f"http://127.0.0.1:{port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        argv = [
            str(binaries.path("etcd")),
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
        probe = _http_probe(
            f"{client_url}/health", None, lambda b: json.loads(b).get("health") == "true"
        )
        return Component("etcd", argv, self.workdir / "etcd.log", probe, self.ready_timeout)

    def _apiserver(self, binaries: Binaries, pki: ControlPlanePki, port: int) -> Component:
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
        policy = self.workdir / "audit-policy.json"
        policy.write_text(json.dumps(_AUDIT_POLICY), encoding="utf-8")
        url = f"https://127.0.0.1:{port}"
        argv = [
            str(binaries.path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self._etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={tokens}",
            # Real kubelets (realnode.py) listen on their node's InternalIP; node names resolve
            # nowhere.
            f"--kubelet-client-certificate={pki.client('kubelet-client')[0]}",
            f"--kubelet-client-key={pki.client('kubelet-client')[1]}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={url}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # TaintNodesByCondition taints every new node not-ready until the node-lifecycle
            # controller, which is not run, clears it: nodes would never take a pod.
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            *self._apiserver_args,
        ]
        probe = _http_probe(f"{url}/readyz", self._ssl_context(pki), lambda b: b.strip() == b"ok")
        return Component(
            "kube-apiserver", argv, self.workdir / "kube-apiserver.log", probe, self.ready_timeout
        )

    def _component_kubeconfig(self, pki: ControlPlanePki, who: str) -> Path:
        cert, key = pki.client(who)
        return kubeconfig.write_kubeconfig(
            self.workdir / f"{who}.kubeconfig",
            self.url,
            context=who,
            token=None,
            certificate_authority=pki.ca_cert,
            client_certificate=cert,
            client_key=key,
        )

    def _secure_serving(self, pki: ControlPlanePki, port: int, name: str) -> list[str]:
        return [
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
        ]

    def _controller_manager(self, binaries: Binaries, pki: ControlPlanePki, port: int) -> Component:
        config = self._component_kubeconfig(pki, "controller-manager")
        argv = [
            str(binaries.path("kube-controller-manager")),
            f"--kubeconfig={config}",
            "--leader-elect=false",
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            *self._secure_serving(pki, port, "kube-controller-manager"),
            *self._kcm_args,
        ]
        probe = _http_probe(
            f"https://127.0.0.1:{port}/healthz", self._ssl_context(pki, client=False),
            lambda b: b.strip() == b"ok",
        )  # fmt: skip
        log = self.workdir / "kube-controller-manager.log"
        return Component("kube-controller-manager", argv, log, probe, self.ready_timeout)

    def _scheduler(self, binaries: Binaries, pki: ControlPlanePki, port: int) -> Component:
        config = self._component_kubeconfig(pki, "scheduler")
        argv = [
            str(binaries.path("kube-scheduler")),
            f"--kubeconfig={config}",
            "--leader-elect=false",
            *self._secure_serving(pki, port, "kube-scheduler"),
        ]
        probe = _http_probe(
            f"https://127.0.0.1:{port}/healthz", self._ssl_context(pki, client=False),
            lambda b: b.strip() == b"ok",
        )  # fmt: skip
        log = self.workdir / "kube-scheduler.log"
        return Component("kube-scheduler", argv, log, probe, self.ready_timeout)

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
        return self.workdir / "audit.log"

    def _require_pki(self) -> ControlPlanePki:
        if self.pki is None:
            raise SandboxError("the control plane is not started")
        return self.pki

    def _ssl_context(self, pki: ControlPlanePki, *, client: bool = True) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        if client:
            cert, key = pki.client("admin")
            ctx.load_cert_chain(str(cert), str(key))
        return ctx

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


# --------------------------------------------------------------------------- manifests


def render_chart(
    values: Mapping[str, Any] | None = None,
    *,
    release: str = "kopc",
    namespace: str = "kube-system",
    chart_dir: Path = CHART_DIR,
) -> list[dict[str, Any]]:
    """The chart's manifests as `helm template` renders them (Helm's Go SDK, no cluster)."""
    import yaml  # noqa: PLC0415

    try:
        import helm_python  # noqa: PLC0415 - a test extra, needed only here
    except ImportError as e:
        raise SandboxError(
            f"rendering the chart needs helm-python-sdk (pip install -e '.[test]'): {e}"
        ) from e
    with helm_python.Chart.load(chart_dir) as chart:
        files = chart.render(
            values=dict(values) if values is not None else None,
            name=release,
            namespace=namespace,
            is_install=True,
        )
    out: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.endswith("NOTES.txt"):
            continue
        out.extend(d for d in yaml.safe_load_all(files[path]) if isinstance(d, dict))
    return out


def _crd(group: str, kind: str, plural: str, singular: str, *, status: bool) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
            },
            "versions": [version],
        },
    }


#: Minimal CRDs (namespaced, any content kept) for the foreign kinds the controller watches.
WATCHED_CRDS = (
    _crd("k8s.cni.cncf.io", "NetworkAttachmentDefinition", "network-attachment-definitions",
         "network-attachment-definition", status=False),
    _crd("kubevirt.io", "VirtualMachine", "virtualmachines", "virtualmachine", status=True),
    _crd("kubevirt.io", "VirtualMachineInstance", "virtualmachineinstances",
         "virtualmachineinstance", status=True),
)  # fmt: skip
