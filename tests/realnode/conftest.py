"""Fixtures of the real-node tier: a control plane of its own with real kubelets and containerds.

* `node_requirements`: the kubelet's path, once the host can run real nodes (root, containerd,
  runc, the CNI plugins, busybox-static, cgroup v1) and the kubelet is built (`bash
  .ci/build-control-plane`); otherwise the tier is skipped with the reason, except under CI
  (`CI=true`), where that is a failure.
* `node_plane` (module): a `RealControlPlane` of the module's own, so the real nodes never meet
  the e2e bed's sandbox kubelet (the scheduler would place the bed's pods on them).
* `admin_kubeconfig` (module): a kubeconfig for kubectl against `node_plane`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.sandbox.cluster.controlplane import Binaries, BinariesMissing, RealControlPlane
from controller.sandbox.cluster.realnode import find_kubelet, missing_requirements


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and real nodes cannot run: {reason}")
    pytest.skip(f"real nodes cannot run: {reason}")


@pytest.fixture(scope="session")
def node_requirements(control_plane_binaries: Binaries) -> Path:
    why = missing_requirements()
    if why:
        _unavailable(why)
    try:
        return find_kubelet(control_plane_binaries)
    except BinariesMissing as e:
        _unavailable(str(e))
        raise


@pytest.fixture(scope="module")
def node_plane(
    control_plane_binaries: Binaries, node_requirements: Path
) -> Iterator[RealControlPlane]:
    workdir = Path(tempfile.mkdtemp(prefix="realnode-cp"))
    try:
        with RealControlPlane(workdir, binaries=control_plane_binaries) as plane:
            yield plane
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def admin_kubeconfig(
    node_plane: RealControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return node_plane.write_admin_kubeconfig(tmp_path_factory.mktemp("kube") / "admin.kubeconfig")
