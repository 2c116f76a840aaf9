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
  `start()` first sweeps every run whose owner is gone (`sweep_dead_runs()`), with the same
  steps as `stop()`; `leftovers(run)` lists what a run still holds (for tests and tools).
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

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import string
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from controller.sandbox.cluster import images
from controller.sandbox.cluster.controlplane import (
    Binaries,
    BinariesMissing,
    Component,
    ControlPlanePki,
    RealControlPlane,
    find_binaries,
)
from controller.sandbox.processes import SandboxError, free_tcp_ports, run_tool

LOG = logging.getLogger(__name__)

RUN_BASE = Path(os.environ.get("KUBE_OVN_NODE_RUN_BASE", "/var/lib/kube-ovn-sandbox-nodes"))
RUN_ID_LEN = 6
CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "kosn-"
NODE_IP_RANGE = ipaddress.ip_network("172.31.0.0/16")
CNI_BIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
CONTAINER_LOG_LINKS = Path("/var/log/containers")
ENV_KUBELET = "KUBE_OVN_KUBELET"
NODE_CLUSTER_ROLE_BINDING = "kube-ovn-sandbox-nodes"
_RUN_ALPHABET = string.ascii_lowercase + string.digits
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
    if not (CGROUP_V1 / "memory").is_dir():
        return f"real nodes need a cgroup v1 (or hybrid) host: no {CGROUP_V1 / 'memory'}"
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


# --------------------------------------------------------------------------- runs and sweeping


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _owner_alive(run_dir: Path) -> bool:
    try:
        pid_text, start = (run_dir / "owner").read_text().split()[:2]
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    return _start_time(pid) == start


def _claim_run() -> tuple[str, Path]:
    """A fresh run directory, holding its owner record from the moment it appears."""
    RUN_BASE.mkdir(parents=True, exist_ok=True)
    start = _start_time(os.getpid())
    for _ in range(100):
        run = "".join(secrets.choice(_RUN_ALPHABET) for _ in range(RUN_ID_LEN))
        run_dir = RUN_BASE / run
        if run_dir.exists() or run in _known_runs():
            continue
        # Written aside, then renamed: a sweep never sees the run without its owner.
        tmp = RUN_BASE / f".claim-{run}-{os.getpid()}"
        tmp.mkdir()
        (tmp / "owner").write_text(f"{os.getpid()} {start}\n")
        try:
            tmp.rename(run_dir)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        return run, run_dir
    raise SandboxError(f"could not find a free run id in {RUN_BASE}")


def _cgroup_hierarchies() -> list[Path]:
    """Every cgroup v1 hierarchy (controllers and named ones) plus the unified one if mounted."""
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fstype = right.split()[0] if right else ""
            mount_point = Path(left.split()[4])
            if fstype in ("cgroup", "cgroup2") and mount_point.is_relative_to(CGROUP_V1):
                found.append(mount_point)
    return sorted(set(found))


def _run_cgroups(run: str) -> list[Path]:
    """The run's top cgroup directories (one per node per hierarchy)."""
    out: list[Path] = []
    for hierarchy in _cgroup_hierarchies():
        with contextlib.suppress(OSError):
            out.extend(p for p in hierarchy.glob(f"{CGROUP_PREFIX}{run}-*") if p.is_dir())
    return out


def _cgroup_pids(top: Path) -> set[int]:
    pids: set[int] = set()
    for procs in top.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(p) for p in procs.read_text().split())
    return pids


def _processes_mentioning(text: str) -> set[int]:
    """Processes whose command line holds `text` (the run directory: its daemons and shims)."""
    me = os.getpid()
    pids: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == me:
            continue
        with contextlib.suppress(OSError):
            if text.encode() in (proc / "cmdline").read_bytes():
                pids.add(int(proc.name))
    return pids


def _mounts_under(directory: Path) -> list[str]:
    prefix = str(directory)
    out: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                out.append(point)
    return out


def _run_addresses(run: str) -> list[str]:
    """The run's node addresses on `lo` ("a.b.c.d/32"), found by their label."""
    label = _address_label(run)
    out = run_tool(["ip", "-4", "-o", "addr", "show", "dev", "lo"])
    found: list[str] = []
    for line in out.splitlines():
        words = line.replace("\\", " ").split()
        if label in words and "inet" in words:
            found.append(words[words.index("inet") + 1])
    return found


