"""The fake NB's rows and the row operations its verbs share (controller/testing/fake_nb.py).

`NbState` holds NB-like rows in dicts with a per-switch index of claimed IPs (the duplicate-address
check looks IPs up there instead of parsing every port of the switch); every write goes through an
`Undo` log, so a verb that raises puts back every value it overwrote (one verb = one atomic
transaction, as on the real NB).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn.api import (
    NatRule,
    OvnConflictError,
    OvnNotFoundError,
    PortInfo,
    PortSpec,
    RouterPolicy,
    StaticRoute,
)

K = TypeVar("K")
V = TypeVar("V")


@dataclass
class FakePort:
    name: str
    switch: str
    addresses: list[str]
    port_security: list[str]
    external_ids: dict[str, str]
    type: str = ""
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeSwitch:
    name: str
    # An insertion-ordered set of port names (O(1) removal).
    ports: dict[str, None] = field(default_factory=dict)
    external_ids: dict[str, str] = field(default_factory=dict)
    other_config: dict[str, str] = field(default_factory=dict)
    # IP -> the port holding it: the duplicate-address check without parsing every port.
    ips: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeRouterPort:
    name: str
    mac: str
    networks: list[str]


@dataclass
class FakeRouter:
    name: str
    ports: dict[str, FakeRouterPort] = field(default_factory=dict)
    # (ip_prefix, policy) -> route: a router holds one route per prefix and policy.
    routes: dict[tuple[str, str], StaticRoute] = field(default_factory=dict)
    nats: list[NatRule] = field(default_factory=list)
    external_ids: dict[str, str] = field(default_factory=dict)
    # (priority, match) -> policy: a router holds one policy per priority and match.
    policies: dict[tuple[int, str], RouterPolicy] = field(default_factory=dict)


@dataclass
class FakePortGroup:
    name: str
    ports: set[str] = field(default_factory=set)
    external_ids: dict[str, str] = field(default_factory=dict)
    acls: list[logic.AclSpec] = field(default_factory=list)


@dataclass
class NbState:
    switches: dict[str, FakeSwitch] = field(default_factory=dict)
    ports: dict[str, FakePort] = field(default_factory=dict)
    routers: dict[str, FakeRouter] = field(default_factory=dict)
    port_groups: dict[str, FakePortGroup] = field(default_factory=dict)
    address_sets: dict[str, list[str]] = field(default_factory=dict)
    address_set_ids: dict[str, dict[str, str]] = field(default_factory=dict)
    # address set name -> the security group its external_ids name (sg=<name>)
    address_set_sgs: dict[str, str] = field(default_factory=dict)
    # pod key -> names of the ports whose external_ids name that pod (list_pod_ports).
    pod_ports: dict[str, dict[str, None]] = field(default_factory=dict)


_MISSING: Any = object()


class Undo:
    """The undo log of one verb: every write to the state goes through it.

    Each write records how to put the old value back; `rollback` replays them newest first, so a
    verb that raises half-way leaves the state as it found it (the all-or-nothing of an OVSDB
    transaction) without copying anything it did not touch.
    """

    def __init__(self) -> None:
        self._log: list[Callable[[], None]] = []

    def put(self, d: MutableMapping[K, V], key: K, value: V) -> None:
        old = d.get(key, _MISSING)
        self._log.append(lambda: restore(d, key, old))
        d[key] = value

    def update(self, d: MutableMapping[K, V], items: Mapping[K, V]) -> None:
        for key, value in items.items():
            self.put(d, key, value)

    def pop(self, d: MutableMapping[K, V], key: K) -> V | None:
        old = d.pop(key, _MISSING)
        if old is _MISSING:
            return None
        self._log.append(lambda: d.__setitem__(key, old))
        return old  # type: ignore[no-any-return]

    def add(self, s: set[str], item: str) -> None:
        if item not in s:
            s.add(item)
            self._log.append(lambda: s.discard(item))

    def discard(self, s: set[str], item: str) -> None:
        if item in s:
            s.discard(item)
            self._log.append(lambda: s.add(item))

    def set(self, obj: object, attr: str, value: object) -> None:
        old = getattr(obj, attr)
        self._log.append(lambda: setattr(obj, attr, old))
        setattr(obj, attr, value)

    def rollback(self) -> None:
        while self._log:
            self._log.pop()()


def restore(d: MutableMapping[Any, Any], key: Any, old: Any) -> None:
    if old is _MISSING:
        d.pop(key, None)
    else:
        d[key] = old


def port_info(p: FakePort) -> PortInfo:
    return PortInfo(
        p.name, p.switch, tuple(p.addresses), tuple(p.port_security), dict(p.external_ids), p.type
    )


def policies_in_place(lr: FakeRouter, checked: logic.CheckedRoutingChange) -> bool:
    for p, match, hops in checked.policies:
        old = lr.policies.get((p.priority, match))
        if (
            old is None
            or old.action != p.action
            or old.nexthops != hops
            or not logic.ids_match(old.external_ids, p.external_ids)
        ):
            return False
    return not any(key in lr.policies for key in checked.drops)


def sets_in_place(st: NbState, checked: logic.CheckedRoutingChange) -> bool:
    for c, name, add, remove in checked.sets:
        have = st.address_sets.get(name)
        if c.delete:
            if have is not None:
                return False
            continue
        if have is None and not add:
            continue
        if (
            have is None
            or not set(add) <= set(have)
            or remove & set(have)
            or not logic.ids_match(st.address_set_ids.get(name, {}), c.external_ids)
        ):
            return False
    return True


def nats_in_place(lr: FakeRouter, checked: logic.CheckedRoutingChange) -> bool:
    for n, lip, eip in checked.nats:
        found = [r for r in lr.nats if r.type == n.type and r.logical_ip == lip]
        if not eip:
            if found:
                return False
            continue
        if len(found) != 1 or found[0].external_ip != eip:
            return False
        if n.port and (
            found[0].logical_port != n.port or found[0].external_mac != n.logical_mac.lower()
        ):
            return False
    return True


def routing_in_place(st: NbState, lr: FakeRouter, checked: logic.CheckedRoutingChange) -> bool:
    """Every part of the change is already in the state: apply_routing writes nothing."""
    return (
        policies_in_place(lr, checked)
        and sets_in_place(st, checked)
        and nats_in_place(lr, checked)
        and not any((prefix, "src-ip") in lr.routes for prefix in checked.routes)
        and not any(
            (r := lr.routes.get((prefix, "dst-ip"))) is not None and r.nexthop == hop
            for prefix, hop in checked.dst_routes
        )
    )


def write_routing(
    st: NbState, u: Undo, lr: FakeRouter, checked: logic.CheckedRoutingChange
) -> None:
    for p, match, hops in checked.policies:
        cur = lr.policies.get((p.priority, match))
        merged = {**(cur.external_ids if cur else {}), **p.external_ids}
        u.put(
            lr.policies,
            (p.priority, match),
            RouterPolicy(lr.name, p.priority, match, p.action, hops, merged),
        )
    for c, name, add, remove in checked.sets:
        if c.delete:
            u.pop(st.address_sets, name)
            u.pop(st.address_set_ids, name)
            continue
        if name not in st.address_sets and not add:
            continue
        have = st.address_sets.get(name, [])
        u.put(st.address_sets, name, sorted((set(have) | set(add)) - remove))
        u.put(st.address_set_ids, name, {**st.address_set_ids.get(name, {}), **c.external_ids})
    for n, lip, eip in checked.nats:
        set_nat(lr, u, n.type, lip, eip, n.logical_mac, n.port)
    for key in checked.drops:
        u.pop(lr.policies, key)
    for prefix in checked.routes:
        u.pop(lr.routes, (prefix, "src-ip"))
    for prefix, hop in checked.dst_routes:
        route = lr.routes.get((prefix, "dst-ip"))
        if route is not None and route.nexthop == hop:
            u.pop(lr.routes, (prefix, "dst-ip"))


def set_nat(
    lr: FakeRouter, u: Undo, policy: str, lip: str, eip: str, logical_mac: str, port: str
) -> None:
    keep: NatRule | None = None
    rest = []
    for n in lr.nats:
        if n.type == policy and n.logical_ip == lip:
            if eip and n.external_ip == eip and keep is None:
                keep = n
            continue
        rest.append(n)
    if eip and keep is None:
        clash = [n.logical_ip for n in rest if n.type == policy and n.external_ip == eip]
        logic.check_nat_clash(lr.name, policy, eip, clash)
        keep = NatRule(lr.name, policy, eip, lip)
    if keep is not None:
        if port:
            keep = NatRule(lr.name, policy, eip, lip, port, logical_mac.lower())
        rest.append(keep)
    u.set(lr, "nats", rest)


def named_router(st: NbState, name: str) -> FakeRouter:
    lr = st.routers.get(name)
    if lr is None:
        raise OvnNotFoundError(f"logical router {name} not found")
    return lr


def ensure_pg(st: NbState, u: Undo, sg: str) -> FakePortGroup:
    name = ext.sg_port_group_name(sg)
    pg = st.port_groups.get(name)
    if pg is None:
        pg = FakePortGroup(name, external_ids=ext.sg_port_group_ids(sg))
        u.put(st.port_groups, name, pg)
    if sg == ext.DENY_ALL_SG:
        missing = [acl for acl in logic.deny_all_acls(name) if acl not in pg.acls]
        if missing:
            u.set(pg, "acls", [*pg.acls, *missing])
    return pg


def sync_sg(st: NbState, u: Undo, sg: str) -> None:
    pg = ensure_pg(st, u, sg)
    members = [
        p
        for p in st.ports.values()
        if sg in ext.associated_sgs(p.external_ids) and logic.sg_eligible(p.port_security)
    ]
    u.set(pg, "ports", {p.name for p in members})
    for family, addresses in logic.sg_address_sets(p.port_security for p in members).items():
        name = ext.sg_address_set_name(sg, family)
        u.put(st.address_sets, name, addresses)
        if name not in st.address_set_sgs:
            u.put(st.address_set_sgs, name, sg)


def sync_deny_all(st: NbState, u: Undo) -> None:
    pg = ensure_pg(st, u, ext.DENY_ALL_SG)
    eligible = {
        p.name
        for p in st.ports.values()
        if logic.deny_all_eligible(p.external_ids, p.port_security)
    }
    u.set(pg, "ports", eligible)


def set_memberships(st: NbState, u: Undo, port: str, old: set[str], new: list[str]) -> None:
    for sg in old - set(new):
        pg = st.port_groups.get(ext.sg_port_group_name(sg))
        if pg is not None:
            u.discard(pg.ports, port)
    for sg in new:
        u.add(ensure_pg(st, u, sg).ports, port)


def set_addresses(st: NbState, u: Undo, p: FakePort, addresses: list[str]) -> None:
    """Write a port's `addresses`, keeping its switch's IP index in step."""
    ls = st.switches.get(p.switch)
    if ls is not None:
        for ip in logic.address_ips(p.addresses):
            if ls.ips.get(ip) == p.name:
                u.pop(ls.ips, ip)
        for ip in logic.address_ips(addresses):
            u.put(ls.ips, ip, p.name)
    u.set(p, "addresses", addresses)


def index_pod(st: NbState, u: Undo, p: FakePort) -> None:
    key = p.external_ids.get(ext.POD_KEY)
    if key is not None:
        ports = st.pod_ports.get(key)
        if ports is None:
            ports = {}
            u.put(st.pod_ports, key, ports)
        u.put(ports, p.name, None)


def unindex_pod(st: NbState, u: Undo, p: FakePort) -> None:
    key = p.external_ids.get(ext.POD_KEY)
    ports = st.pod_ports.get(key) if key is not None else None
    if key is not None and ports is not None:
        u.pop(ports, p.name)
        if not ports:
            u.pop(st.pod_ports, key)


def drop_port(st: NbState, u: Undo, name: str) -> None:
    p = st.ports.get(name)
    if p is None:
        return
    set_addresses(st, u, p, [])
    unindex_pod(st, u, p)
    u.pop(st.ports, name)
    ls = st.switches.get(p.switch)
    if ls is not None:
        u.pop(ls.ports, name)
    for pg in st.port_groups.values():
        u.discard(pg.ports, name)


def add_port(st: NbState, u: Undo, spec: PortSpec, cols: logic.PortColumns) -> None:
    ls = st.switches.get(spec.switch)
    if ls is None:
        raise OvnNotFoundError(f"logical switch {spec.switch} not found (port {spec.name})")
    existing = st.ports.get(spec.name)
    if existing is not None and existing.switch != spec.switch:
        raise OvnConflictError(
            f"logical switch port {spec.name} already exists on switch {existing.switch}"
        )
    for ip in cols.ips:
        other = ls.ips.get(ip)
        if other is not None and other != spec.name:
            raise logic.duplicate_address(spec.switch, ip, other)
    if existing is None:
        existing = FakePort(spec.name, spec.switch, [], [], {})
        u.put(st.ports, spec.name, existing)
        u.put(ls.ports, spec.name, None)
        old_sgs: set[str] = set()
    else:
        old_sgs = ext.associated_sgs(existing.external_ids)
    set_addresses(st, u, existing, list(cols.addresses))
    u.set(existing, "port_security", list(cols.port_security))
    unindex_pod(st, u, existing)
    u.update(existing.external_ids, cols.external_ids)
    index_pod(st, u, existing)
    if cols.security_groups:
        for sg in old_sgs - set(cols.security_groups):
            u.put(existing.external_ids, ext.associated_sg_key(sg), "false")
        set_memberships(st, u, spec.name, old_sgs, list(cols.security_groups))


def remove_switch(st: NbState, u: Undo, name: str) -> None:
    """The switch and its ports, out of their port groups and routers (none: a no-op)."""
    ls = u.pop(st.switches, name)
    if ls is None:
        return
    for pname in ls.ports:
        p = st.ports[pname]
        unindex_pod(st, u, p)
        u.pop(st.ports, pname)
        for pg in st.port_groups.values():
            u.discard(pg.ports, pname)
        if p.type == "router":
            for lr in st.routers.values():
                u.pop(lr.ports, p.options.get("router-port", ""))
