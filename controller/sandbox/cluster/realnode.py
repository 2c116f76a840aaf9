"""Real nodes for the test bed: one containerd and one kubelet per node, on this machine.

Contract:

* `RealNodes(plane, workdir, ["node1", "node2"]).start()` (or `with RealNodes(...) as nodes:`)
  gives every node its own containerd (root, state, socket, runc root, CNI conf dir) and its own
  kubelet (root dir, ports, node name, cgroup root `/kosn-<run>-<node>` in every cgroup v1
  hierarchy), against the `RealControlPlane` `plane`. Two kubelets never share a containerd: a
  kubelet removes every pod sandbox it does not know as an orphan.
* A node's InternalIP is an address of its own (`NodeSpec.ip`, or a free one in
  `NODE_IP_RANGE`) added to `lo` with the run's label: kubelet refuses loopback addresses and
  addresses no interface holds, and the API server reaches the kubelet's exec/log server there.
* Credentials: each kubelet authenticates with a client certificate from the plane's CA
  (`system:node:<name>` in `system:nodes`, bound to the `system:node` ClusterRole); it accepts
  the API server's `kubelet-client` certificate from that CA (x509) and authorizes it fully.
* Images: `images.build_images` writes the pause and busybox OCI archives once into `workdir`,
  then each containerd imports them into its `k8s.io` namespace; pods use
  `imagePullPolicy: Never` (or IfNotPresent): there is no registry.
* CNI: each containerd reads `<node>/cni/net.d` and `<node>/cni/bin`, where the plugins of
  `cni_bin_dirs` (then Debian's) are linked. The network configuration is `cni_conflist(node)`
  (default: the standard `loopback` plugin only, enough for the kubelet to report NetworkReady
  and for hostNetwork pods to run).
* `start()` returns once every node is Ready in the API; `stop()` (idempotent, also after a
  failed start) stops the kubelets, kills what the run's containers and shims left (by pid,
  found in the run's cgroups and by the shims' containerd address), stops containerd, then
  unmounts everything below the run directory, removes the cgroups, the node addresses, the
  kubelet's `/var/log/containers` links and the run directory. Nothing outlives it.
* Runs and crashes: a run's state lives in `RUN_BASE/<run>/` (`<run>`: 6 characters) with its
  owner (pid and start time) in `RUN_BASE/<run>/owner`, written before anything else.
  `start()` first sweeps every run whose owner is gone (`noderuns.sweep_dead_runs()`), with the
  same steps as `stop()`; `noderuns.leftovers(run)` lists what a run still holds. What a node
  runs with (containerd's and the kubelet's configuration) is written by `nodeconfig`.
* containerd and kubelet are foreground children (PDEATHSIG=SIGKILL) handled as
  `controlplane.Component`s: `node.containerd.restart()` and `node.kubelet.restart()` work
  mid-run; container processes and shims are not our children (the shim daemonizes) and are
  swept by pid.

Needs root, Debian's containerd, runc and containernetworking-plugins, busybox-static, and the
kubelet that `.ci/build-control-plane` builds beside the control plane (`find_kubelet()`); a
cgroup v1 or hybrid host (`failCgroupV1: false` is set). `missing_requirements()` says what is
absent.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.sandbox.cluster import images, nodeconfig, noderuns
from controller.sandbox.cluster.controlplane import (
    Binaries,
    BinariesMissing,
    Component,
    ControlPlanePki,
    RealControlPlane,
    find_binaries,
)
from controller.sandbox.processes import SandboxError, Service, free_tcp_ports, run_tool

LOG = logging.getLogger(__name__)

CNI_BIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
ENV_KUBELET = "KUBE_OVN_KUBELET"
_TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "umount", "openssl")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node to run: its name and (optionally) its InternalIP."""

    name: str
    ip: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