def _address_label(run: str) -> str:
    return f"lo:k{run}"


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if Path(f"/proc/{p}").exists() and not _is_zombie(p)}
        if alive:
            time.sleep(0.05)
    return alive


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def leftovers(run: str) -> list[str]:
    """What the run still holds on this machine: processes, mounts, cgroups, addresses, dirs."""
    run_dir = RUN_BASE / run
    found: list[str] = []
    found += [f"process {p}" for p in sorted(_processes_mentioning(str(run_dir)))]
    for top in _run_cgroups(run):
        found.append(f"cgroup {top}")
        found += [f"process {p} in {top}" for p in sorted(_cgroup_pids(top))]
    found += [f"mount {m}" for m in _mounts_under(run_dir)]
    found += [f"address {a} on lo" for a in _run_addresses(run)]
    found += [f"log link {link}" for link in _log_links(run_dir)]
    if run_dir.exists():
        found.append(f"directory {run_dir}")
    return found


def _log_links(run_dir: Path) -> list[Path]:
    out: list[Path] = []
    with contextlib.suppress(OSError):
        for link in CONTAINER_LOG_LINKS.iterdir():
            with contextlib.suppress(OSError):
                if link.is_symlink() and os.readlink(link).startswith(str(run_dir) + "/"):
                    out.append(link)
    return out


def sweep_run(run: str) -> None:
    """Remove everything the run holds (see the module docstring), in an order that works."""
    run_dir = RUN_BASE / run
    # Containers first (their shims would restart nothing, but reap them), then the shims and
    # any daemon of the run still alive, found by the run directory in their command line.
    for _ in range(5):
        in_cgroups: set[int] = set()
        for top in _run_cgroups(run):
            in_cgroups |= _cgroup_pids(top)
        daemons = _processes_mentioning(str(run_dir))
        if not in_cgroups and not daemons:
            break
        _kill(in_cgroups)
        _kill(daemons)
        _wait_gone(in_cgroups | daemons, 5.0)
    # Mounts: deepest first, detached (a busy mount goes once its last user does); kubelet's
    # root dir is a shared bind mount of itself, so propagation may show a point twice.
    for _ in range(10):
        points = _mounts_under(run_dir)
        if not points:
            break
        for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    # cgroups: leaves first; a cgroup empties a moment after its last process is reaped.
    for top in _run_cgroups(run):
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, top]:
            deadline = time.monotonic() + 5.0
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        LOG.warning("cannot remove cgroup %s: %s", d, e)
                        break
                    time.sleep(0.05)
    for address in _run_addresses(run):
        subprocess.run(
            ["ip", "addr", "del", address, "dev", "lo"], capture_output=True, check=False
        )
    for link in _log_links(run_dir):
        with contextlib.suppress(OSError):
            link.unlink()
    if run_dir.exists() and not _mounts_under(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)


def _known_runs() -> set[str]:
    """Every run this machine shows a trace of: run directories, cgroups, node addresses."""
    runs: set[str] = set()
    with contextlib.suppress(FileNotFoundError):
        runs.update(p.name for p in RUN_BASE.iterdir() if p.is_dir() and p.name[0] != ".")
    for hierarchy in _cgroup_hierarchies():
        with contextlib.suppress(OSError):
            for p in hierarchy.glob(f"{CGROUP_PREFIX}*-*"):
                runs.add(p.name[len(CGROUP_PREFIX) :].split("-", 1)[0])
    out = run_tool(["ip", "-4", "-o", "addr", "show", "dev", "lo"])
    for word in out.replace("\\", " ").split():
        if word.startswith("lo:k") and len(word) == len("lo:k") + RUN_ID_LEN:
            runs.add(word[len("lo:k") :])
    return {r for r in runs if len(r) == RUN_ID_LEN}


def sweep_dead_runs() -> list[str]:
    """Sweep every run whose owner process is gone (or that has no owner record left)."""
    swept: list[str] = []
    for run in sorted(_known_runs()):
        if not _owner_alive(RUN_BASE / run):
            LOG.info("sweeping real-node run %s left by a dead owner", run)
            sweep_run(run)
            swept.append(run)
    return swept


