"""`FakeNbClient`: an in-memory NbClient with the real client's semantics, for fast unit tests.

It keeps NB-like rows in dicts and applies the same rules (controller/ovn/logic.py) and raises the
same errors as `OvsdbappNbClient`; tests/ovn/test_contract.py runs one suite against both so they
cannot drift. Each verb is atomic, like one OVSDB transaction: it writes the state in place
through an undo log (`_Undo`) and, if it raises, the log puts back every value it overwrote. So a
verb costs what it touches, not the size of the NB state; the duplicate-address check looks IPs up
in a per-switch index instead of parsing every port of the switch. Thread-safe (one lock).

Test hooks: `fail_next(method, error)` makes the next call of `method` raise `error` without
changing anything; `requests` counts calls per method (for "was NB touched at all" checks).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controller.core.constants import VENDOR
from controller.core.security_group import acl_sort_key
from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn import security_groups as sgv
from controller.ovn.api import (
    AddressSetInfo,
    InvalidRequestError,
    NatRule,
    NbClient,
    OvnConflictError,
    OvnError,
    OvnNotFoundError,
    PortGroupInfo,
    PortInfo,
    PortSpec,
    RouterPolicy,
    RoutingChange,
    SecurityGroupRows,
    StaticRoute,
)

T = TypeVar("T")
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
class _State:
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


class _Undo:
    """The undo log of one verb: every write to the state goes through it.

    Each write records how to put the old value back; `rollback` replays them newest first, so a
    verb that raises half-way leaves the state as it found it (the all-or-nothing of an OVSDB
    transaction) without copying anything it did not touch.
    """

    def __init__(self) -> None:
        self._log: list[Callable[[], None]] = []

    def put(self, d: MutableMapping[K, V], key: K, value: V) -> None:
        old = d.get(key, _MISSING)
        self._log.append(lambda: _restore(d, key, old))
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


def _restore(d: MutableMapping[Any, Any], key: Any, old: Any) -> None:
    if old is _MISSING:
        d.pop(key, None)
    else:
        d[key] = old


class FakeNbClient:
    """In-memory NbClient (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.state = _State()
        self.requests: Counter[str] = Counter()
        self._failures: dict[str, list[OvnError]] = {}

    # -- test hooks ------------------------------------------------------------------------

    def fail_next(self, method: str, error: OvnError) -> None:
        with self._lock:
            self._failures.setdefault(method, []).append(error)

    def _txn(self, method: str, fn: Callable[[_State, _Undo], T]) -> T:
        with self._lock:
            self.requests[method] += 1
            pending = self._failures.get(method)
            if pending:
                raise pending.pop(0)
            undo = _Undo()
            try:
                return fn(self.state, undo)
            except BaseException:
                undo.rollback()
                raise

    # -- logical switch ports --------------------------------------------------------------

    def create_port(self, spec: PortSpec) -> None:
        self._create(("create_port"), [spec])

    def create_ports(self, specs: Sequence[PortSpec]) -> None:
        if specs:
            self._create("create_ports" if len(specs) > 1 else "create_port", specs)

    def _create(self, method: str, specs: Sequence[PortSpec]) -> None:
        prepared = [(s, logic.port_columns(s)) for s in specs]
        if len({s.name for s, _ in prepared}) != len(prepared):
            raise InvalidRequestError("the same port appears twice in one batch")

        def run(st: _State, u: _Undo) -> None:
            for spec, cols in prepared:
                _create_port(st, u, spec, cols)

        self._txn(method, run)

    def delete_port(self, name: str) -> None:
        self._delete("delete_port", [name])

    def delete_ports(self, names: Sequence[str]) -> None:
        if names:
            self._delete("delete_ports" if len(names) > 1 else "delete_port", names)

    def _delete(self, method: str, names: Sequence[str]) -> None:
        def run(st: _State, u: _Undo) -> None:
            for name in names:
                _drop_port(st, u, name)

        self._txn(method, run)

    def get_port(self, name: str) -> PortInfo | None:
        with self._lock:
            p = self.state.ports.get(name)
            return None if p is None else _info(p)

    def list_pod_ports(self, pod_name: str, pod_namespace: str) -> list[str]:
        key = ext.pod_key(pod_namespace, pod_name)
        with self._lock:
            return sorted(self.state.pod_ports.get(key, ()))

    def list_ports(self, vendor: str = VENDOR) -> list[PortInfo]:
        with self._lock:
            return [
                _info(p)
                for p in sorted(self.state.ports.values(), key=lambda p: p.name)
                if p.external_ids.get(ext.VENDOR_KEY) == vendor
            ]

    # -- static routes ---------------------------------------------------------------------

    def add_static_route(self, policy: str, cidr: str, nexthop: str, router: str) -> None:
        policy, pairs = logic.route_pairs(policy, cidr, nexthop)

        def run(st: _State, u: _Undo) -> None:
            lr = _router(st, router)
            for prefix, hop in pairs:
                u.put(lr.routes, (prefix, policy), StaticRoute(router, prefix, hop, policy))

        self._txn("add_static_route", run)

    def delete_static_route(self, cidr: str, router: str, policy: str = "") -> None:
        if not cidr:
            return
        prefixes = set(logic.route_prefixes(cidr))
        policies = (policy,) if policy else logic.ROUTE_POLICIES
        with self._lock:
            lr = self.state.routers.get(router)
            if lr is None or not any((p, q) in lr.routes for p in prefixes for q in policies):
                return  # nothing to delete: no transaction, as the real client

        def run(st: _State, u: _Undo) -> None:
            lr = st.routers.get(router)
            if lr is not None:
                for prefix in prefixes:
                    for q in policies:
                        u.pop(lr.routes, (prefix, q))

        self._txn("delete_static_route", run)

    def list_static_routes(self, router: str) -> list[StaticRoute]:
        with self._lock:
            lr = self.state.routers.get(router)
            routes = list(lr.routes.values()) if lr else []
        return sorted(routes, key=lambda r: (r.ip_prefix, r.policy, r.nexthop))

    # -- router policies -------------------------------------------------------------------

    def add_router_policy(
        self,
        router: str,
        priority: int,
        match: str,
        action: str,
        nexthops: Sequence[str] = (),
        external_ids: Mapping[str, str] | None = None,
    ) -> None:
        match, hops = logic.policy_args(priority, match, action, nexthops)
        ids = dict(external_ids or {})
        with self._lock:
            lr = self.state.routers.get(router)
            old = lr.policies.get((priority, match)) if lr is not None else None
            if (
                old is not None
                and old.action == action
                and old.nexthops == hops
                and logic.ids_match(old.external_ids, ids)
            ):
                return

        def run(st: _State, u: _Undo) -> None:
            lr = _router(st, router)
            cur = lr.policies.get((priority, match))
            merged = {**(cur.external_ids if cur else {}), **ids}
            u.put(
                lr.policies,
                (priority, match),
                RouterPolicy(router, priority, match, action, hops, merged),
            )

        self._txn("add_router_policy", run)

    def delete_router_policy(self, router: str, priority: int, match: str) -> None:
        match = match.strip()
        with self._lock:
            lr = self.state.routers.get(router)
            if lr is None or (priority, match) not in lr.policies:
                return

        def run(st: _State, u: _Undo) -> None:
            u.pop(_router(st, router).policies, (priority, match))

        self._txn("delete_router_policy", run)

    def list_router_policies(self, router: str) -> list[RouterPolicy]:
        with self._lock:
            lr = self.state.routers.get(router)
            policies = list(lr.policies.values()) if lr else []
        return sorted(policies, key=lambda p: (-p.priority, p.match))

    # -- address sets ----------------------------------------------------------------------

    def add_address_set_addresses(
        self, name: str, addresses: Sequence[str], external_ids: Mapping[str, str] | None = None
    ) -> None:
        logic.check_address_set_name(name)
        entries = logic.address_set_entries(addresses)
        ids = dict(external_ids or {})
        with self._lock:
            have = self.state.address_sets.get(name)
            if (
                have is not None
                and set(entries) <= set(have)
                and logic.ids_match(self.state.address_set_ids.get(name, {}), ids)
            ):
                return

        def run(st: _State, u: _Undo) -> None:
            have = st.address_sets.get(name, [])
            u.put(st.address_sets, name, sorted(set(have) | set(entries)))
            u.put(st.address_set_ids, name, {**st.address_set_ids.get(name, {}), **ids})

        self._txn("add_address_set_addresses", run)

    def remove_address_set_addresses(self, name: str, addresses: Sequence[str]) -> None:
        entries = set(logic.address_set_entries(addresses))
        with self._lock:
            if not entries & set(self.state.address_sets.get(name, ())):
                return

        def run(st: _State, u: _Undo) -> None:
            have = st.address_sets.get(name, [])
            u.put(st.address_sets, name, [a for a in have if a not in entries])

        self._txn("remove_address_set_addresses", run)

    def delete_address_set(self, name: str) -> None:
        with self._lock:
            if name not in self.state.address_sets:
                return

        def run(st: _State, u: _Undo) -> None:
            u.pop(st.address_sets, name)
            u.pop(st.address_set_ids, name)

        self._txn("delete_address_set", run)

    def list_address_sets(self, external_ids: Mapping[str, str]) -> list[AddressSetInfo]:
        with self._lock:
            return [
                AddressSetInfo(name, tuple(sorted(addrs)), dict(ids))
                for name, addrs in sorted(self.state.address_sets.items())
                if logic.ids_match(ids := self.state.address_set_ids.get(name, {}), external_ids)
            ]

    # -- NAT -------------------------------------------------------------------------------

    def update_nat_rule(
        self,
        policy: str,
        logical_ip: str,
        external_ip: str,
        router: str,
        logical_mac: str = "",
        port: str = "",
    ) -> None:
        lip, eip = logic.nat_rule_args(policy, logical_ip, external_ip, logical_mac, port)

        def run(st: _State, u: _Undo) -> None:
            _set_nat(_router(st, router), u, policy, lip, eip, logical_mac, port)

        self._txn("update_nat_rule", run)

    def delete_nat_rule(self, logical_ip: str, router: str) -> None:
        lip = logic.canonical_prefix(logical_ip)

        def run(st: _State, u: _Undo) -> None:
            lr = st.routers.get(router)
            if lr is not None:
                u.set(lr, "nats", [n for n in lr.nats if n.logical_ip != lip])

        self._txn("delete_nat_rule", run)

    # -- one reconciler key's rows -----------------------------------------------------------

    def apply_routing(self, router: str, change: RoutingChange) -> None:
        if change.empty():
            return
        checked = logic.check_routing_change(change)
        with self._lock:
            lr = self.state.routers.get(router)
            if lr is not None and _routing_in_place(self.state, lr, checked):
                return

        def run(st: _State, u: _Undo) -> None:
            _write_routing(st, u, _router(st, router), checked)

        self._txn("apply_routing", run)

    def list_nat_rules(self, router: str) -> list[NatRule]:
        with self._lock:
            lr = self.state.routers.get(router)
            nats = list(lr.nats) if lr else []
        return sorted(nats, key=lambda n: (n.type, n.logical_ip, n.external_ip))

    # -- security groups -------------------------------------------------------------------

    def create_sg_port_group(self, sg: str) -> None:
        logic.check_name(sg, "security group")
        self._txn("create_sg_port_group", lambda st, u: _ensure_pg(st, u, sg) and None)

    def reconcile_port_sg(self, port: str, security_groups: Sequence[str]) -> list[str]:
        new = list(dict.fromkeys(logic.check_name(s, "security group") for s in security_groups))

        def run(st: _State, u: _Undo) -> list[str]:
            p = st.ports.get(port)
            if p is None:
                raise OvnNotFoundError(f"logical switch port {port} not found")
            change = logic.sg_change(p.external_ids, p.port_security, new)
            u.update(p.external_ids, change.external_ids)
            _set_memberships(st, u, port, change.stale, change.groups)
            return change.changed

        return self._txn("reconcile_port_sg", run)

    def sync_sg_ports(self, sg: str) -> None:
        logic.check_name(sg, "security group")

        def run(st: _State, u: _Undo) -> None:
            if sg != ext.DENY_ALL_SG:
                _sync_sg(st, u, sg)
            _sync_deny_all(st, u)

        self._txn("sync_sg_ports", run)

    def list_sg_port_groups(self) -> list[PortGroupInfo]:
        with self._lock:
            return sorted(
                (
                    PortGroupInfo(
                        pg.name, pg.external_ids.get(ext.PG_SG_KEY, ""), tuple(sorted(pg.ports))
                    )
                    for pg in self.state.port_groups.values()
                    if pg.external_ids.get(ext.PG_TYPE_KEY) == ext.PG_TYPE_SECURITY_GROUP
                ),
                key=lambda g: g.name,
            )

    def apply_security_group(
        self, sg: str, acls: Sequence[logic.AclSpec], remote_groups: Sequence[str] = ()
    ) -> None:
        wanted, remotes = sgv.check_apply(sg, acls, remote_groups)

        def run(st: _State, u: _Undo) -> None:
            pg = _ensure_pg(st, u, sg)
            u.update(pg.external_ids, ext.sg_port_group_ids(sg))
            for group in (sg, *remotes):
                for name in sgv.address_set_names(group):
                    if name not in st.address_sets:
                        u.put(st.address_sets, name, [])
                        u.put(st.address_set_sgs, name, group)
            if sorted(pg.acls, key=acl_sort_key) != wanted:
                u.set(pg, "acls", list(wanted))

        self._txn("apply_security_group", run)

    def delete_security_group(self, sg: str) -> None:
        sgv.check_group(sg)

        def run(st: _State, u: _Undo) -> None:
            u.pop(st.port_groups, ext.sg_port_group_name(sg))
            for name in sgv.address_set_names(sg):
                if st.address_set_sgs.get(name) == sg:
                    u.pop(st.address_sets, name)
                    u.pop(st.address_set_sgs, name)

        self._txn("delete_security_group", run)

    def list_security_groups(self) -> list[SecurityGroupRows]:
        with self._lock:
            st = self.state
            return sgv.rows_by_group(
                [
                    (pg.name, pg.external_ids, list(pg.ports), pg.acls)
                    for pg in st.port_groups.values()
                ],
                [
                    (n, {ext.PG_SG_KEY: sg}, st.address_sets.get(n, []))
                    for n, sg in st.address_set_sgs.items()
                ],
            )

    # -- switches and routers --------------------------------------------------------------

    def ensure_logical_router(self, name: str) -> None:
        logic.check_name(name, "logical router")

        def run(st: _State, u: _Undo) -> None:
            if name not in st.routers:
                u.put(st.routers, name, FakeRouter(name, external_ids={ext.VENDOR_KEY: VENDOR}))

        self._txn("ensure_logical_router", run)

    def ensure_logical_switch(
        self, name: str, router: str, cidr: str, gateway: str, external_ids: Mapping[str, str]
    ) -> None:
        logic.check_name(name, "logical switch")
        other = logic.switch_other_config(cidr, gateway)
        ids = {**dict(external_ids), ext.VENDOR_KEY: VENDOR}
        networks = logic.router_port_networks(cidr, gateway) if router else []

        def run(st: _State, u: _Undo) -> None:
            ls = st.switches.get(name)
            if ls is None:
                ls = FakeSwitch(name)
                u.put(st.switches, name, ls)
            u.update(ls.external_ids, ids)
            u.update(ls.other_config, other)
            if not router:
                return
            lr = _router(st, router)
            lsp_name, lrp_name = ext.router_port_names(name, router)
            lrp = lr.ports.get(lrp_name)
            if lrp is None:
                u.put(
                    lr.ports,
                    lrp_name,
                    FakeRouterPort(lrp_name, logic.router_port_mac(lrp_name), networks),
                )
            else:
                u.set(lrp, "networks", networks)
            p = st.ports.get(lsp_name)
            if p is None:
                p = FakePort(lsp_name, name, ["router"], [], {}, "router")
                u.put(st.ports, lsp_name, p)
                u.put(ls.ports, lsp_name, None)
            u.set(p, "type", "router")
            _set_addresses(st, u, p, ["router"])
            u.put(p.options, "router-port", lrp_name)
            u.update(p.external_ids, {ext.VENDOR_KEY: VENDOR, ext.LS_KEY: name})

        self._txn("ensure_logical_switch", run)

    def delete_logical_switch(self, name: str) -> None:
        def run(st: _State, u: _Undo) -> None:
            ls = u.pop(st.switches, name)
            if ls is None:
                return
            for pname in ls.ports:
                p = st.ports[pname]
                _unindex_pod(st, u, p)
                u.pop(st.ports, pname)
                for pg in st.port_groups.values():
                    u.discard(pg.ports, pname)
                if p.type == "router":
                    for lr in st.routers.values():
                        u.pop(lr.ports, p.options.get("router-port", ""))

        self._txn("delete_logical_switch", run)

    def list_logical_switches(self) -> list[str]:
        with self._lock:
            return sorted(self.state.switches)


def _info(p: FakePort) -> PortInfo:
    return PortInfo(
        p.name, p.switch, tuple(p.addresses), tuple(p.port_security), dict(p.external_ids), p.type
    )


def _policies_in_place(lr: FakeRouter, checked: logic.CheckedRoutingChange) -> bool:
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


def _sets_in_place(st: _State, checked: logic.CheckedRoutingChange) -> bool:
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


def _nats_in_place(lr: FakeRouter, checked: logic.CheckedRoutingChange) -> bool:
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


def _routing_in_place(st: _State, lr: FakeRouter, checked: logic.CheckedRoutingChange) -> bool:
    """Every part of the change is already in the state: apply_routing writes nothing."""
    return (
        _policies_in_place(lr, checked)
        and _sets_in_place(st, checked)
        and _nats_in_place(lr, checked)
        and not any((prefix, "src-ip") in lr.routes for prefix in checked.routes)
    )


def _write_routing(
    st: _State, u: _Undo, lr: FakeRouter, checked: logic.CheckedRoutingChange
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
        _set_nat(lr, u, n.type, lip, eip, n.logical_mac, n.port)
    for key in checked.drops:
        u.pop(lr.policies, key)
    for prefix in checked.routes:
        u.pop(lr.routes, (prefix, "src-ip"))


def _set_nat(
    lr: FakeRouter, u: _Undo, policy: str, lip: str, eip: str, logical_mac: str, port: str
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


def _router(st: _State, name: str) -> FakeRouter:
    lr = st.routers.get(name)
    if lr is None:
        raise OvnNotFoundError(f"logical router {name} not found")
    return lr


def _ensure_pg(st: _State, u: _Undo, sg: str) -> FakePortGroup:
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


def _sync_sg(st: _State, u: _Undo, sg: str) -> None:
    pg = _ensure_pg(st, u, sg)
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


def _sync_deny_all(st: _State, u: _Undo) -> None:
    pg = _ensure_pg(st, u, ext.DENY_ALL_SG)
    eligible = {
        p.name
        for p in st.ports.values()
        if logic.deny_all_eligible(p.external_ids, p.port_security)
    }
    u.set(pg, "ports", eligible)


def _set_memberships(st: _State, u: _Undo, port: str, old: set[str], new: list[str]) -> None:
    for sg in old - set(new):
        pg = st.port_groups.get(ext.sg_port_group_name(sg))
        if pg is not None:
            u.discard(pg.ports, port)
    for sg in new:
        u.add(_ensure_pg(st, u, sg).ports, port)


def _set_addresses(st: _State, u: _Undo, p: FakePort, addresses: list[str]) -> None:
    """Write a port's `addresses`, keeping its switch's IP index in step."""
    ls = st.switches.get(p.switch)
    if ls is not None:
        for ip in logic.address_ips(p.addresses):
            if ls.ips.get(ip) == p.name:
                u.pop(ls.ips, ip)
        for ip in logic.address_ips(addresses):
            u.put(ls.ips, ip, p.name)
    u.set(p, "addresses", addresses)


def _index_pod(st: _State, u: _Undo, p: FakePort) -> None:
    key = p.external_ids.get(ext.POD_KEY)
    if key is not None:
        ports = st.pod_ports.get(key)
        if ports is None:
            ports = {}
            u.put(st.pod_ports, key, ports)
        u.put(ports, p.name, None)


def _unindex_pod(st: _State, u: _Undo, p: FakePort) -> None:
    key = p.external_ids.get(ext.POD_KEY)
    ports = st.pod_ports.get(key) if key is not None else None
    if key is not None and ports is not None:
        u.pop(ports, p.name)
        if not ports:
            u.pop(st.pod_ports, key)


def _drop_port(st: _State, u: _Undo, name: str) -> None:
    p = st.ports.get(name)
    if p is None:
        return
    _set_addresses(st, u, p, [])
    _unindex_pod(st, u, p)
    u.pop(st.ports, name)
    ls = st.switches.get(p.switch)
    if ls is not None:
        u.pop(ls.ports, name)
    for pg in st.port_groups.values():
        u.discard(pg.ports, name)


def _create_port(st: _State, u: _Undo, spec: PortSpec, cols: logic.PortColumns) -> None:
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
    _set_addresses(st, u, existing, list(cols.addresses))
    u.set(existing, "port_security", list(cols.port_security))
    _unindex_pod(st, u, existing)
    u.update(existing.external_ids, cols.external_ids)
    _index_pod(st, u, existing)
    if cols.security_groups:
        for sg in old_sgs - set(cols.security_groups):
            u.put(existing.external_ids, ext.associated_sg_key(sg), "false")
        _set_memberships(st, u, spec.name, old_sgs, list(cols.security_groups))


def _conforms(client: FakeNbClient) -> NbClient:
    """mypy proves here that the fake implements the whole NbClient contract."""
    return client
