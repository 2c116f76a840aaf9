"""A connectivity matrix: every pod pings every other pod and its own gateway.

`measure(ping, pods)` sends one echo per (source, target) pair (in parallel, a bounded number at
a time) through `ping(netns, address) -> rtt_ms | None` and returns the results;
`format_matrix(pods, results)` renders them as a table a person reads at a glance: one row per
source pod, one column per target (numbered like the rows) plus `gw`, each cell `✓ <rtt>` (ms)
or `✗` (no answer within the ping's deadline), `·` on the diagonal. Pure apart from `ping`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

GATEWAY = "gw"
Ping = Callable[[str, str], float | None]


@dataclass(frozen=True, slots=True)
class MatrixPod:
    label: str  # namespace/name
    netns: str
    address: str  # the address other pods ping (the first of the pod's default network)
    gateway: str


def _targets(pods: Sequence[MatrixPod], source: MatrixPod) -> list[tuple[str, str]]:
    out = [(p.label, p.address) for p in pods if p.label != source.label]
    if source.gateway:
        out.append((GATEWAY, source.gateway))
    return out


def measure(
    ping: Ping, pods: Sequence[MatrixPod], workers: int = 8
) -> dict[tuple[str, str], float | None]:
    """(source label, target label or `gw`) -> round-trip time in ms, or None."""
    pairs = [(src, label, addr) for src in pods for label, addr in _targets(pods, src)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rtts = list(pool.map(lambda p: ping(p[0].netns, p[2]), pairs))
    return {(src.label, label): rtt for (src, label, _), rtt in zip(pairs, rtts, strict=True)}


def _cell(rtt: float | None) -> str:
    if rtt is None:
        return "✗"
    return f"✓ {rtt:.2f}" if rtt < 10 else f"✓ {rtt:.0f}"


def format_matrix(
    pods: Sequence[MatrixPod], results: Mapping[tuple[str, str], float | None]
) -> list[str]:
    """The table's lines (see the module docstring)."""
    numbers = {p.label: str(i) for i, p in enumerate(pods, start=1)}
    row_head = [f"{numbers[p.label]:>2} {p.label} ({p.address})" for p in pods]
    head_width = max((len(h) for h in row_head), default=4)
    columns = [*(numbers[p.label] for p in pods), GATEWAY]
    cells: list[list[str]] = []
    for p in pods:
        row = []
        for q in pods:
            row.append("·" if q.label == p.label else _cell(results.get((p.label, q.label))))
        row.append(_cell(results.get((p.label, GATEWAY))) if p.gateway else "-")
        cells.append(row)
    width = max([len(c) for row in cells for c in row] + [len(c) for c in columns] + [1])
    corner = "FROM \\ TO"
    lines = [f"{corner:<{head_width}}  " + "  ".join(c.rjust(width) for c in columns)]
    for head, row in zip(row_head, cells, strict=True):
        lines.append(f"{head:<{head_width}}  " + "  ".join(c.rjust(width) for c in row))
    return [line.rstrip() for line in lines]


def summary(results: Mapping[tuple[str, str], float | None]) -> str:
    answered = sum(1 for rtt in results.values() if rtt is not None)
    return f"{answered} of {len(results)} pings answered"
