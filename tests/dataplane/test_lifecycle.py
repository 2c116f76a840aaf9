"""The data plane's own life: nothing is left behind after a SIGKILLed owner once the next run
sweeps, and a live run is never swept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from controller.sandbox.ovn.ovsdb import NbServer
from controller.sandbox.ovn.runs import OWNER_DIR, list_netns, sweep_dead_runs
from tests.dataplane.helpers import Net
from tests.e2e.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]

OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from controller.sandbox.ovn.dataplane import DataPlane
    dp = DataPlane(Path(sys.argv[1]), sys.argv[2]).start()
    dp.add_netns("p1")
    print(dp.run_id, flush=True)
    sys.stdin.read()  # until killed
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


def test_a_killed_owner_leaves_no_daemon_and_the_next_sweep_removes_its_namespaces(
    tmp_path: Path, net: Net
) -> None:
    with NbServer(tmp_path / "nb") as nb:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(tmp_path / "dp"), nb.remote],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert owner.stdout is not None
            run = owner.stdout.readline().decode().strip()
            assert len(run) == 4, run
            ours = {n for n in list_netns() if n.startswith(f"kop-{run}-")}
            assert ours == {f"kop-{run}-ovs", f"kop-{run}-p1"}
            pids = [int(p.read_text()) for p in (tmp_path / "dp").glob("*.pid")]
            assert len(pids) == 3  # ovn-northd, ovs-vswitchd, ovn-controller
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait(10)
        # PDEATHSIG: every daemon dies with its owner
        wait_for(lambda: not any(_alive(p) for p in pids), message="the daemons died")
        assert {n for n in list_netns() if n.startswith(f"kop-{run}-")} == ours
        assert (OWNER_DIR / f"{run}.owner").exists()

        swept = sweep_dead_runs()
        assert run in swept
        assert not [n for n in list_netns() if n.startswith(f"kop-{run}-")]
        assert not (OWNER_DIR / f"{run}.owner").exists()
        # the session's live data plane was not touched
        assert net.dp.run_id not in swept
        assert net.dp.ovs_netns in list_netns()
        assert (OWNER_DIR / f"{net.dp.run_id}.owner").exists()