def missing_requirements() -> str:
    """Why real nodes cannot run here ("" when they can), as one line."""
    if os.geteuid() != 0:
        return "real nodes need root (containerd, cgroups, mounts)"
    missing = [t for t in _TOOLS if shutil.which(t) is None]
    if not any((d / "loopback").exists() for d in CNI_BIN_DIRS):
        missing.append("the CNI loopback plugin")
    if missing:
        return (
            "real nodes need Debian's containerd, runc, containernetworking-plugins and "
            f"busybox-static (missing: {', '.join(missing)})"
        )
    try:
        images.find_busybox()
    except SandboxError as e:
        return str(e)
    if not (noderuns.CGROUP_V1 / "memory").is_dir():
        return f"real nodes need a cgroup v1 (or hybrid) host: no {noderuns.CGROUP_V1 / 'memory'}"
    return ""


def find_kubelet(binaries: Binaries | None = None, env: Mapping[str, str] = os.environ) -> Path:
    """The kubelet: `$KUBE_OVN_KUBELET`, else beside the control-plane binaries."""
    if env.get(ENV_KUBELET):
        path = Path(env[ENV_KUBELET])
        how = f"${ENV_KUBELET}={path}"
    else:
        path = (binaries or find_binaries(env)).path("kubelet")
        how = str(path)
    if not os.access(path, os.X_OK):
        raise BinariesMissing(
            f"no kubelet at {how}: run `bash .ci/build-control-plane` (it builds the kubelet "
            "beside the control plane)"
        )
    return path


