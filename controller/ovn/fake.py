"""`FakeNbClient`: an in-memory NbClient with the real client's semantics, for fast unit tests.

It keeps NB-like rows in dicts and applies the same rules (controller/ovn/logic.py) and raises the
same errors as `OvsdbappNbClient`; tests/ovn/test_contract.py runs one suite against both so they
cannot drift. Each verb is atomic: it works on a copy of the state and swaps it in only on
success, like one OVSDB transaction. Thread-safe (one lock).

Test hooks: `fail_next(method, error)` makes the next call of `method` raise `error` without
changing anything; `requests` counts calls per method (for "was NB touched at all" checks).
"""

from __future__ import annotations

import copy
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn.api import (
    VENDOR,
    DuplicateAddressError,
    InvalidRequestError,
    NatRule,
    NbClient,
    NotFoundError,
    OvnConflictError,
    OvnError,
    PortGroupInfo,
    PortInfo,
    PortSpec,
    StaticRoute,
)

T = TypeVar("T")


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
    ports: list[str] = field(default_factory=list)
    external_ids: dict[str, str] = field(default_factory=dict)
    other_config: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeRouterPort:
    name: str
    mac: str
    networks: list[str]


@dataclass
class FakeRouter:
    name: str
    ports: dict[str, FakeRouterPort] = field(default_factory=dict)
    routes: list[StaticRoute] = field(default_factory=list)
    nats: list[NatRule] = field(default_factory=list)
    external_ids: dict[str, str] = field(default_factory=dict)


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

    def _txn(self, method: str, fn: Callable[[_State], T]) -> T:
        with self._lock:
            self.requests[method] += 1
            pending = self._failures.get(method)
            if pending:
                raise pending.pop(0)
            work = copy.deepcopy(self.state)
            result = fn(work)
            self.state = work
            return result

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

        def run(st: _State) -> None:
            for spec, cols in prepared:
                _create_port(st, spec, cols)

        self._txn(method, run)

    def delete_port(self, name: str) -> None:
        self._delete("delete_port", [name])

    def delete_ports(self, names: Sequence[str]) -> None:
        if names:
            self._delete("delete_ports" if len(names) > 1 else "delete_port", names)

    def _delete(self, method: str, names: Sequence[str]) -> None:
        def run(st: _State) -> None:
            for name in names:
                _drop_port(st, name)

        self._txn(method, run)

    def get_port(self, name: str) -> PortInfo | None:
        with self._lock:
            p = self.state.ports.get(name)
            return None if p is None else _info(p)

    def list_pod_ports(self, pod_name: str, pod_namespace: str) -> list[str]:
        key = ext.pod_key(pod_namespace, pod_name)
        with self._lock:
            return sorted(
                p.name for p in self.state.ports.values() if p.external_ids.get(ext.POD_KEY) == key
            )

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

        def run(st: _State) -> None:
            lr = _router(st, router)
            for prefix, hop in pairs:
                for i, r in enumerate(lr.routes):
                    if r.ip_prefix == prefix and r.policy == policy:
                        lr.routes[i] = StaticRoute(router, prefix, hop, policy)
                        break
                else:
                    lr.routes.append(StaticRoute(router, prefix, hop, policy))

        self._txn("add_static_route", run)

    def delete_static_route(self, cidr: str, router: str) -> None:
        if not cidr:
            return
        prefixes = set(logic.route_prefixes(cidr))

        def run(st: _State) -> None:
            lr = st.routers.get(router)
            if lr is not None:
                lr.routes = [r for r in lr.routes if r.ip_prefix not in prefixes]

        self._txn("delete_static_route", run)

    def list_static_routes(self, router: str) -> list[StaticRoute]:
        with self._lock:
            lr = self.state.routers.get(router)
            routes = list(lr.routes) if lr else []
        return sorted(routes, key=lambda r: (r.ip_prefix, r.policy, r.nexthop))

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
        lip = logic.nat_logical_ip(policy, logical_ip)
        eip = str(logic.parse_ip(external_ip, "NAT external IP")) if external_ip else ""
        logic.check_nat_extras(policy, logical_mac, port)
        logic.check_nat_family(lip, eip)

        def run(st: _State) -> None:
            lr = _router(st, router)
            keep: NatRule | None = None
            rest = []
            for n in lr.nats:
                if n.type == policy and n.logical_ip == lip:
                    if eip and n.external_ip == eip and keep is None:
                        keep = n
                    continue
                rest.append(n)
            if eip and keep is None:
                clash = [n for n in rest if n.type == policy and n.external_ip == eip]
                if policy == "dnat_and_snat" and clash:
                    raise OvnConflictError(
                        f"router {router} already has a dnat_and_snat for {eip} "
                        f"(logical IP {clash[0].logical_ip})"
                    )
                keep = NatRule(router, policy, eip, lip)
            if keep is not None:
                if port:
                    keep = NatRule(router, policy, eip, lip, port, logical_mac.lower())
                rest.append(keep)
            lr.nats = rest

        self._txn("update_nat_rule", run)

    def delete_nat_rule(self, logical_ip: str, router: str) -> None:
        lip = logic.canonical_prefix(logical_ip)

        def run(st: _State) -> None:
            lr = st.routers.get(router)
            if lr is not None:
                lr.nats = [n for n in lr.nats if n.logical_ip != lip]

        self._txn("delete_nat_rule", run)

    def list_nat_rules(self, router: str) -> list[NatRule]:
        with self._lock:
            lr = self.state.routers.get(router)
            nats = list(lr.nats) if lr else []
        return sorted(nats, key=lambda n: (n.type, n.logical_ip, n.external_ip))

    # -- security groups -------------------------------------------------------------------

    def create_sg_port_group(self, sg: str) -> None:
        logic.check_name(sg, "security group")
        self._txn("create_sg_port_group", lambda st: _ensure_pg(st, sg) and None)

    def reconcile_port_sg(self, port: str, security_groups: Sequence[str]) -> list[str]:
        new = list(dict.fromkeys(logic.check_name(s, "security group") for s in security_groups))

        def run(st: _State) -> list[str]:
            p = st.ports.get(port)
            if p is None:
                raise NotFoundError(f"logical switch port {port} not found")
            old = ext.split_sgs(p.external_ids.get(ext.SECURITY_GROUPS_KEY, ""))
            changed = sorted(set(old) ^ set(new))
            stale = set(old) | ext.associated_sgs(p.external_ids)
            for sg in changed:
                p.external_ids[ext.associated_sg_key(sg)] = "true" if sg in new else "false"
            p.external_ids[ext.SECURITY_GROUPS_KEY] = ext.join_sgs(new)
            eligible = new if logic.sg_eligible(p.port_security) else []
            _set_memberships(st, port, stale, eligible)
            return changed

        return self._txn("reconcile_port_sg", run)

    def sync_sg_ports(self, sg: str) -> None:
        logic.check_name(sg, "security group")

        def run(st: _State) -> None:
            if sg != ext.DENY_ALL_SG:
                _sync_sg(st, sg)
            _sync_deny_all(st)

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

    # -- switches and routers --------------------------------------------------------------

    def ensure_logical_router(self, name: str) -> None:
        logic.check_name(name, "logical router")

        def run(st: _State) -> None:
            st.routers.setdefault(name, FakeRouter(name, external_ids={ext.VENDOR_KEY: VENDOR}))

        self._txn("ensure_logical_router", run)

    def ensure_logical_switch(
        self, name: str, router: str, cidr: str, gateway: str, external_ids: Mapping[str, str]
    ) -> None:
        logic.check_name(name, "logical switch")
        other = logic.switch_other_config(cidr, gateway)
        ids = {**dict(external_ids), ext.VENDOR_KEY: VENDOR}
        networks = logic.router_port_networks(cidr, gateway) if router else []

        def run(st: _State) -> None:
            ls = st.switches.setdefault(name, FakeSwitch(name))
            ls.external_ids.update(ids)
            ls.other_config.update(other)
            if not router:
                return
            lr = _router(st, router)
            lsp_name, lrp_name = ext.router_port_names(name, router)
            lrp = lr.ports.get(lrp_name)
            if lrp is None:
                lr.ports[lrp_name] = FakeRouterPort(
                    lrp_name, logic.router_port_mac(lrp_name), networks
                )
            else:
                lrp.networks = networks
            p = st.ports.get(lsp_name)
            if p is None:
                st.ports[lsp_name] = FakePort(lsp_name, name, ["router"], [], {}, "router")
                ls.ports.append(lsp_name)
                p = st.ports[lsp_name]
            p.type = "router"
            p.addresses = ["router"]
            p.options["router-port"] = lrp_name
            p.external_ids.update({ext.VENDOR_KEY: VENDOR, ext.LS_KEY: name})

        self._txn("ensure_logical_switch", run)

    def delete_logical_switch(self, name: str) -> None:
        def run(st: _State) -> None:
            ls = st.switches.pop(name, None)
            if ls is None:
                return
            for pname in ls.ports:
                p = st.ports.pop(pname)
                for pg in st.port_groups.values():
                    pg.ports.discard(pname)
                if p.type == "router":
                    for lr in st.routers.values():
                        lr.ports.pop(p.options.get("router-port", ""), None)

        self._txn("delete_logical_switch", run)

    def list_logical_switches(self) -> list[str]:
        with self._lock:
            return sorted(self.state.switches)


