"""Real-node runs on this machine: who owns them, what they hold, and the sweep of dead ones.

A run keeps its state in `RUN_BASE/<run>/` (`<run>`: `RUN_ID_LEN` characters), its owner (pid
and start time) in `RUN_BASE/<run>/owner`, written aside and renamed into place so that a sweep
never sees a run without its owner. A run also holds cgroups `<hierarchy>/kosn-<run>-<node>`
in every cgroup hierarchy, node addresses on `lo` labelled `lo:k<run>`, mounts below its
directory, containers and shims (found in its cgroups and by the run directory in their
command line) and the kubelet's `/var/log/containers` links into it.

* `claim_run()`: a fresh run for this process.
* `leftovers(run)`: what the run still holds, one line per item.
* `sweep_run(run)`: kill, unmount, remove, in an order that works; `sweep_dead_runs()`: every
  run whose owner is gone (or that has no owner record left), found by any of its traces.
* `free_node_ips(n, taken)`: addresses in `NODE_IP_RANGE` no interface holds.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import secrets
import shutil
import signal
import string
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from controller.sandbox.processes import SandboxError, owner_alive, owner_record, run_tool

LOG = logging.getLogger(__name__)

RUN_BASE = Path(os.environ.get("KUBE_OVN_NODE_RUN_BASE", "/var/lib/kube-ovn-sandbox-nodes"))
RUN_ID_LEN = 6
CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "kosn-"
NODE_IP_RANGE = ipaddress.ip_network("172.31.0.0/16")
CONTAINER_LOG_LINKS = Path("/var/log/containers")
_RUN_ALPHABET = string.ascii_lowercase + string.digits


def claim_run() -> tuple[str, Path]:
    """A fresh run directory, holding its owner record from the moment it appears."""
    RUN_BASE.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        run = "".join(secrets.choice(_RUN_ALPHABET) for _ in range(RUN_ID_LEN))
        run_dir = RUN_BASE / run
        if run_dir.exists() or run in known_runs():
            continue
        # Written aside, then renamed: a sweep never sees the run without its owner.
        tmp = RUN_BASE / f".claim-{run}-{os.getpid()}"
        tmp.mkdir()
        (tmp / "owner").write_text(owner_record())
        try:
            tmp.rename(run_dir)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        return run, run_dir
    raise SandboxError(f"could not find a free run id in {RUN_BASE}")


def cgroup_hierarchies() -> list[Path]:
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


def run_cgroups(run: str) -> list[Path]:
    """The run's top cgroup directories (one per node per hierarchy)."""
    out: list[Path] = []
    for hierarchy in cgroup_hierarchies():
        with contextlib.suppress(OSError):
            out.extend(p for p in hierarchy.glob(f"{CGROUP_PREFIX}{run}-*") if p.is_dir())
    return out


def cgroup_pids(top: Path) -> set[int]:
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
    label = address_label(run)
    out = run_tool(["ip", "-4", "-o", "addr", "show", "dev", "lo"])
    found: list[str] = []
    for line in out.splitlines():
        words = line.replace("\\", " ").split()
        if label in words and "inet" in words:
            found.append(words[words.index("inet") + 1])
    return found


def address_label(run: str) -> str:
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
    for top in run_cgroups(run):
        found.append(f"cgroup {top}")
        found += [f"process {p} in {top}" for p in sorted(cgroup_pids(top))]
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
    _kill_run_processes(run, run_dir)
    _unmount_under(run_dir)
    for top in run_cgroups(run):
        _remove_cgroup_tree(top)
    for address in _run_addresses(run):
        subprocess.run(
            ["ip", "addr", "del", address, "dev", "lo"], capture_output=True, check=False
        )
    for link in _log_links(run_dir):
        with contextlib.suppress(OSError):
            link.unlink()
    if run_dir.exists() and not _mounts_under(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)


def _kill_run_processes(run: str, run_dir: Path) -> None:
    # Containers first (their shims would restart nothing, but reap them), then the shims and
    # any daemon of the run still alive, found by the run directory in their command line.
    for _ in range(5):
        in_cgroups: set[int] = set()
        for top in run_cgroups(run):
            in_cgroups |= cgroup_pids(top)
        daemons = _processes_mentioning(str(run_dir))
        if not in_cgroups and not daemons:
            return
        _kill(in_cgroups)
        _kill(daemons)
        _wait_gone(in_cgroups | daemons, 5.0)


def _unmount_under(run_dir: Path) -> None:
    # Deepest first, detached (a busy mount goes once its last user does); kubelet's root dir
    # is a shared bind mount of itself, so propagation may show a point twice.
    for _ in range(10):
        points = _mounts_under(run_dir)
        if not points:
            return
        for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _remove_cgroup_tree(top: Path) -> None:
    # Leaves first; a cgroup empties a moment after its last process is reaped.
    dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for d in [*dirs, top]:
        _remove_cgroup(d)


def _remove_cgroup(d: Path, patience: float = 5.0) -> None:
    deadline = time.monotonic() + patience
    while True:
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if time.monotonic() > deadline:
                LOG.warning("cannot remove cgroup %s: %s", d, e)
                return
            time.sleep(0.05)  # the kernel releases an emptied cgroup shortly after


def known_runs() -> set[str]:
    """Every run this machine shows a trace of: run directories, cgroups, node addresses."""
    runs: set[str] = set()
    with contextlib.suppress(FileNotFoundError):
        runs.update(p.name for p in RUN_BASE.iterdir() if p.is_dir() and p.name[0] != ".")
    for hierarchy in cgroup_hierarchies():
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
    for run in sorted(known_runs()):
        if not owner_alive(RUN_BASE / run / "owner"):
            LOG.info("sweeping real-node run %s left by a dead owner", run)
            sweep_run(run)
            swept.append(run)
    return swept


def free_node_ips(n: int, taken: Iterable[str]) -> list[str]:
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
