"""Where the cluster router sends a pod's egress, read from the NB by content (not by name).

The routing tests assert behaviour, not today's row names. `Snapshot.read(remote)` takes the
cluster router's Logical_Router_Policy rows and every Address_Set in one `ovn-nbctl` call (what
OVN sees, independent of the controller's client); `reroutes(snap, ip)` evaluates every policy
against a packet from `ip` to an address outside the cluster (its `match` as a conjunction of
`ip4|ip6 .src|.dst ==|!=` terms whose right side is an address, a CIDR, an `{...}` list or a
`$address_set`) and returns the reroutes that match, highest priority first. A pod routed right
has exactly one, naming the join address of its node (distributed gateway) or of its subnet's
gateway node (centralized); a leftover reroute of another node at any priority, or none, is the
drift the tests look for (`egress`, `egress_becomes`). A match term the evaluator cannot read
fails the test loudly rather than being skipped, so a new policy shape cannot make a test pass
by accident.

`routing_sets_holding` names the routing address sets (named by a policy of the router, or
carrying a `...route...` external id) that list an address, to catch an entry left behind whose
policy is gone (`stray_sets`, `leftovers`, `no_routing_rows`).

Nodes are built Ready (`ready_node`, `make_ready`): kube-ovn v1.8 only elects a Ready node as a
centralized subnet's gateway. `gc_runs` / `gc_deleted` read the controller's gc counters from its
metrics endpoint; `gc_finds_nothing` runs two gc passes and asserts they deleted nothing.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION
from controller.testing import builders
from controller.testing.wait import WaitTimeout
from tests.e2e.helpers import get_or_none, http_get, wait_for

ROUTER = "ovn-cluster"
#: An address outside every cluster network (TEST-NET-1 / the IPv6 documentation prefix).
OUTSIDE = {4: "192.0.2.10", 6: "2001:db8::10"}
#: How long routing may take to follow a change (a few events and one NB transaction each).
CONVERGE = 10.0
READY = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
NOT_READY = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]

_TERM = re.compile(r"^\s*ip([46])\.(src|dst)\s*(==|!=)\s*(.+?)\s*$")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Reroute:
    priority: int
    match: str
    nexthops: tuple[str, ...]


def version_of(ip: str) -> int:
    return ipaddress.ip_address(ip).version


def _datum(value: Any) -> Any:
    if isinstance(value, list) and len(value) == 2 and value[0] in ("set", "map", "uuid"):
        kind, inner = value
        if kind == "set":
            return [_datum(v) for v in inner]
        if kind == "map":
            return {_datum(k): _datum(v) for k, v in inner}
        return inner
    return value


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Snapshot:
    """The cluster router's policies and every address set, read in one `ovn-nbctl` call."""

    policies: list[dict[str, Any]]
    sets: dict[str, dict[str, Any]]

    @classmethod
    def read(cls, remote: str, router: str = ROUTER) -> Snapshot:
        out = subprocess.run(
            [
                "ovn-nbctl",
                f"--db={remote}",
                "--timeout=10",
                "--format=json",
                *("list", "Logical_Router", "--", "list", "Logical_Router_Policy"),
                *("--", "list", "Address_Set"),
            ],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        assert out.returncode == 0, f"ovn-nbctl list failed: {out.stderr.strip()}"
        tables = []
        for line in out.stdout.splitlines():
            if line.strip():
                doc = json.loads(line)
                tables.append(
                    [
                        {h: _datum(v) for h, v in zip(doc["headings"], row, strict=True)}
                        for row in doc["data"]
                    ]
                )
        routers, policies, sets = tables
        mine = [r for r in routers if r["name"] == router]
        uuids = set(_as_list(mine[0]["policies"])) if mine else set()
        for row in sets:
            row["addresses"] = _as_list(row["addresses"])
        return cls([p for p in policies if p["_uuid"] in uuids], {row["name"]: row for row in sets})


def _covers(entry: str, address: Address) -> bool:
    try:
        return address in ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        return False


def _values(value: str, sets: dict[str, dict[str, Any]]) -> list[str]:
    value = value.strip()
    if value.startswith("$"):
        row = sets.get(value[1:])
        assert row is not None, f"a policy names address set {value}, which does not exist"
        return list(row["addresses"])
    if value.startswith("{") and value.endswith("}"):
        return [v.strip().strip('"') for v in value[1:-1].replace(",", " ").split() if v.strip()]
    return [value.strip('"')]


def _matches(match: str, src: Address, dst: Address, sets: dict[str, dict[str, Any]]) -> bool:
    """Does the packet src -> dst satisfy `match` (a conjunction of address terms)?"""
    for term in match.split("&&"):
        m = _TERM.match(term.strip().strip("()"))
        assert m is not None, f"cannot evaluate policy match term {term.strip()!r} of {match!r}"
        version, field, op, value = int(m[1]), m[2], m[3], m[4]
        if version != src.version:
            return False
        address = src if field == "src" else dst
        hit = any(_covers(v, address) for v in _values(value, sets))
        if hit != (op == "=="):
            return False
    return True


def reroutes(snap: Snapshot, ip: str, *, dst: str = "") -> list[Reroute]:
    """The reroute policies that a packet from `ip` to `dst` (default: outside the cluster)
    matches, highest priority first."""
    src = ipaddress.ip_address(ip)
    target = ipaddress.ip_address(dst or OUTSIDE[src.version])
    out = []
    for p in snap.policies:
        if p["action"] != "reroute":
            continue
        if _matches(str(p["match"]), src, target, snap.sets):
            hops = [h for h in _as_list(p.get("nexthops")) if h] or [
                h for h in _as_list(p.get("nexthop")) if h
            ]
            out.append(Reroute(int(p["priority"]), str(p["match"]), tuple(sorted(hops))))
    return sorted(out, key=lambda r: -r.priority)


def routing_sets_holding(snap: Snapshot, ip: str) -> list[str]:
    """Names of the routing address sets (named by a policy of the router, or marked with a
    `...route...` external id) that list `ip`."""
    address = ipaddress.ip_address(ip)
    named = {
        name for p in snap.policies for name in re.findall(r"\$([A-Za-z0-9_.]+)", str(p["match"]))
    }
    out = []
    for name, row in snap.sets.items():
        ids = row.get("external_ids") or {}
        routing = name in named or any("route" in str(k) for k in ids)
        if routing and any(_covers(entry, address) for entry in row["addresses"]):
            out.append(name)
    return sorted(out)


def egress(remote: str, ips: Iterable[str]) -> dict[str, list[tuple[str, ...]]]:
    """ip -> the next hops of every reroute its egress matches (one entry when routed right)."""
    snap = Snapshot.read(remote)
    return {ip: [r.nexthops for r in reroutes(snap, ip)] for ip in ips}


def egress_becomes(
    remote: str, want: dict[str, str], *, timeout: float = CONVERGE, message: str = "egress"
) -> None:
    """Wait (with a deadline) until every address in `want` has exactly one matching reroute,
    to the next hop `want` names; on timeout fail with the difference."""
    expected = {ip: [(hop,)] for ip, hop in want.items()}
    try:
        wait_for(
            lambda: egress(remote, want) == expected, timeout=timeout, message=message, interval=0.2
        )
    except WaitTimeout:
        got = egress(remote, want)
        assert got == expected, f"{message}: reroutes matched {got}, want {expected}"


def leftovers(remote: str, ips: Iterable[str]) -> dict[str, Any]:
    """ip -> (matching reroutes' hops, routing sets listing it), for every `ips` with any."""
    snap = Snapshot.read(remote)
    out: dict[str, Any] = {}
    for ip in ips:
        hops = [r.nexthops for r in reroutes(snap, ip)]
        sets = routing_sets_holding(snap, ip)
        if hops or sets:
            out[ip] = (hops, sets)
    return out


def no_routing_rows(remote: str, ips: Iterable[str], *, timeout: float = CONVERGE) -> None:
    """Wait until no reroute matches and no routing set lists any of `ips`."""
    ips = list(ips)
    try:
        wait_for(
            lambda: not leftovers(remote, ips),
            timeout=timeout,
            message="routing rows gone",
            interval=0.2,
        )
    except WaitTimeout:
        left = leftovers(remote, ips)
        assert left == {}, f"routing rows of deleted addresses are left (hops, sets): {left}"


def stray_sets(remote: str, want: dict[str, str]) -> dict[str, list[str]]:
    """ip -> the routing sets listing it that no reroute towards its wanted hop names."""
    snap = Snapshot.read(remote)
    out: dict[str, list[str]] = {}
    for ip, hop in want.items():
        good = {
            name
            for r in reroutes(snap, ip)
            if r.nexthops == (hop,)
            for name in re.findall(r"\$([A-Za-z0-9_.]+)", r.match)
        }
        extra = [s for s in routing_sets_holding(snap, ip) if s not in good]
        if extra:
            out[ip] = extra
    return out


# --- nodes ---------------------------------------------------------------------------------------


def ready_node(name: str, ip: str, *, ready: bool = True) -> dict[str, Any]:
    obj = builders.node(name, ip)
    obj["status"]["conditions"] = READY if ready else NOT_READY
    return obj


def make_ready(store: Any, name: str, ready: bool = True) -> None:
    """Set the node's Ready condition (its status subresource, as a kubelet does)."""
    obj = store.get("nodes", None, name)
    status = dict(obj.get("status") or {})
    status["conditions"] = READY if ready else NOT_READY
    store.patch("nodes", None, name, {"status": status}, subresource="status")


def join_ip(server: Any, name: str, version: int = 4) -> str:
    """The node's join address (`ovn.kubernetes.io/ip_address`) of IP `version`, once set."""

    def lookup() -> str | None:
        obj = get_or_none(server, "nodes", None, name)
        value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(
            IP_ADDRESS_ANNOTATION, ""
        )
        for ip in str(value).split(","):
            if ip and version_of(ip) == version:
                return ip
        return None

    return wait_for(lookup, message=f"node {name} has a join address")


# --- the controller's gc passes ------------------------------------------------------------------


def gc_runs(ctl: Controller) -> float:
    """`kube_ovn_controller_gc_runs_total` from the controller's metrics endpoint."""
    code, body = http_get(f"http://127.0.0.1:{ctl.metrics_port}/metrics")
    assert code == 200, body
    for line in body.splitlines():
        if line.startswith("kube_ovn_controller_gc_runs_total "):
            return float(line.split()[1])
    return 0.0


def gc_deleted(ctl: Controller) -> float:
    """Every object gc ever deleted (`kube_ovn_controller_gc_deleted_total`, all resources)."""
    code, body = http_get(f"http://127.0.0.1:{ctl.metrics_port}/metrics")
    assert code == 200, body
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith("kube_ovn_controller_gc_deleted_total{")
    )


def gc_finds_nothing(ctl: Controller) -> None:
    """Two gc passes in a row (an orphan is deleted on its second sighting) delete nothing:
    once the routing has converged, gc is a backstop with nothing left to do."""
    before = gc_deleted(ctl)
    ctl.gc.run_once()
    ctl.gc.run_once()
    assert gc_deleted(ctl) == before, "gc found leftovers after the routing converged"


def gc_passes(ctl: Controller, n: int = 2, timeout: float = 15.0) -> None:
    """Wait until `n` more gc passes have run (a controller started with a short
    --gc-interval)."""
    start = gc_runs(ctl)
    wait_for(lambda: gc_runs(ctl) >= start + n or None, timeout=timeout, message="gc passes")


def until(cond: Callable[[], bool], message: str, timeout: float = 15.0) -> None:
    wait_for(lambda: cond() or None, timeout=timeout, message=message)