# --------------------------------------------------------------------------- one node


def _free_node_ips(n: int, taken: Iterable[str]) -> list[str]:
    """`n` addresses in `NODE_IP_RANGE` that no interface holds yet."""
    used = set(taken)
    out = run_tool(["ip", "-4", "-o", "addr", "show"])
    for line in out.splitlines():
        words = line.split()
        if "inet" in words:
            used.add(words[words.index("inet") + 1].split("/")[0])
    hosts = list(NODE_IP_RANGE.hosts())
    picked: list[str] = []
    start = secrets.randbelow(len(hosts))
    for i in range(len(hosts)):
        ip = str(hosts[(start + i) % len(hosts)])
        if ip not in used and not ip.endswith((".0", ".255")):
            picked.append(ip)
            used.add(ip)
            if len(picked) == n:
                return picked
    raise SandboxError(f"no free node address left in {NODE_IP_RANGE}")


def _issue_client_cert(pki: ControlPlanePki, directory: Path, name: str, subject: str) -> None:
    ext = directory / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
        encoding="utf-8",
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run_tool(
        ["openssl", "req", "-new", *ec, "-keyout", str(directory / f"{name}.key"),
         "-out", str(directory / f"{name}.csr"), "-subj", subject]
    )  # fmt: skip
    run_tool(
        ["openssl", "x509", "-req", "-in", str(directory / f"{name}.csr"),
         "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key), "-CAcreateserial",
         "-out", str(directory / f"{name}.crt"), "-days", "7", "-extfile", str(ext)]
    )  # fmt: skip


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def containerd_config(
    node_dir: Path, *, sandbox_image: str, cni_bin_dir: Path, cni_conf_dir: Path
) -> str:
    """containerd 1.6's configuration (version 2) for one node, every path under `node_dir`."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    tables: list[tuple[str, dict[str, Any]]] = [
        ("", {
            "version": 2,
            "root": str(node_dir / "containerd" / "root"),
            "state": str(node_dir / "containerd" / "state"),
            # Not used here; each would otherwise probe or fail on this host at every start.
            "disabled_plugins": [
                "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
            ],
        }),
        ("grpc", {"address": str(node_dir / "containerd.sock")}),
        ("ttrpc", {"address": str(node_dir / "containerd.sock.ttrpc")}),
        ("debug", {"address": ""}),
        ("metrics", {"address": ""}),
        ('plugins."io.containerd.internal.v1.opt"', {"path": str(node_dir / "containerd" / "opt")}),
        (cri, {
            "sandbox_image": sandbox_image,
            "enable_selinux": False,
            # The host withholds CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below
            # containerd's own, as the kubelet asks for the pause container (-998).
            "restrict_oom_score_adj": True,
            # Pod network namespaces under the node's state dir, not the shared /var/run/netns.
            "netns_mounts_under_state_dir": True,
            "stream_server_address": "127.0.0.1",
            "stream_server_port": "0",
            "disable_apparmor": True,
        }),
        (f"{cri}.containerd", {"snapshotter": "overlayfs", "default_runtime_name": "runc"}),
        (f"{cri}.containerd.runtimes.runc", {"runtime_type": "io.containerd.runc.v2"}),
        (f"{cri}.containerd.runtimes.runc.options", {
            "SystemdCgroup": False,
            "Root": str(node_dir / "runc"),
        }),
        (f"{cri}.cni", {
            "bin_dir": str(cni_bin_dir),
            "conf_dir": str(cni_conf_dir),
            "max_conf_num": 1,
        }),
    ]  # fmt: skip
    lines: list[str] = []
    for name, values in tables:
        if name:
            lines.append(f"\n[{name}]")
        lines.extend(f"  {k} = {_toml(v)}" for k, v in values.items())
    return "\n".join(lines) + "\n"


def loopback_conflist(node: str) -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": "sandbox-loopback", "plugins": [{"type": "loopback"}]}


class RealNode:
    """One node: its containerd and kubelet `Component`s, address, directories and ports."""

    def __init__(self, spec: NodeSpec, run: str, node_dir: Path, ip: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.run = run
        self.dir = node_dir
        self.ip = ip
        self.cgroup_root = f"/{CGROUP_PREFIX}{run}-{spec.name}"
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


class RealNodes:
    """containerd + kubelet per node against a `RealControlPlane` (module docstring)."""

    def __init__(
        self,
        plane: RealControlPlane,
        workdir: Path | str,
        nodes: Sequence[NodeSpec | str],
        *,
        kubelet: Path | None = None,
        cni_bin_dirs: Sequence[Path] = (),
        cni_conflist: Callable[[str], Mapping[str, Any]] = loopback_conflist,
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
        sweep_dead_runs()
        self.run, self.run_dir = _claim_run()
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            archives = images.build_images(self.workdir / "images")
            self.plane.apply([_NODE_BINDING])
            ips = iter(_free_node_ips(sum(1 for s in self.specs if s.ip is None), []))
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
        sweep_run(self.run)
        self.run = None
        self.run_dir = None
        self.nodes = {}

    def __enter__(self) -> RealNodes:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def node(self, name: str) -> RealNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise SandboxError(f"no node {name!r} (nodes: {list(self.nodes)})") from None

    def leftovers(self) -> list[str]:
        return leftovers(self.run) if self.run is not None else []

    # ------------------------------------------------------------------ per node

    def _prepare(self, node: RealNode, pki: ControlPlanePki) -> None:
        for sub in ("kubelet", "cni/net.d", "cni/bin", "pki", "pod-logs", "volume-plugins"):
            (node.dir / sub).mkdir(parents=True, exist_ok=True)
        # The kubelet checks that its cgroup root exists in every hierarchy it uses.
        for hierarchy in _cgroup_hierarchies():
            if hierarchy.name == "unified":
                continue
            cg = hierarchy / node.cgroup_root.lstrip("/")
            cg.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (cg / f).write_text((hierarchy / f).read_text())
        run_tool(
            ["ip", "addr", "add", f"{node.ip}/32", "dev", "lo", "label", _address_label(node.run)]
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
        _issue_client_cert(
            pki, node.dir / "pki", "kubelet", f"/O=system:nodes/CN=system:node:{node.name}"
        )

    def _start_containerd(self, node: RealNode) -> None:
        config = node.dir / "containerd.toml"
        config.write_text(
            containerd_config(
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
        config.write_text(json.dumps(self.kubelet_configuration(node, pki), indent=2))
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

    def kubelet_configuration(self, node: RealNode, pki: ControlPlanePki) -> dict[str, Any]:
        """The node's KubeletConfiguration (kubelet.config.k8s.io/v1beta1)."""
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # cgroup v1 hosts are refused by default from kubelet 1.35 on.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": node.cgroup_root,
            "cgroupsPerQOS": True,
            "enforceNodeAllocatable": [],
            "containerRuntimeEndpoint": f"unix://{node.socket}",
            "address": node.ip,
            "port": node.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": node.healthz_port,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(pki.ca_cert)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "failSwapOn": False,
            # No disk or memory thresholds: a busy build machine must not evict test pods.
            "evictionHard": {"memory.available": "0%", "nodefs.available": "0%",
                             "imagefs.available": "0%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "localStorageCapacityIsolation": False,
            "resolvConf": "",
            "clusterDomain": "cluster.local",
            "clusterDNS": ["10.0.0.10"],
            "podLogsDir": str(node.dir / "pod-logs"),
            "volumePluginDir": str(node.dir / "volume-plugins"),
            "serializeImagePulls": False,
            "registerNode": True,
            "nodeStatusUpdateFrequency": "5s",
            "syncFrequency": "10s",
            "staticPodPath": "",
            # Its iptables chains (KUBE-FIREWALL dropping non-loopback sources to 127/8, the
            # canaries) are machine-wide, shared by every kubelet and outlive them.
            "makeIPTablesUtilChains": False,
        }  # fmt: skip

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


#: Kubelets authenticate as `system:node:<name>` in `system:nodes`; without the Node authorizer
#: (the plane runs RBAC only) that group needs the `system:node` role bound explicitly.
_NODE_BINDING: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": NODE_CLUSTER_ROLE_BINDING},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:node",
    },
    "subjects": [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
    ],
}
