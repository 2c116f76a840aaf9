"""How a `RoutingChange` reads: whether it removes anything (drift, rather than rows that were
only missing), a one-line description for the logs, and the sum of several keys' changes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from controller.ovn.api import RoutingChange


def combined(changes: Iterable[RoutingChange]) -> RoutingChange:
    """The changes of several keys as one (each field concatenated, in order)."""
    out = RoutingChange()
    for change in changes:
        out = RoutingChange(
            **{
                f.name: getattr(out, f.name) + getattr(change, f.name)
                for f in dataclasses.fields(RoutingChange)
            }
        )
    return out


def removes(change: RoutingChange) -> bool:
    """Does `change` remove or rewrite anything (rather than only add what was missing)?"""
    return bool(
        change.delete_policies
        or change.delete_src_routes
        or change.delete_dst_routes
        or any(s.delete or s.remove for s in change.sets)
        or any(not n.external_ip for n in change.nats)
    )


def describe(change: RoutingChange) -> str:
    parts = []
    if change.policies:
        parts.append("write " + ", ".join(f"{p.priority} {p.match}" for p in change.policies))
    if change.delete_policies:
        parts.append("drop " + ", ".join(f"{p} {m}" for p, m in change.delete_policies))
    for s in change.sets:
        if s.delete:
            parts.append(f"delete set {s.name}")
        else:
            parts.append(f"set {s.name} +{list(s.add)} -{list(s.remove)}")
    for n in change.nats:
        parts.append(f"nat {n.type} {n.logical_ip} -> {n.external_ip or '(none)'}")
    if change.delete_src_routes:
        parts.append(f"drop src-ip routes {list(change.delete_src_routes)}")
    if change.delete_dst_routes:
        routes = ", ".join(f"{p} via {h}" for p, h in change.delete_dst_routes)
        parts.append(f"drop dst-ip routes {routes}")
    return "; ".join(parts)
