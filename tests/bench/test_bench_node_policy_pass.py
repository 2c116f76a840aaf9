"""Smoke run of bench/node_policy_pass.py at small node counts: it must finish and print one
row per count, and one per subnets x nodes grid point, with positive figures (no timing
assertion: figures depend on the machine)."""

from __future__ import annotations

import re

import pytest

from tests.bench.helpers import run_bench

pytestmark = pytest.mark.timeout(240)


def test_small_run_prints_a_row_per_node_count() -> None:
    proc = run_bench(
        "bench/node_policy_pass.py",
        *("--nodes", "3,12", "--grid", "2x3,3x4", "--repeat", "1"),
        timeout=200,
    )
    rows = {}
    for line in proc.stdout.splitlines():
        m = re.match(
            r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+([\d.]+\s+){2}[\d.]+$", line
        )
        if m:
            rows[int(m.group(1))] = line
    assert sorted(rows) == [3, 12], proc.stdout
    for nodes, line in rows.items():
        figures = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", line)]
        assert figures[1] == 2 * nodes  # a node policy and a subnet reroute per node
        assert min(figures[2:]) > 0, line
    grid = {}
    for line in proc.stdout.splitlines():
        m = re.match(
            r"^\s*(\d+)x(\d+)\s+(\d+)\s+(\d+)((\s+[\d.]+){3})\s+[\d.]+x((\s+[\d.]+){2})$", line
        )
        if m:
            grid[(int(m.group(1)), int(m.group(2)))] = line
    assert sorted(grid) == [(2, 3), (3, 4)], proc.stdout
    for (subnets, nodes), line in grid.items():
        figures = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", line.split(None, 1)[1])]
        assert figures[0] == subnets * nodes
        # a reroute per (subnet, node) and each subnet's allow
        assert figures[1] == subnets * nodes + subnets
        assert min(figures[2:]) > 0, line
