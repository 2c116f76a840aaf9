"""A real OVN data plane on one machine: SB database, ovn-northd, one OVS and one ovn-controller.

Contract:

* `DataPlane(workdir, nb_remote).start()` (or `with DataPlane(...) as dp:`) starts, in this
  order and each only once the previous one answers: the OVN_Southbound ovsdb-server,
  ovn-northd (translating the NB database at `nb_remote`, which the caller runs, into the SB),
  the Open_vSwitch ovsdb-server (conf.db), ovs-vswitchd with the userspace (netdev) datapath and
  the integration bridge `br-int`, and ovn-controller as the one chassis that carries every
  simulated node's pods. Databases, logs, pid files and control sockets live in `workdir`.
  `start()` returns once the chassis is registered in the SB; `startup_seconds` says how long
  that took.
* Every daemon is a foreground child of this process started through `ovsdb.spawn`
  (PDEATHSIG=SIGKILL: a crashed test run leaves no daemon behind) and is stopped by its pid.
* ovs-vswitchd and ovn-controller run inside a network namespace of their own
  (`kop-<run>-ovs`): the netdev datapath's tap devices (`br-int`, `ovs-netdev`) and the host ends
  of the pods' veths live there, never in the machine's own namespace, so two runs never collide
  and deleting the run's namespaces removes every interface it made.
* Names: every namespace of a run is `kop-<run>-<tag>`, its owner recorded before it creates
  one (runs.py); interfaces are named by the caller (`cni.py` keeps them under IFNAMSIZ).
  `start()` first sweeps what dead runs left (`runs.sweep_dead_runs`).
* `stop()` (idempotent, also after a failed `start()`) stops ovn-controller, deletes the run's
  pod and node namespaces, stops ovs-vswitchd, the conf.db server, ovn-northd and the SB server,
  deletes the OVS namespace and the owner record. The caller removes `workdir`.
* Helpers for tests and tools: `vsctl`/`sbctl` (the run's databases), `trace` (ovn-trace),
  `exec_in` (a command in a namespace), `ping` (one echo, its round-trip time or None),
  `tcp_listen`/`tcp_connect`, `add_netns`/`delete_netns`.

Needs root and Debian's `ovn-central`, `ovn-host`, `openvswitch-switch`, `iputils-ping` and
`ethtool` (`.ci/setup` installs them); `missing_requirements()` says what is absent, in one line.
Every wait is bounded by a deadline and raises `SandboxError` when it expires.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.sandbox.ovn.daemon import Daemon
from controller.sandbox.ovn.ovsdb import _ServerProcess
from controller.sandbox.ovn.runs import (
    NETNS_DIR,
    NETNS_PREFIX,
    OWNER_DIR,
    claim_run_id,
    delete_netns,
    list_netns,
    run_of,
    sweep_dead_runs,
)
from controller.sandbox.processes import (
    SandboxError,
    Service,
    can_connect_unix,
    die_with_parent,
    log_tail,
    run_tool,
    stop_process,
    wait_ready,
)

# The CNI stand-in takes the bridge and the namespace directory from here, beside the DataPlane
# it wires pods into.
__all__ = ["BRIDGE", "NETNS_DIR", "DataPlane", "missing_requirements"]

LOG = logging.getLogger(__name__)

SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")
VSWITCH_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
BRIDGE = "br-int"
_TOOLS = (
    "ovsdb-tool",
    "ovsdb-server",
    "ovs-vsctl",
    "ovs-vswitchd",
    "ovn-northd",
    "ovn-controller",
    "ovn-sbctl",
    "ovn-appctl",
    "ip",
    "ping",
    "ethtool",
)
_RTT_RE = re.compile(r"time[=<]([\d.]+) ms")


def missing_requirements() -> str:
    """Why a data plane cannot run here ("" when it can), as one line."""
    if os.geteuid() != 0:
        return "the data plane needs root (network namespaces, veths, ovs-vswitchd)"
    missing = [t for t in _TOOLS if shutil.which(t) is None]
    missing += [str(p) for p in (SB_SCHEMA, VSWITCH_SCHEMA) if not p.exists()]
    if missing:
        return (
            "the data plane needs Debian's ovn-central, ovn-host, openvswitch-switch, "
            f"iputils-ping and ethtool (missing: {', '.join(missing)})"
        )
    return ""


class DataPlane(Service):
    """SB + ovn-northd + OVS + ovn-controller in `workdir` (see the module docstring)."""

    def __init__(
        self,
        workdir: Path | str,
        nb_remote: str,
        *,
        chassis: str = "",
        timeout: float = 20.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.nb_remote = nb_remote
        self.timeout = timeout
        self.run_id = ""
        self.chassis = chassis
        self.startup_seconds = 0.0
        self._sb: _ServerProcess | None = None
        self._conf: _ServerProcess | None = None
        self._daemons: dict[str, Daemon] = {}
        self._env: dict[str, str] = {}

    # --- names ----------------------------------------------------------------------------------
    @property
    def ovs_netns(self) -> str:
        return self.netns_name("ovs")

    def netns_name(self, tag: str) -> str:
        if not self.run_id:
            raise SandboxError("the data plane is not started")
        return f"{NETNS_PREFIX}{self.run_id}-{tag}"

    @property
    def sb_remote(self) -> str:
        return f"unix:{self.workdir / 'sb.sock'}"

    @property
    def conf_remote(self) -> str:
        return f"unix:{self.workdir / 'conf.sock'}"

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> DataPlane:
        why = missing_requirements()
        if why:
            raise SandboxError(why)
        t0 = time.monotonic()
        sweep_dead_runs()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.run_id = claim_run_id()
        self.chassis = self.chassis or f"kop-{self.run_id}"
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        LOG.info(
            "data plane %s up in %.2fs (chassis %s)",
            self.run_id,
            self.startup_seconds,
            self.chassis,
        )
        return self

    def _start(self) -> None:
        wd = self.workdir
        deadline = time.monotonic() + self.timeout
        self._env = {
            **os.environ,
            # ovn-controller rejects --unixctl and finds br-int's OpenFlow socket (br-int.mgmt,
            # made by ovs-vswitchd) through the run directory: point both at the work directory.
            "OVS_RUNDIR": str(wd),
            "OVN_RUNDIR": str(wd),
            "OVS_LOGDIR": str(wd),
            "OVN_LOGDIR": str(wd),
            "OVS_DBDIR": str(wd),
        }
        for name, schema in (("sb", SB_SCHEMA), ("conf", VSWITCH_SCHEMA)):
            db = wd / f"{name}.db"
            if not db.exists():
                run_tool(["ovsdb-tool", "create", str(db), str(schema)])
        self._sb = _ServerProcess(wd, "sb", wd / "sb.db", tcp=False)
        self._sb.start(self._left(deadline))

        northd = self._daemon(
            "ovn-northd",
            [
                "ovn-northd",
                f"--ovnnb-db={self.nb_remote}",
                f"--ovnsb-db={self.sb_remote}",
                f"--unixctl={wd / 'ovn-northd.ctl'}",
            ],
        )
        self._wait(northd, self._northd_active, deadline)

        self._conf = _ServerProcess(wd, "conf", wd / "conf.db", tcp=False)
        self._conf.start(self._left(deadline))
        run_tool(["ip", "netns", "add", self.ovs_netns])
        self.exec_in(self.ovs_netns, ["ip", "link", "set", "lo", "up"])
        # The veths' host ends need no IPv6 of their own (no router solicitations into br-int).
        self.exec_in(
            self.ovs_netns,
            [
                "sysctl",
                "-q",
                "-w",
                "net.ipv6.conf.default.disable_ipv6=1",
                "net.ipv6.conf.all.disable_ipv6=1",
            ],
        )
        self.vsctl("--no-wait", "init")
        self.vsctl(
            "--no-wait",
            "set",
            "open_vswitch",
            ".",
            f"external_ids:system-id={self.chassis}",
            f"external_ids:ovn-remote={self.sb_remote}",
            "external_ids:ovn-encap-type=geneve",
            "external_ids:ovn-encap-ip=127.0.0.1",
            "external_ids:ovn-bridge-datapath-type=netdev",
        )
        self.vsctl(
            "--no-wait",
            "--may-exist",
            "add-br",
            BRIDGE,
            "--",
            "set",
            "bridge",
            BRIDGE,
            "datapath_type=netdev",
            "fail-mode=secure",
            "other_config:disable-in-band=true",
        )
        vswitchd_ctl = wd / "ovs-vswitchd.ctl"
        vswitchd = self._daemon(
            "ovs-vswitchd",
            ["ovs-vswitchd", self.conf_remote, f"--unixctl={vswitchd_ctl}"],
            netns=self.ovs_netns,
        )
        self._wait(vswitchd, lambda: can_connect_unix(vswitchd_ctl), deadline)
        # without --no-wait, ovs-vsctl returns once ovs-vswitchd has applied the configuration
        self.vsctl("set", "bridge", BRIDGE, "stp_enable=false", timeout=self._left(deadline))

        controller = self._daemon(
            "ovn-controller", ["ovn-controller", self.conf_remote], netns=self.ovs_netns
        )
        self._wait(controller, self._chassis_registered, deadline)

    def _left(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SandboxError(f"data plane not up after {self.timeout}s")
        return left

    def _daemon(self, name: str, args: Sequence[str], netns: str = "") -> Daemon:
        daemon = Daemon(self.workdir, name, args, netns)
        self._daemons[name] = daemon
        daemon.start(self._env)
        return daemon

    def _wait(self, daemon: Daemon, ready: Callable[[], bool], deadline: float) -> None:
        assert daemon.proc is not None
        wait_ready(daemon.proc, ready, self._left(deadline), daemon.name, daemon.log)

    def _northd_active(self) -> bool:
        ctl = self.workdir / "ovn-northd.ctl"
        if not can_connect_unix(ctl):
            return False
        try:
            status = run_tool(["ovn-appctl", "-t", str(ctl), "--timeout=2", "status"], 5.0)
        except SandboxError:
            return False
        return "active" in status

    def _chassis_registered(self) -> bool:
        try:
            out = self.sbctl("--bare", "--columns=name", "find", "chassis", f"name={self.chassis}")
        except SandboxError:
            return False
        return out.strip() == self.chassis

    def stop(self) -> None:
        """Stop everything this run started and delete its namespaces (see the docstring)."""
        errors: list[str] = []

        def attempt(what: str, fn: Callable[[], None]) -> None:
            try:
                fn()
            except (SandboxError, OSError) as exc:
                errors.append(f"{what}: {exc}")

        if "ovn-controller" in self._daemons:
            attempt("ovn-controller", self._daemons.pop("ovn-controller").stop)
        if self.run_id:
            for name in list_netns():
                if run_of(name) == self.run_id and name != self.ovs_netns:
                    attempt(f"namespace {name}", functools.partial(delete_netns, name))
        for name in ("ovs-vswitchd",):
            if name in self._daemons:
                attempt(name, self._daemons.pop(name).stop)
        if self._conf is not None:
            attempt("conf.db server", self._conf.stop)
            self._conf = None
        if "ovn-northd" in self._daemons:
            attempt("ovn-northd", self._daemons.pop("ovn-northd").stop)
        if self._sb is not None:
            attempt("SB server", self._sb.stop)
            self._sb = None
        for daemon in self._daemons.values():
            attempt(daemon.name, daemon.stop)
        self._daemons.clear()
        if self.run_id:
            attempt("OVS namespace", lambda: delete_netns(self.ovs_netns))
            with contextlib.suppress(FileNotFoundError):
                (OWNER_DIR / f"{self.run_id}.owner").unlink()
        if errors:
            raise SandboxError("data plane stop: " + "; ".join(errors))

    # --- tools ----------------------------------------------------------------------------------
    def vsctl(self, *args: str, timeout: float = 10.0) -> str:
        return run_tool(
            ["ovs-vsctl", f"--db={self.conf_remote}", f"--timeout={max(1, int(timeout))}", *args],
            timeout + 1,
        )

    def sbctl(self, *args: str, timeout: float = 10.0) -> str:
        return run_tool(
            ["ovn-sbctl", f"--db={self.sb_remote}", f"--timeout={int(timeout)}", *args],
            timeout + 1,
        )

    def trace(self, datapath: str, microflow: str) -> str:
        """`ovn-trace` of `microflow` entering logical switch/router `datapath` (on the SB)."""
        return run_tool(["ovn-trace", f"--db={self.sb_remote}", datapath, microflow], 10.0)

    def log_of(self, daemon: str) -> str:
        return log_tail(self.workdir / f"{daemon}.log")

    def exec_in(
        self, netns: str, argv: Sequence[str], *, timeout: float = 10.0, stdin: str = ""
    ) -> str:
        """Run `argv` in namespace `netns` and return its stdout (`SandboxError` on failure)."""
        args = ["ip", "netns", "exec", netns, *argv]
        try:
            out = subprocess.run(
                args, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as e:
            raise SandboxError(f"{' '.join(argv)} in {netns} timed out after {timeout}s") from e
        if out.returncode != 0:
            raise SandboxError(
                f"{' '.join(argv)} in {netns} failed ({out.returncode}): {out.stderr.strip()}"
            )
        return out.stdout

    def add_netns(self, tag: str) -> str:
        """Create (if missing) namespace `kop-<run>-<tag>` with its loopback up."""
        name = self.netns_name(tag)
        if not (NETNS_DIR / name).exists():
            run_tool(["ip", "netns", "add", name])
            run_tool(["ip", "-n", name, "link", "set", "lo", "up"])
        return name

    def delete_netns(self, name: str) -> None:
        delete_netns(name)

    def ping(
        self, netns: str, address: str, *, wait: float = 1.0, source: str = ""
    ) -> float | None:
        """One ICMP echo from `netns` to `address` (from `source` when given): the round-trip
        time in ms, None if none came back within `wait` seconds."""
        args = ["ip", "netns", "exec", netns, "ping", "-n", "-q", "-c1", f"-W{wait:g}"]
        if ":" in address:
            args.append("-6")
        if source:
            args += ["-I", source]
        out = subprocess.run(
            [*args, address], capture_output=True, text=True, timeout=wait + 5, check=False
        )
        if out.returncode != 0:
            return None
        m = re.search(r"= ([\d.]+)/", out.stdout)
        return float(m.group(1)) if m else 0.0

    def tcp_listen(
        self, netns: str, address: str, port: int, *, reply: bytes = b""
    ) -> subprocess.Popen[bytes]:
        """A listener on `address`:`port` in `netns` that sends `reply` on every connection and
        closes it; returns once it listens. The caller stops it with `stop_process`."""
        code = (
            "import socket,sys\n"
            f"s=socket.socket(socket.AF_INET6 if ':' in {address!r} else socket.AF_INET)\n"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
            f"s.bind(({address!r},{port}));s.listen(16)\n"
            "sys.stdout.write('ready\\n');sys.stdout.flush()\n"
            "while True:\n"
            " c,_=s.accept()\n"
            f" c.sendall({reply!r});c.close()\n"
        )
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),  # noqa: PLW1509 - one foreign call, no locks
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != b"ready":
            stop_process(proc)
            raise SandboxError(f"tcp listener on {address}:{port} in {netns} did not start")
        return proc

    def tcp_request(
        self, netns: str, address: str, port: int, *, wait: float = 1.0
    ) -> bytes | None:
        """Connect from `netns` to `address`:`port` and read until the peer closes: what it
        sent, or None when no connection opened within `wait` s."""
        code = (
            "import socket,sys\n"
            f"s=socket.socket(socket.AF_INET6 if ':' in {address!r} else socket.AF_INET)\n"
            f"s.settimeout({wait})\n"
            f"s.connect(({address!r},{port}))\n"
            "data=b''\n"
            "while chunk:=s.recv(4096): data+=chunk\n"
            "sys.stdout.buffer.write(data)\n"
        )
        out = subprocess.run(
            ["ip", "netns", "exec", netns, sys.executable, "-c", code],
            capture_output=True,
            timeout=wait + 10,
            check=False,
        )
        return out.stdout if out.returncode == 0 else None

    def tcp_connect(self, netns: str, address: str, port: int, *, wait: float = 1.0) -> bool:
        """Whether a TCP connection from `netns` to `address`:`port` opens within `wait` s."""
        code = (
            "import socket,sys\n"
            f"s=socket.socket(socket.AF_INET6 if ':' in {address!r} else socket.AF_INET)\n"
            f"s.settimeout({wait})\n"
            f"sys.exit(0 if s.connect_ex(({address!r},{port}))==0 else 1)\n"
        )
        out = subprocess.run(
            ["ip", "netns", "exec", netns, sys.executable, "-c", code],
            capture_output=True,
            timeout=wait + 10,
            check=False,
        )
        return out.returncode == 0
