"""Smoke run of bench/controlplane.py --runs 1: it starts a real control plane and prints a
positive figure for every phase (no timing assertion: figures depend on the machine)."""

from __future__ import annotations

import re

import pytest

from controller.sandbox.cluster.controlplane import Binaries
from tests.bench.helpers import run_bench

pytestmark = [pytest.mark.realcp, pytest.mark.timeout(240)]


def test_one_run_prints_every_phase(control_plane_binaries: Binaries) -> None:
    proc = run_bench("bench/controlplane.py", "--runs", "1", timeout=200)
    out = proc.stdout
    for phase in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "total"):
        m = re.search(rf"^{re.escape(phase)}\s+(\d+\.\d+)", out, re.MULTILINE)
        assert m and float(m.group(1)) > 0, out
    assert re.search(r"^real plane / emulator: \d+x$", out, re.MULTILINE), out