class RealNode:
    """One node: its containerd and kubelet `Component`s, address, directories and ports."""

    def __init__(self, spec: NodeSpec, run: str, node_dir: Path, ip: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.run = run
        self.dir = node_dir
        self.ip = ip
        self.cgroup_root = f"/{noderuns.CGROUP_PREFIX}{run}-{spec.name}"
        self.kubelet_port = 0
        self.healthz_port = 0
        self.containerd: Component | None = None
        self.kubelet: Component | None = None

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.dir / "cni" / "net.d"

    @property
    def cni_bin_dir(self) -> Path:
        return self.dir / "cni" / "bin"

    def ctr(self, *args: str, timeout: float = 60.0) -> str:
        """`ctr` against this node's containerd, in the CRI's `k8s.io` namespace."""
        return run_tool(["ctr", "-a", str(self.socket), "-n", "k8s.io", *args], timeout=timeout)

    def containers(self) -> list[str]:
        """The ids of the containers (sandboxes included) containerd knows on this node."""
        return [c for c in self.ctr("containers", "ls", "-q").split() if c]

    def running_tasks(self) -> list[str]:
        """The ids of the containers whose process runs (sandboxes included)."""
        lines = self.ctr("tasks", "ls").splitlines()[1:]
        return [w[0] for w in (line.split() for line in lines) if len(w) >= 3 and w[2] == "RUNNING"]


class RealNodes(Service):
    """containerd + kubelet per node against a `RealControlPlane` (module docstring)."""

    def __init__(
        self,
        plane: RealControlPlane,
        workdir: Path | str,
        nodes: Sequence[NodeSpec | str],
        *,
        kubelet: Path | None = None,
        cni_bin_dirs: Sequence[Path] = (),
        cni_conflist: Callable[[str], Mapping[str, Any]] = nodeconfig.loopback_conflist,
        ready_timeout: float = 120.0,
    ) -> None:
        self.plane = plane
        self.workdir = Path(workdir)
        self.specs = [NodeSpec(n) if isinstance(n, str) else n for n in nodes]
        if len({s.name for s in self.specs}) != len(self.specs):
            raise SandboxError(f"node names repeat: {[s.name for s in self.specs]}")
        self._kubelet = kubelet
        self.cni_bin_dirs = [*cni_bin_dirs, *(d for d in CNI_BIN_DIRS if d.is_dir())]
        self._cni_conflist = cni_conflist
        self.ready_timeout = ready_timeout
        self.run: str | None = None
        self.run_dir: Path | None = None
        self.nodes: dict[str, RealNode] = {}
        self.startup_seconds: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RealNodes:
        if self.run is not None:
            raise SandboxError("the nodes are already started")
        why = missing_requirements()
        if why:
            raise SandboxError(why)
        kubelet = self._kubelet or find_kubelet()
        pki = self.plane.pki
        if pki is None:
            raise SandboxError("the control plane is not started")
        t0 = time.monotonic()
        noderuns.sweep_dead_runs()
        self.run, self.run_dir = noderuns.claim_run()
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            archives = images.build_images(self.workdir / "images")
            self.plane.apply([nodeconfig.NODE_BINDING])
            ips = iter(noderuns.free_node_ips(sum(1 for s in self.specs if s.ip is None), []))
            for spec in self.specs:
                ip = spec.ip or next(ips)
                node = RealNode(spec, self.run, self.run_dir / spec.name, ip)
                self.nodes[spec.name] = node
                self._prepare(node, pki)
                self._start_containerd(node)
                for archive in archives.values():
                    node.ctr("images", "import", str(archive.path))
                self._start_kubelet(node, kubelet, pki)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds["total"] = time.monotonic() - t0
        LOG.info("real nodes %s up in %.1fs", list(self.nodes), self.startup_seconds["total"])
        return self

    def stop(self) -> None:
        """Stop every kubelet and containerd and sweep the run (module docstring)."""
        if self.run is None:
            return
        # The kubelets first (they would re-create what is killed), then containerd: it leaves
        # its shims and containers running, and the sweep kills those by pid.
        for node in self.nodes.values():
            if node.kubelet is not None:
                node.kubelet.stop()
        for node in self.nodes.values():
            if node.containerd is not None:
                node.containerd.stop()
        noderuns.sweep_run(self.run)
        self.run = None
        self.run_dir = None
        self.nodes = {}

    def node(self, name: str) -> RealNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise SandboxError(f"no node {name!r} (nodes: {list(self.nodes)})") from None

    def leftovers(self) -> list[str]:
        return noderuns.leftovers(self.run) if self.run is not None else []

    # ------------------------------------------------------------------ per node

    def _prepare(self, node: RealNode, pki: ControlPlanePki) -> None:
        for sub in ("kubelet", "cni/net.d", "cni/bin", "pki", "pod-logs", "volume-plugins"):
            (node.dir / sub).mkdir(parents=True, exist_ok=True)
        # The kubelet checks that its cgroup root exists in every hierarchy it uses.
        for hierarchy in noderuns.cgroup_hierarchies():
            if hierarchy.name == "unified":
                continue
            cg = hierarchy / node.cgroup_root.lstrip("/")
            cg.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (cg / f).write_text((hierarchy / f).read_text())
        run_tool(
            [
                "ip",
                "addr",
                "add",
                f"{node.ip}/32",
                "dev",
                "lo",
                "label",
                noderuns.address_label(node.run),
            ]
        )
        # containerd 1.6 takes one plugin directory (not a search path): the plugins of every
        # `cni_bin_dirs` entry are linked into the node's own, the first of a name winning.
        for directory in self.cni_bin_dirs:
            for plugin in sorted(directory.iterdir()) if directory.is_dir() else []:
                link = node.cni_bin_dir / plugin.name
                if plugin.is_file() and not link.exists() and not link.is_symlink():
                    link.symlink_to(plugin.resolve())
        conflist = dict(self._cni_conflist(node.name))
        (node.cni_conf_dir / "10-sandbox.conflist").write_text(json.dumps(conflist, indent=2))
        nodeconfig.issue_client_cert(
            pki, node.dir / "pki", "kubelet", f"/O=system:nodes/CN=system:node:{node.name}"
        )

    def _start_containerd(self, node: RealNode) -> None:
        config = node.dir / "containerd.toml"
        config.write_text(
            nodeconfig.containerd_config(
                node.dir,
                sandbox_image=images.PAUSE_IMAGE,
                cni_bin_dir=node.cni_bin_dir,
                cni_conf_dir=node.cni_conf_dir,
            )
        )

        def probe() -> str | None:
            result = subprocess.run(
                ["ctr", "-a", str(node.socket), "version"],
                capture_output=True, text=True, timeout=10, check=False,
            )  # fmt: skip
            return None if result.returncode == 0 else result.stderr.strip() or "no answer"

        node.containerd = Component(
            f"containerd[{node.name}]",
            ["containerd", "--config", str(config)],
            self.workdir / f"containerd-{node.name}.log",
            probe,
            self.ready_timeout,
        )
        t = time.monotonic()
        node.containerd.start()
        self.startup_seconds[f"containerd[{node.name}]"] = time.monotonic() - t

    def _start_kubelet(self, node: RealNode, kubelet: Path, pki: ControlPlanePki) -> None:
        node.kubelet_port, node.healthz_port = free_tcp_ports(2)
        cert, key = node.dir / "pki" / "kubelet.crt", node.dir / "pki" / "kubelet.key"
        kubeconfig_path = node.dir / "kubelet.kubeconfig"
        from controller.sandbox.apiserver import kubeconfig  # noqa: PLC0415

        kubeconfig.write_kubeconfig(
            kubeconfig_path, self.plane.url, context=node.name, token=None,
            certificate_authority=pki.ca_cert, client_certificate=cert, client_key=key,
        )  # fmt: skip
        config = node.dir / "kubelet.json"
        config.write_text(json.dumps(nodeconfig.kubelet_configuration(node, pki.ca_cert), indent=2))
        argv = [
            str(kubelet),
            f"--config={config}",
            f"--kubeconfig={kubeconfig_path}",
            f"--root-dir={node.dir / 'kubelet'}",
            f"--hostname-override={node.name}",
            f"--node-ip={node.ip}",
            "--v=1",
        ]
        if node.spec.labels:
            labels = ",".join(f"{k}={v}" for k, v in sorted(node.spec.labels.items()))
            argv.append(f"--node-labels={labels}")
        probe = _healthz(node.healthz_port)
        node.kubelet = Component(
            f"kubelet[{node.name}]",
            argv,
            self.workdir / f"kubelet-{node.name}.log",
            probe,
            self.ready_timeout,
        )
        t = time.monotonic()
        node.kubelet.start()
        self.startup_seconds[f"kubelet[{node.name}]"] = time.monotonic() - t

    # ------------------------------------------------------------------ readiness

    def wait_ready(self, names: Iterable[str] | None = None, timeout: float | None = None) -> None:
        """Wait until the nodes (default: all) are Ready in the API."""
        from kubernetes import client  # noqa: PLC0415

        want = set(self.nodes if names is None else names)
        limit = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        with self.plane.api_client() as api:
            core = client.CoreV1Api(api)
            while True:
                ready = {
                    n.metadata.name
                    for n in core.list_node().items
                    if n.metadata is not None
                    and n.status is not None
                    and any(
                        c.type == "Ready" and c.status == "True"
                        for c in (n.status.conditions or [])
                    )
                }
                if want <= ready:
                    return
                for name in want - ready:
                    kubelet = self.nodes[name].kubelet
                    if kubelet is not None and not kubelet.running:
                        raise SandboxError(
                            f"{kubelet.name} exited; log: {kubelet.log}\n{kubelet.log_tail()}"
                        )
                if time.monotonic() > deadline:
                    tails = "\n".join(
                        f"{k.name}: {k.log}\n{k.log_tail(10)}"
                        for k in (self.nodes[n].kubelet for n in sorted(want - ready))
                        if k is not None
                    )
                    raise SandboxError(
                        f"nodes {sorted(want - ready)} not Ready after {limit:.0f}s\n{tails}"
                    )
                time.sleep(0.2)


def _healthz(port: int) -> Callable[[], str | None]:
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    url = f"http://127.0.0.1:{port}/healthz"

    def probe() -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                body: bytes = resp.read()
        except (OSError, urllib.error.URLError) as e:
            return f"{url}: {e}"
        return None if body.strip() == b"ok" else f"{url} answered {body[:200]!r}"

    return probe
