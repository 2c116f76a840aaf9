"""Throwaway OVN Northbound ovsdb-servers: one standalone server, or a Raft cluster on loopback.

Contract:

* `NbServer(workdir).start()` creates an empty OVN_Northbound database from Debian's schema and
  runs `ovsdb-server` as a *foreground child* of this process (never `--detach`), listening on a
  unix socket (always) and optionally on a kernel-chosen loopback TCP port. `start()` returns
  once the server accepts connections; `stop()` returns once the process has exited (it is our
  child, so we reap it: no zombies, deterministic teardown). The child gets PDEATHSIG=SIGKILL so a
  crashed test run leaves no server behind.
* `NbServer(workdir, pki=SandboxPki.create(dir))` also listens with ssl on a loopback port
  (`ssl_remote`), for clients holding the matching client certificate.
* `restart()` stops and starts the same database on the same socket and port, keeping its rows.
* `pause()` / `resume()` SIGSTOP and SIGCONT the server: a hung server, connections open.
* `NbCluster(workdir, size=3)` builds a Raft cluster of `size` members on loopback TCP (cluster
  ports) with one unix socket per member for clients; `remote` is the comma-separated list a
  leader-only client takes. `leader()` asks each member's unixctl socket who leads;
  `kill(i)` SIGKILLs member i.

* The servers are children of this process started by the shared helpers of
  controller/sandbox/processes.py (`spawn`, `wait_ready`, `stop_process`).

Needs `ovsdb-tool`, `ovsdb-server`, `ovs-appctl` (openvswitch-common) and the NB schema
(ovn-central). Every wait is bounded by a deadline and raises `SandboxError` when it expires.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from controller.sandbox.processes import (
    SandboxError,
    Service,
    can_connect_unix,
    free_tcp_ports,
    run_tool,
    spawn,
    stop_process,
    wait_ready,
)

LOG = logging.getLogger(__name__)

NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
NB_DB_NAME = "OVN_Northbound"
_PR_SET_PDEATHSIG = 1
_PORT_RE = re.compile(rb"listening on port (\d+)")
# sockaddr_un.sun_path holds 108 bytes including the NUL; ovsdb-server copes with longer paths,
# but our readiness probe connects with a plain socket.
_MAX_UNIX_PATH = 107


def _require_tools() -> None:
    missing = [t for t in ("ovsdb-tool", "ovsdb-server") if shutil.which(t) is None]
    if missing or not NB_SCHEMA.exists():
        raise SandboxError(
            f"OVN Northbound sandbox needs Debian's ovn-central (missing: "
            f"{', '.join(missing) or NB_SCHEMA})"
        )


class _ServerProcess:
    """One ovsdb-server child process over an existing database file."""

    def __init__(
        self, workdir: Path, name: str, db: Path, *, tcp: bool, pki: SandboxPki | None = None
    ) -> None:
        self.workdir = workdir
        self.name = name
        self.db = db
        self.tcp = tcp or pki is not None
        self.pki = pki
        self.sock = workdir / f"{name}.sock"
        self.ctl = workdir / f"{name}.ctl"
        self.log = workdir / f"{name}.log"
        self.tcp_port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if len(str(self.sock)) > _MAX_UNIX_PATH:
            raise SandboxError(f"unix socket path too long (> {_MAX_UNIX_PATH}): {self.sock}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        with contextlib.suppress(FileNotFoundError):
            self.sock.unlink()
        args = [
            "ovsdb-server",
            str(self.db),
            f"--remote=punix:{self.sock}",
            f"--unixctl={self.ctl}",
            f"--log-file={self.log}",
            "--no-chdir",
            "-vconsole:off",
            "-vsocket_util:console:info",
            "-vfile:info",
        ]
        if self.pki is not None:
            args += [
                f"--private-key={self.pki.server_key}",
                f"--certificate={self.pki.server_cert}",
                f"--ca-cert={self.pki.ca_cert}",
                f"--remote=pssl:{self.tcp_port or 0}:127.0.0.1",
            ]
        elif self.tcp:
            # Reuse the first kernel-chosen port on restart so tcp clients can reconnect.
            args.append(f"--remote=ptcp:{self.tcp_port or 0}:127.0.0.1")
        self.proc = spawn(args, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        if self.tcp and self.tcp_port is None:
            self.tcp_port = self._read_tcp_port(deadline)
        try:
            wait_ready(
                self.proc,
                lambda: can_connect_unix(self.sock),
                deadline - time.monotonic(),
                f"ovsdb-server {self.name}",
                self.log,
            )
        except SandboxError:
            self.stop()
            raise

    def _read_tcp_port(self, deadline: float) -> int:
        assert self.proc is not None and self.proc.stderr is not None
        stderr = self.proc.stderr
        os.set_blocking(stderr.fileno(), False)
        buf = b""
        while time.monotonic() < deadline:
            chunk = stderr.read()
            if chunk:
                buf += chunk
                m = _PORT_RE.search(buf)
                if m:
                    return int(m.group(1))
            elif self.proc.poll() is not None:
                break
            time.sleep(0.002)
        self.stop()
        raise SandboxError(f"ovsdb-server {self.name} reported no tcp port: {buf!r}")

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, sig, timeout)

    def send_signal(self, sig: signal.Signals) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise SandboxError(f"ovsdb-server {self.name} is not running")
        self.proc.send_signal(sig)

    def appctl(self, *args: str, timeout: float = 5.0) -> str:
        return run_tool(["ovs-appctl", "-t", str(self.ctl), "--timeout=5", *args], timeout)


@dataclass(frozen=True, slots=True)
class SandboxPki:
    """A throwaway CA with one server and one client certificate (PEM files)."""

    ca_cert: Path
    server_key: Path
    server_cert: Path
    client_key: Path
    client_cert: Path

    @classmethod
    def create(cls, workdir: Path | str) -> SandboxPki:
        d = Path(workdir)
        d.mkdir(parents=True, exist_ok=True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run_tool(
            [
                "openssl",
                "req",
                "-x509",
                *ec,
                "-keyout",
                str(d / "ca.key"),
                "-out",
                str(d / "ca.crt"),
                "-subj",
                "/CN=nb-test-ca",
                "-days",
                "2",
            ]
        )
        for who in ("server", "client"):
            run_tool(
                [
                    "openssl",
                    "req",
                    *ec,
                    "-keyout",
                    str(d / f"{who}.key"),
                    "-out",
                    str(d / f"{who}.csr"),
                    "-subj",
                    f"/CN=nb-test-{who}",
                ]
            )
            run_tool(
                [
                    "openssl",
                    "x509",
                    "-req",
                    "-in",
                    str(d / f"{who}.csr"),
                    "-CA",
                    str(d / "ca.crt"),
                    "-CAkey",
                    str(d / "ca.key"),
                    "-CAcreateserial",
                    "-out",
                    str(d / f"{who}.crt"),
                    "-days",
                    "2",
                ]
            )
        return cls(
            d / "ca.crt", d / "server.key", d / "server.crt", d / "client.key", d / "client.crt"
        )


class NbServer(Service):
    """A standalone OVN_Northbound ovsdb-server in `workdir` (see the module docstring)."""

    def __init__(
        self,
        workdir: Path | str,
        *,
        tcp: bool = False,
        db: Path | None = None,
        pki: SandboxPki | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.db = db or self.workdir / "nb.db"
        self._proc = _ServerProcess(self.workdir, "nb", self.db, tcp=tcp, pki=pki)

    @property
    def remote(self) -> str:
        return f"unix:{self._proc.sock}"

    @property
    def tcp_remote(self) -> str:
        if self._proc.tcp_port is None or self._proc.pki is not None:
            raise SandboxError("server was not started with tcp=True")
        return f"tcp:127.0.0.1:{self._proc.tcp_port}"

    @property
    def ssl_remote(self) -> str:
        if self._proc.tcp_port is None or self._proc.pki is None:
            raise SandboxError("server was not started with a pki")
        return f"ssl:127.0.0.1:{self._proc.tcp_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc.running

    def start(self) -> NbServer:
        _require_tools()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self.db.exists():
            run_tool(["ovsdb-tool", "create", str(self.db), str(NB_SCHEMA)])
        self._proc.start()
        LOG.debug("NB ovsdb-server pid %s on %s", self.pid, self.remote)
        return self

    def stop(self) -> None:
        self._proc.stop()

    def kill(self) -> None:
        self._proc.stop(signal.SIGKILL)

    def restart(self) -> None:
        self._proc.stop()
        self._proc.start()

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets open and answers nothing (a hung server)."""
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: it carries on with what its clients sent meanwhile."""
        self._proc.send_signal(signal.SIGCONT)


class NbCluster(Service):
    """A Raft OVN_Northbound cluster of `size` members on loopback (see the module docstring)."""

    def __init__(self, workdir: Path | str, size: int = 3) -> None:
        if size < 1:
            raise SandboxError("a cluster needs at least one member")
        self.workdir = Path(workdir)
        self.size = size
        self.members: list[_ServerProcess] = []

    @property
    def remote(self) -> str:
        return ",".join(f"unix:{m.sock}" for m in self.members)

    def member_remote(self, i: int) -> str:
        return f"unix:{self.members[i].sock}"

    def start(self, timeout: float = 20.0) -> NbCluster:
        _require_tools()
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = free_tcp_ports(self.size)
        addrs = [f"tcp:127.0.0.1:{p}" for p in ports]
        for i, addr in enumerate(addrs):
            db = self.workdir / f"nb{i}.db"
            if i == 0:
                run_tool(["ovsdb-tool", "create-cluster", str(db), str(NB_SCHEMA), addr])
            else:
                run_tool(["ovsdb-tool", "join-cluster", str(db), NB_DB_NAME, addr, addrs[0]])
            self.members.append(_ServerProcess(self.workdir, f"nb{i}", db, tcp=False))
        for m in self.members:
            m.start(timeout)
        self.wait_for_leader(timeout, joined=self.size)
        return self

    def _status(self, i: int) -> str:
        return self.members[i].appctl("cluster/status", NB_DB_NAME)

    def leader(self) -> int | None:
        """Index of the member that says it leads, or None during an election."""
        for i, m in enumerate(self.members):
            if not m.running:
                continue
            try:
                status = self._status(i)
            except SandboxError:
                continue
            if re.search(r"^Role: leader$", status, re.M):
                return i
        return None

    def wait_for_leader(self, timeout: float = 20.0, joined: int = 0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            lead = self.leader()
            if lead is not None and (joined == 0 or self._servers_in(lead) >= joined):
                return lead
            if time.monotonic() > deadline:
                raise SandboxError(f"no Raft leader after {timeout}s")
            time.sleep(0.05)

    def _servers_in(self, i: int) -> int:
        status = self._status(i)
        block = status.split("Servers:", 1)[-1]
        return len(re.findall(r"^\s+\S+ \(\S+ at ", block, re.M))

    def kill(self, i: int) -> None:
        self.members[i].stop(signal.SIGKILL)

    def stop(self) -> None:
        for m in self.members:
            m.stop()