def _info(p: FakePort) -> PortInfo:
    return PortInfo(
        p.name, p.switch, tuple(p.addresses), tuple(p.port_security), dict(p.external_ids)
    )


def _router(st: _State, name: str) -> FakeRouter:
    lr = st.routers.get(name)
    if lr is None:
        raise NotFoundError(f"logical router {name} not found")
    return lr


def _ensure_pg(st: _State, sg: str) -> FakePortGroup:
    name = ext.sg_port_group_name(sg)
    pg = st.port_groups.get(name)
    if pg is None:
        pg = st.port_groups[name] = FakePortGroup(
            name,
            external_ids={
                ext.PG_TYPE_KEY: ext.PG_TYPE_SECURITY_GROUP,
                ext.PG_SG_KEY: sg,
                ext.PG_NAME_KEY: name,
            },
        )
    if sg == ext.DENY_ALL_SG:
        for acl in logic.deny_all_acls(name):
            if acl not in pg.acls:
                pg.acls.append(acl)
    return pg


def _sync_sg(st: _State, sg: str) -> None:
    pg = _ensure_pg(st, sg)
    members = [
        p
        for p in st.ports.values()
        if sg in ext.associated_sgs(p.external_ids) and logic.sg_eligible(p.port_security)
    ]
    pg.ports = {p.name for p in members}
    ips = [ip for p in members for ip in logic.port_security_ips(p.port_security)]
    st.address_sets[ext.sg_address_set_name(sg, "v4")] = sorted({i for i in ips if ":" not in i})
    st.address_sets[ext.sg_address_set_name(sg, "v6")] = sorted({i for i in ips if ":" in i})


