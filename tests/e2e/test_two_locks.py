"""Never two allocators: the controller holds kube-ovn v1.8's ConfigMap lock and kube-ovn
v1.12's Lease together. Against a second process holding just one of them (a stand-in for a
kube-ovn-controller of either generation, `standin_elector.py`), only one of the two ever writes:
while the stand-in leads the controller allocates nothing; while the controller leads the
stand-in never gets its lock; and the controller gives both locks back on shutdown, so the
stand-in takes over at once."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from controller.runtime.locks import LEADER_ANNOTATION
from controller.sandbox.apiserver.resources import ApiError
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import NODE, allocated_pods, get_or_none, http_get, pod, running, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
STANDIN = "kube-ovn-controller-old"


class Standin:
    def __init__(self, cluster: Cluster, kind: str, out: Path, *, release: bool) -> None:
        self.cluster = cluster
        self.out = out
        # The stand-in is another generation's controller with its own identity and grants, so
        # it runs as admin: on the real plane the chart's ServiceAccount (`cluster.kubeconfig`)
        # may not create the `standin-writes` ConfigMap, and its requests must not count in the
        # audit of what our controller's ServiceAccount uses.
        kubeconfig = cluster.server.write_kubeconfig(out.parent / "standin.kubeconfig")
        self.forget_writes()
        args = [str(kubeconfig), kind, STANDIN, *(["--release"] if release else [])]
        log: IO[bytes]
        with out.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.standin_elector", *args],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.out.read_text()

    def writes(self) -> int:
        cm = get_or_none(self.cluster.server, "configmaps", "kube-system", "standin-writes")
        return int(((cm or {}).get("metadata") or {}).get("annotations", {}).get("writes", 0))

    def forget_writes(self) -> None:
        """Delete the counter: the real plane keeps ConfigMaps from one test to the next."""
        with contextlib.suppress(ApiError):
            self.cluster.server.store.delete("configmaps", "kube-system", "standin-writes")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            finally:
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait(10)


@pytest.fixture
def standins(tmp_path: Path) -> Iterator[list[Standin]]:
    started: list[Standin] = []
    yield started
    for s in started:
        try:
            s.stop()
        finally:
            s.forget_writes()


# Renewals of ours the stand-in must sit through without leading or writing.
RENEWALS = 4


def _holder(cluster: Cluster, kind: str) -> str:
    if kind == "lease":
        lease = get_or_none(cluster.server, "leases", "kube-system", "kube-ovn-controller")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
    cm = get_or_none(cluster.server, "configmaps", "kube-system", "ovn-config")
    text = (((cm or {}).get("metadata") or {}).get("annotations") or {}).get(LEADER_ANNOTATION)
    return str(json.loads(text)["holderIdentity"]) if text else ""


@pytest.mark.parametrize("kind", ["configmap", "lease"], ids=["kube-ovn-v1.8", "kube-ovn-v1.12"])
def test_an_older_controller_leading_keeps_ours_idle_until_it_stops(
    cluster: Cluster,
    start_controller: StartController,
    standins: list[Standin],
    tmp_path: Path,
    kind: str,
) -> None:
    store = cluster.server.store
    standin = Standin(cluster, kind, tmp_path / "standin.log", release=False)
    standins.append(standin)
    wait_for(lambda: "leading" in standin.output(), timeout=30, message="stand-in leads")
    ctl = start_controller()
    for i in range(3):
        store.create("pods", pod(f"p{i}", node_name=NODE))
    # ours is a ready follower that has seen the stand-in as leader; the stand-in keeps writing
    wait_for(
        lambda: (
            http_get(f"http://127.0.0.1:{ctl.metrics_port}/readyz")
            == (200, "follower, standing by\n")
        ),
        message="a standing-by follower",
    )
    elector = ctl._elector
    assert elector is not None
    wait_for(lambda: elector.get_leader() == STANDIN, message="stand-in seen as leader")
    seen = standin.writes()
    wait_for(lambda: standin.writes() >= seen + 6, timeout=30, message="stand-in writing")
    assert not ctl.is_leader() and not ctl.leading.is_set()
    assert allocated_pods(store) == {}
    assert _holder(cluster, kind) == STANDIN

    # the stand-in dies without handing its lock back (kube-ovn v1.8 never does): ours takes
    # over once the record has not changed for its lease duration, and allocates
    standin.stop()
    last = standin.writes()
    running(ctl, timeout=30)
    wait_for(lambda: len(allocated_pods(store)) == 3, timeout=30, message="pods allocated")
    assert standin.writes() == last
    assert _holder(cluster, "lease") == _holder(cluster, "configmap") == "controller-a"


@pytest.mark.parametrize("kind", ["configmap", "lease"], ids=["kube-ovn-v1.8", "kube-ovn-v1.12"])
def test_ours_leading_keeps_an_older_controller_idle_and_hands_both_locks_back(
    cluster: Cluster,
    start_controller: StartController,
    standins: list[Standin],
    tmp_path: Path,
    kind: str,
) -> None:
    store = cluster.server.store
    # no lock ConfigMap yet (the real plane keeps the one an earlier test left): ours creates it
    with contextlib.suppress(ApiError):
        store.delete("configmaps", "kube-system", "ovn-config")
    ctl = running(start_controller())
    assert _holder(cluster, "lease") == _holder(cluster, "configmap") == "controller-a"
    standin = Standin(cluster, kind, tmp_path / "standin.log", release=True)
    standins.append(standin)
    wait_for(lambda: "campaigning" in standin.output(), timeout=30, message="stand-in runs")
    for i in range(3):
        store.create("pods", pod(f"p{i}", node_name=NODE))
    wait_for(lambda: len(allocated_pods(store)) == 3, message="pods allocated by ours")
    # several renewals of ours while the stand-in campaigns: it never leads, never writes.
    # A renewal is a new spec.renewTime under ours; the resourceVersion would not do, it counts
    # every write in the cluster (the controller's pod writes, the scheduler, the kubelet).
    renewals: set[str] = set()

    def renewed() -> bool:
        spec = (
            get_or_none(cluster.server, "leases", "kube-system", "kube-ovn-controller") or {}
        ).get("spec") or {}
        assert spec.get("holderIdentity") == "controller-a", spec
        renewals.add(str(spec.get("renewTime")))
        return len(renewals) > RENEWALS

    wait_for(renewed, timeout=30, message="ours renewing")
    assert "leading" not in standin.output().replace("campaigning", "")
    assert standin.writes() == 0

    ctl.stop()
    assert ctl.wait(15) == 0
    # Both records were emptied; the stand-in retries every half second, so by the time ours
    # has exited it may already hold the one it campaigns for. Without the hand-back both
    # would still name ours here, for a whole lease duration.
    other = "lease" if kind == "configmap" else "configmap"
    assert _holder(cluster, other) == ""
    assert _holder(cluster, kind) in ("", STANDIN)
    # handed back: the stand-in leads at once, not after a lease duration of waiting
    wait_for(lambda: standin.writes() > 0, timeout=10, message="stand-in takes over")
