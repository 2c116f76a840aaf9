"""Which data-plane run owns which network namespaces, and the sweep of dead runs.

Every namespace of a run is `kop-<run>-<tag>` (`<run>`: `RUN_ID_LEN` characters, unique among
the live runs). `claim_run_id()` writes the run's owner record (pid and its start time) in
`OWNER_DIR` before the run creates a namespace; `sweep_dead_runs()` kills what is left in the
namespaces of runs whose owner is gone (or that have no record) and deletes them with the record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import string
from pathlib import Path

from controller.sandbox.processes import SandboxError, owner_alive, owner_record, run_tool

LOG = logging.getLogger(__name__)

OWNER_DIR = Path("/run/kube-ovn-sandbox")
NETNS_DIR = Path("/run/netns")
NETNS_PREFIX = "kop-"
RUN_ID_LEN = 4
_RUN_ALPHABET = string.ascii_lowercase + string.digits


def list_netns() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def run_of(netns: str) -> str | None:
    if not netns.startswith(NETNS_PREFIX):
        return None
    run, sep, _ = netns[len(NETNS_PREFIX) :].partition("-")
    return run if sep and len(run) == RUN_ID_LEN else None


def delete_netns(name: str) -> None:
    """Kill every process left in namespace `name` (by pid), then delete it; no-op if absent."""
    if not (NETNS_DIR / name).exists():
        return
    with contextlib.suppress(SandboxError):
        for pid_text in run_tool(["ip", "netns", "pids", name]).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_text), signal.SIGKILL)
    run_tool(["ip", "netns", "delete", name])


def sweep_dead_runs() -> list[str]:
    """Delete the namespaces (and owner records) of runs whose owner process is gone."""
    # Namespaces first, records second: a run writes its record before its first namespace, so
    # every namespace listed here whose run has no live record by the time the records are read
    # really is a leftover (a run starting meanwhile is in the records).
    namespaces = [n for n in list_netns() if run_of(n) is not None]
    live: set[str] = set()
    dead: set[str] = set()
    for record in OWNER_DIR.glob("*.owner") if OWNER_DIR.is_dir() else []:
        (live if owner_alive(record) else dead).add(record.stem)
    swept: set[str] = set()
    for name in namespaces:
        run = run_of(name)
        if run is not None and run not in live:
            LOG.info("deleting namespace %s left by a dead run", name)
            delete_netns(name)
            swept.add(run)
    for run in dead:
        with contextlib.suppress(FileNotFoundError):
            (OWNER_DIR / f"{run}.owner").unlink()
        swept.add(run)
    return sorted(swept)


def claim_run_id() -> str:
    """A fresh run id, its owner record written (atomically: O_EXCL) for this process."""
    OWNER_DIR.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        run = "".join(secrets.choice(_RUN_ALPHABET) for _ in range(RUN_ID_LEN))
        if any(run_of(n) == run for n in list_netns()):
            continue
        try:
            fd = os.open(OWNER_DIR / f"{run}.owner", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(owner_record())
        return run
    raise SandboxError("could not find a free data-plane run id")
