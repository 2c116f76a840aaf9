"""The demo's table of pods as they come up (pure): one row per pod that is up (allocated,
routed, its logical switch port found in the NB), in columns whose widths are known before the
first row, so rows stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    ROUTED_ANNOTATION,
)
from controller.core.naming import pod_name_to_port_name
from controller.sandbox.demo.objects import DEMO_NAMESPACE, DEMO_SUBNET, DUAL_SUBNET, NODES


@dataclass(frozen=True, slots=True)
class PodRow:
    """One line of the table: a pod that is up, as the API and the NB database show it."""

    pod: str  # namespace/name
    ips: tuple[str, ...]
    mac: str
    lsp: str
    switch: str
    node: str
    routed: bool
    seconds: float


COLUMNS = ("POD", "IPS", "MAC", "LSP", "SWITCH", "NODE", "ROUTED", "UP AFTER")


def pod_row(pod: Mapping[str, Any], port_switch: str | None, seconds: float) -> PodRow | None:
    """The row of a pod that is up (allocated, routed, its port `port_switch` found in the NB),
    else None. `port_switch` is the switch of the pod's LSP as read from the NB (None: no port)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if (
        port_switch is None
        or annotations.get(ALLOCATED_ANNOTATION) != "true"
        or annotations.get(ROUTED_ANNOTATION) != "true"
    ):
        return None
    name, namespace = meta.get("name", ""), meta.get("namespace", "")
    return PodRow(
        pod=f"{namespace}/{name}",
        ips=tuple(ip for ip in annotations.get(IP_ADDRESS_ANNOTATION, "").split(",") if ip),
        mac=annotations.get(MAC_ADDRESS_ANNOTATION, ""),
        lsp=pod_name_to_port_name(name, namespace),
        switch=port_switch,
        node=(pod.get("spec") or {}).get("nodeName", ""),
        routed=True,
        seconds=seconds,
    )


def column_widths(pod_names: Sequence[str]) -> tuple[int, ...]:
    """Fixed widths known before the first row, so rows can stream as pods come up."""
    longest = max((len(n) for n in pod_names), default=10)
    node = max(len(n) for n, _ in NODES)
    return (
        len(DEMO_NAMESPACE) + 1 + longest,
        25,
        17,
        longest + 1 + len(DEMO_NAMESPACE),
        max(len(DEMO_SUBNET), len(DUAL_SUBNET)),
        node,
        6,
        8,
    )


def format_line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def format_row(row: PodRow, widths: Sequence[int]) -> str:
    return format_line(
        (
            row.pod,
            ",".join(row.ips),
            row.mac,
            row.lsp,
            row.switch,
            row.node,
            "yes" if row.routed else "no",
            f"{row.seconds:.2f}s",
        ),
        widths,
    )
