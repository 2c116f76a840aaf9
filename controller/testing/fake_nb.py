"""`FakeNbClient`: an in-memory NbClient with the real client's semantics, for fast unit tests.

It keeps NB-like rows in dicts (fake_nb_rows.py) and applies the same rules
(controller/ovn/logic.py) and raises the same errors as `OvsdbappNbClient`;
tests/ovn/test_contract.py runs one suite against both so they cannot drift. Each verb is atomic
through an undo log and costs what it touches, not the size of the NB state. Thread-safe.

Test hooks: `fail_next(method, error)` makes the next call of `method` raise `error` without
changing anything; `requests` counts calls per method (for "was NB touched at all" checks).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from controller.core.constants import VENDOR
from controller.core.naming import pod_key
from controller.core.security_group import acl_sort_key
from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn import security_groups as sgv
from controller.ovn.api import (
    AddressSetInfo,
    InvalidRequestError,
    NatRule,
    NbClient,
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
from controller.testing.fake_nb_rows import (
    FakePort,
    FakeRouter,
    FakeRouterPort,
    FakeSwitch,
    NbState,
    Undo,
    add_port,
    drop_port,
    ensure_pg,
    named_router,
    port_info,
    remove_switch,
    routing_in_place,
    set_addresses,
    set_memberships,
    set_nat,
    sync_deny_all,
    sync_sg,
    write_routing,
)

T = TypeVar("T")


class FakeNbClient:
    """In-memory NbClient (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.state = NbState()
        self.requests: Counter[str] = Counter()
        self._failures: dict[str, list[OvnError]] = {}

    # -- test hooks ------------------------------------------------------------------------

    def fail_next(self, method: str, error: OvnError) -> None:
        with self._lock:
            self._failures.setdefault(method, []).append(error)

    def _txn(self, method: str, fn: Callable[[NbState, Undo], T]) -> T:
        with self._lock:
            self.requests[method] += 1
            pending = self._failures.get(method)
            if pending:
                raise pending.pop(0)
            undo = Undo()
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

        def run(st: NbState, u: Undo) -> None:
            for spec, cols in prepared:
                add_port(st, u, spec, cols)

        self._txn(method, run)

    def delete_port(self, name: str) -> None:
        self._delete("delete_port", [name])

    def delete_ports(self, names: Sequence[str]) -> None:
        if names:
            self._delete("delete_ports" if len(names) > 1 else "delete_port", names)

    def _delete(self, method: str, names: Sequence[str]) -> None:
        def run(st: NbState, u: Undo) -> None:
            for name in names:
                drop_port(st, u, name)

        self._txn(method, run)

    def get_port(self, name: str) -> PortInfo | None:
        with self._lock:
            p = self.state.ports.get(name)
            return None if p is None else port_info(p)

    def list_pod_ports(self, pod_name: str, pod_namespace: str) -> list[str]:
        key = pod_key(pod_namespace, pod_name)
        with self._lock:
            return sorted(self.state.pod_ports.get(key, ()))

    def list_ports(self, vendor: str = VENDOR) -> list[PortInfo]:
        with self._lock:
            return [
                port_info(p)
                for p in sorted(self.state.ports.values(), key=lambda p: p.name)
                if p.external_ids.get(ext.VENDOR_KEY) == vendor
            ]

    # -- static routes ---------------------------------------------------------------------

    def add_static_route(self, policy: str, cidr: str, nexthop: str, router: str) -> None:
        policy, pairs = logic.route_pairs(policy, cidr, nexthop)

        def run(st: NbState, u: Undo) -> None:
            lr = named_router(st, router)
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

        def run(st: NbState, u: Undo) -> None:
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

        def run(st: NbState, u: Undo) -> None:
            lr = named_router(st, router)
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

        def run(st: NbState, u: Undo) -> None:
            u.pop(named_router(st, router).policies, (priority, match))

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

        def run(st: NbState, u: Undo) -> None:
            have = st.address_sets.get(name, [])
            u.put(st.address_sets, name, sorted(set(have) | set(entries)))
            u.put(st.address_set_ids, name, {**st.address_set_ids.get(name, {}), **ids})

        self._txn("add_address_set_addresses", run)

    def remove_address_set_addresses(self, name: str, addresses: Sequence[str]) -> None:
        entries = set(logic.address_set_entries(addresses))
        with self._lock:
            if not entries & set(self.state.address_sets.get(name, ())):
                return

        def run(st: NbState, u: Undo) -> None:
            have = st.address_sets.get(name, [])
            u.put(st.address_sets, name, [a for a in have if a not in entries])

        self._txn("remove_address_set_addresses", run)

    def delete_address_set(self, name: str) -> None:
        with self._lock:
            if name not in self.state.address_sets:
                return

        def run(st: NbState, u: Undo) -> None:
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

        def run(st: NbState, u: Undo) -> None:
            set_nat(named_router(st, router), u, policy, lip, eip, logical_mac, port)

        self._txn("update_nat_rule", run)

    def delete_nat_rule(self, logical_ip: str, router: str) -> None:
        lip = logic.canonical_prefix(logical_ip)

        def run(st: NbState, u: Undo) -> None:
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
            if lr is not None and routing_in_place(self.state, lr, checked):
                return

        def run(st: NbState, u: Undo) -> None:
            write_routing(st, u, named_router(st, router), checked)

        self._txn("apply_routing", run)

    def list_nat_rules(self, router: str) -> list[NatRule]:
        with self._lock:
            lr = self.state.routers.get(router)
            nats = list(lr.nats) if lr else []
        return sorted(nats, key=lambda n: (n.type, n.logical_ip, n.external_ip))

    # -- security groups -------------------------------------------------------------------

    def create_sg_port_group(self, sg: str) -> None:
        logic.check_row_name(sg, "security group")
        self._txn("create_sg_port_group", lambda st, u: ensure_pg(st, u, sg) and None)

    def reconcile_port_sg(self, port: str, security_groups: Sequence[str]) -> list[str]:
        new = list(logic.check_sg_names(security_groups))

        def run(st: NbState, u: Undo) -> list[str]:
            p = st.ports.get(port)
            if p is None:
                raise OvnNotFoundError(f"logical switch port {port} not found")
            change = logic.sg_change(p.external_ids, p.port_security, new)
            u.update(p.external_ids, change.external_ids)
            set_memberships(st, u, port, change.stale, change.groups)
            return change.changed

        return self._txn("reconcile_port_sg", run)

    def sync_sg_ports(self, sg: str) -> None:
        logic.check_row_name(sg, "security group")

        def run(st: NbState, u: Undo) -> None:
            if sg != ext.DENY_ALL_SG:
                sync_sg(st, u, sg)
            sync_deny_all(st, u)

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

        def run(st: NbState, u: Undo) -> None:
            pg = ensure_pg(st, u, sg)
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

        def run(st: NbState, u: Undo) -> None:
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
        logic.check_row_name(name, "logical router")

        def run(st: NbState, u: Undo) -> None:
            if name not in st.routers:
                u.put(st.routers, name, FakeRouter(name, external_ids={ext.VENDOR_KEY: VENDOR}))

        self._txn("ensure_logical_router", run)

    def ensure_logical_switch(
        self, name: str, router: str, cidr: str, gateway: str, external_ids: Mapping[str, str]
    ) -> None:
        logic.check_row_name(name, "logical switch")
        other = logic.switch_other_config(cidr, gateway)
        ids = {**dict(external_ids), ext.VENDOR_KEY: VENDOR}
        networks = logic.router_port_networks(cidr, gateway) if router else []

        def run(st: NbState, u: Undo) -> None:
            ls = st.switches.get(name)
            if ls is None:
                ls = FakeSwitch(name)
                u.put(st.switches, name, ls)
            u.update(ls.external_ids, ids)
            u.update(ls.other_config, other)
            if not router:
                return
            lr = named_router(st, router)
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
            set_addresses(st, u, p, ["router"])
            u.put(p.options, "router-port", lrp_name)
            u.update(p.external_ids, {ext.VENDOR_KEY: VENDOR, ext.LS_KEY: name})

        self._txn("ensure_logical_switch", run)

    def delete_logical_switch(self, name: str) -> None:
        self._txn("delete_logical_switch", lambda st, u: remove_switch(st, u, name))

    def list_logical_switches(self) -> list[str]:
        with self._lock:
            return sorted(self.state.switches)


def _conforms(client: FakeNbClient) -> NbClient:
    """mypy proves here that the fake implements the whole NbClient contract."""
    return client