def _sync_deny_all(st: _State) -> None:
    pg = _ensure_pg(st, ext.DENY_ALL_SG)
    pg.ports = {
        p.name
        for p in st.ports.values()
        if logic.deny_all_eligible(p.external_ids, p.port_security)
    }


def _set_memberships(st: _State, port: str, old: set[str], new: list[str]) -> None:
    for sg in old - set(new):
        pg = st.port_groups.get(ext.sg_port_group_name(sg))
        if pg is not None:
            pg.ports.discard(port)
    for sg in new:
        _ensure_pg(st, sg).ports.add(port)


def _drop_port(st: _State, name: str) -> None:
    p = st.ports.pop(name, None)
    if p is None:
        return
    ls = st.switches.get(p.switch)
    if ls is not None and name in ls.ports:
        ls.ports.remove(name)
    for pg in st.port_groups.values():
        pg.ports.discard(name)


def _create_port(st: _State, spec: PortSpec, cols: logic.PortColumns) -> None:
    ls = st.switches.get(spec.switch)
    if ls is None:
        raise NotFoundError(f"logical switch {spec.switch} not found (port {spec.name})")
    existing = st.ports.get(spec.name)
    if existing is not None and existing.switch != spec.switch:
        raise OvnConflictError(
            f"logical switch port {spec.name} already exists on switch {existing.switch}"
        )
    for ip in cols.ips:
        kind = "IPv6" if ":" in ip else "IPv4"
        for other in ls.ports:
            if other != spec.name and ip in logic.address_ips(st.ports[other].addresses):
                raise DuplicateAddressError(
                    f"Error on switch {spec.switch}: duplicate {kind} address '{ip}' found on "
                    f"logical switch port '{other}'"
                )
    if existing is None:
        existing = FakePort(spec.name, spec.switch, [], [], {})
        st.ports[spec.name] = existing
        ls.ports.append(spec.name)
        old_sgs: set[str] = set()
    else:
        old_sgs = ext.associated_sgs(existing.external_ids)
    existing.addresses = list(cols.addresses)
    existing.port_security = list(cols.port_security)
    existing.external_ids.update(cols.external_ids)
    if cols.security_groups:
        for sg in old_sgs - set(cols.security_groups):
            existing.external_ids[ext.associated_sg_key(sg)] = "false"
        _set_memberships(st, spec.name, old_sgs, list(cols.security_groups))


def _conforms(client: FakeNbClient) -> NbClient:
    """mypy proves here that the fake implements the whole NbClient contract."""
    return client
