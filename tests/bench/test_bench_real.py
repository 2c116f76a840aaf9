"""Smoke run of bench/e2e --control-plane real on a few pods: it must finish on the real
Kubernetes control plane and print positive figures for the controller and the API limit
measured there. Skipped without the control-plane binaries (failed under CI=true, as the
fixture does). No timing assertion (figures depend on the machine).
"""

from __future__ import annotations

import re

import pytest

from controller.sandbox.cluster.controlplane import Binaries
from tests.bench.helpers import run_bench
from tests.bench.test_bench_smoke import _row

pytestmark = [pytest.mark.realcp, pytest.mark.timeout(240)]


def test_real_plane_run_prints_controller_and_api_limit(
    control_plane_binaries: Binaries,
) -> None:
    proc = run_bench(
        "bench/e2e", "--control-plane", "real", "--pods", "20", "--existing", "0", timeout=200
    )
    out = proc.stdout
    assert "on the real control plane" in out
    for label in ("pods/s to allocated", "pods/s to routed"):
        controller, api_limit, ovn_limit, *ratios = _row(out, label)
        assert min(controller, api_limit, ovn_limit) > 0
        assert len(ratios) == 2
    assert _row(out, "kube-apiserver+etcd CPU ms/pod")[0] > 0
    assert "POST ips 201" in out  # the controller's requests were read from the audit log
    assert not re.search(r"start-up with \d+ existing pods", out)
