"""Run of bench/trace_pod_add.py --list: the traced add allocates and routes its pod, and the
files it lists are the pod controller's handler chain, grouped as the script says."""

from __future__ import annotations

import re

import pytest

from tests.bench.helpers import run_bench

pytestmark = pytest.mark.timeout(120)


def test_lists_the_files_of_one_bound_pods_add() -> None:
    proc = run_bench("bench/trace_pod_add.py", "--list", timeout=100)
    listed = dict(
        (path, group)
        for group, path in re.findall(r"^(\w+)\s+(controller/\S+\.py)$", proc.stdout, re.M)
    )
    # the add's own chain, the pure plan it executes, and the fakes it writes to
    for path in ("controller/pod/add.py", "controller/pod/allocate.py"):
        assert listed.get(path) == "pod", proc.stdout
    assert listed.get("controller/pod_logic/plan.py") == "pod", proc.stdout
    assert listed.get("controller/testing/fake_nb.py") == "fakes", proc.stdout
    # the delete and security handlers take no part in an add
    assert "controller/pod/delete.py" not in listed
    assert "controller/pod/security.py" not in listed
    total = int(re.search(r"runs through: (\d+) total", proc.stdout).group(1))  # type: ignore[union-attr]
    assert total == sum(1 for group in listed.values() if group != "fakes")
