"""The demo with its data plane: every pod wired, and the connectivity matrix printed after the
table, with pods of one subnet reaching each other, every pod its gateway, and every node every
pod and back (node -> pod and pod -> node rows, all answering)."""

from __future__ import annotations

import re

import pytest

from controller.sandbox.ovn.runs import list_netns
from tests.demo.conftest import StartDemo, start_demo
from tests.demo.helpers import parse_rows

__all__ = ["start_demo"]

pytestmark = pytest.mark.timeout(150)

CELL = re.compile(r"✓ [\d.]+|✗|·|-")


def _matrix(lines: list[str]) -> dict[str, list[str]]:
    """pod -> its row's cells (targets numbered as the rows, then gw)."""
    rows: dict[str, list[str]] = {}
    start = next(i for i, line in enumerate(lines) if line.startswith("FROM \\ TO"))
    for line in lines[start + 1 :]:
        m = re.match(r"^\s*\d+ (\S+) \(\S+\)\s+(.*)$", line)
        if not m:
            break
        rows[m.group(1)] = CELL.findall(m.group(2))
    return rows


def test_demo_wires_its_pods_and_prints_the_connectivity_matrix(start_demo: StartDemo) -> None:
    run = start_demo("--once", "--pods", "2", "--metrics-port", "0", "--timeout", "60")
    code = run.finish()
    out = run.output()
    assert code == 0, out
    up = re.search(r"^data plane up in \d+\.\d+s .* as chassis kop-(\w{4});", out, re.M)
    assert up, out
    table = parse_rows(run.lines)
    matrix = _matrix(run.lines)
    nodes = [row for row in matrix if row.startswith("node/")]
    assert nodes == ["node/demo-node-1", "node/demo-node-2"], out
    assert set(matrix) - set(nodes) == set(table), out
    order = list(matrix)  # rows are numbered in this order, and so are the columns
    for src, cells in matrix.items():
        assert len(cells) == len(order) + 1, out
        assert cells[order.index(src)] == "·"
        if src in nodes:
            assert cells[-1] == "-", out  # a node row has no gateway column
        else:
            assert cells[-1].startswith("✓"), f"{src} cannot reach its gateway:\n{out}"
        for dst, cell in zip(order, cells, strict=False):
            # node -> pod and pod -> node (its join address) answer for every subnet
            crosses_node = (src in nodes) != (dst in nodes)
            same_subnet = src not in nodes and dst not in nodes
            same_subnet = same_subnet and table[src].switch == table[dst].switch
            if dst != src and (same_subnet or crosses_node):
                assert cell.startswith("✓"), f"{src} -> {dst}:\n{out}"
    assert re.search(r"^\d+ of \d+ pings answered$", out, re.M), out
    assert "stopped data plane" in out
    # other runs (other test sessions on this machine) may have namespaces of their own
    left = [n for n in list_netns() if n.startswith(f"kop-{up.group(1)}-")]
    assert not left, f"the demo left network namespaces behind: {left}"
