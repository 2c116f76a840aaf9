"""The routing verbs of `OvsdbappNbClient`: static routes, router policies, address sets, NAT.

`RoutingVerbs` is a mixin: it holds no state of its own and runs on the client's index, IDL,
`_transact` (one verb = one transaction, errors mapped to `OvnError`) and `_read` (the IDL cache
under the connection lock); impl_idl.py's module docstring states the guarantees these verbs keep.
Each verb first checks the cache and skips the transaction when there is nothing to do (every pod
add and delete comes through several of them), then rechecks inside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from controller.ovn import idl_routing_change, logic
from controller.ovn.api import (
    AddressSetInfo,
    NatRule,
    RouterPolicy,
    RoutingChange,
    StaticRoute,
)
from controller.ovn.connection import NbIdl
from controller.ovn.idl_context import VerbContext, router_row
from controller.ovn.idl_index import NbIndex, Row, committed, has_ref, has_string, opt_value
from controller.ovn.tables import AS, LR, NAT, POLICY, ROUTE


class RoutingVerbs:
    """Static route, router policy, address set and NAT verbs of the NbClient contract."""

    _idl: NbIdl
    _index: NbIndex

    if TYPE_CHECKING:
        # Provided by OvsdbappNbClient (impl_idl.py).
        def _transact(
            self,
            method: str,
            fn: Callable[[VerbContext], Any],
            keys: frozenset[Hashable] | None = None,
        ) -> Any: ...

        def _read(self, fn: Callable[[], Any]) -> Any: ...

    # -- static routes ---------------------------------------------------------------------

    def add_static_route(self, policy: str, cidr: str, nexthop: str, router: str) -> None:
        policy, pairs = logic.route_pairs(policy, cidr, nexthop)

        def run(ctx: VerbContext) -> None:
            lr = router_row(ctx, router)
            for prefix, hop in pairs:
                found = [
                    r
                    for r in ctx.index.rows(ROUTE, ("route", prefix, policy))
                    if has_ref(lr, "static_routes", r)
                ]
                if found:
                    if found[0].nexthop != hop:
                        found[0].nexthop = hop
                else:
                    route = ctx.insert(ROUTE, ip_prefix=prefix, nexthop=hop, policy=[policy])
                    ctx.add_ref(lr, "static_routes", route)

        keys = frozenset(("route", router, prefix, policy) for prefix, _ in pairs)
        self._transact("add_static_route", run, keys)

    def delete_static_route(self, cidr: str, router: str, policy: str = "") -> None:
        if not cidr:
            return
        prefixes = logic.route_prefixes(cidr)

        def key(prefix: str) -> tuple[str, ...]:
            return ("route", prefix, policy) if policy else ("prefix", prefix)

        def present() -> bool:
            lr = self._index.first(LR, ("name", router))
            return lr is not None and any(
                has_ref(lr, "static_routes", r)
                for prefix in prefixes
                for r in self._index.rows(ROUTE, key(prefix))
            )

        if not self._read(present):
            # NOTE: every pod delete (and the migration of every routed pod) asks for this;
            # an empty transaction would still cost a round trip through the IDL thread.
            return

        def run(ctx: VerbContext) -> None:
            lr = ctx.named(LR, router)
            if lr is None:
                return
            for prefix in prefixes:
                for r in ctx.index.rows(ROUTE, key(prefix)):
                    if has_ref(lr, "static_routes", r):
                        ctx.delete(r, lr, "static_routes")

        self._transact("delete_static_route", run)

    def list_static_routes(self, router: str) -> list[StaticRoute]:
        def read() -> list[StaticRoute]:
            lr = self._index.first(LR, ("name", router))
            if lr is None:
                return []
            return sorted(
                (
                    StaticRoute(router, r.ip_prefix, r.nexthop, opt_value(r.policy) or "dst-ip")
                    for r in lr.static_routes
                ),
                key=lambda r: (r.ip_prefix, r.policy, r.nexthop),
            )

        result: list[StaticRoute] = self._read(read)
        return result

    # -- router policies -------------------------------------------------------------------

    def _policy_rows(self, lr: Row, priority: int, match: str) -> list[Row]:
        return idl_routing_change.policy_rows(self._index, lr, priority, match)

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

        def same() -> bool:
            lr = self._index.first(LR, ("name", router))
            rows = self._policy_rows(lr, priority, match) if lr is not None else []
            return len(rows) == 1 and idl_routing_change.policy_is(rows[0], action, hops, ids)

        if self._read(same):
            return

        def run(ctx: VerbContext) -> None:
            lr = router_row(ctx, router)
            rows = [r for r in self._policy_rows(lr, priority, match) if r.uuid not in ctx.deleted]
            for extra in rows[1:]:
                ctx.delete(extra, lr, "policies")
            if not rows:
                row = ctx.insert(
                    POLICY,
                    priority=priority,
                    match=match,
                    action=action,
                    nexthops=list(hops),
                    external_ids=ids,
                )
                ctx.add_ref(lr, "policies", row)
                return
            row = rows[0]
            if row.action != action:
                row.action = action
            if tuple(row.nexthops) != hops:
                row.nexthops = list(hops)
            ctx.set_keys(row, "external_ids", ids)

        self._transact("add_router_policy", run)

    def delete_router_policy(self, router: str, priority: int, match: str) -> None:
        match = match.strip()

        def present() -> bool:
            lr = self._index.first(LR, ("name", router))
            return lr is not None and bool(self._policy_rows(lr, priority, match))

        if not self._read(present):
            return

        def run(ctx: VerbContext) -> None:
            lr = ctx.named(LR, router)
            if lr is not None:
                for r in self._policy_rows(lr, priority, match):
                    ctx.delete(r, lr, "policies")

        self._transact("delete_router_policy", run)

    def list_router_policies(self, router: str) -> list[RouterPolicy]:
        def read() -> list[RouterPolicy]:
            lr = self._index.first(LR, ("name", router))
            if lr is None:
                return []
            return sorted(
                (
                    RouterPolicy(
                        router,
                        r.priority,
                        r.match,
                        r.action,
                        tuple(r.nexthops),
                        dict(r.external_ids),
                    )
                    for r in lr.policies
                ),
                key=lambda p: (-p.priority, p.match),
            )

        result: list[RouterPolicy] = self._read(read)
        return result

    # -- address sets ----------------------------------------------------------------------

    def add_address_set_addresses(
        self, name: str, addresses: Sequence[str], external_ids: Mapping[str, str] | None = None
    ) -> None:
        logic.check_address_set_name(name)
        entries = logic.address_set_entries(addresses)
        ids = dict(external_ids or {})

        def state() -> str:
            row = self._index.first(AS, ("name", name))
            if row is None:
                return "missing"
            done = all(has_string(row, "addresses", e) for e in entries) and logic.ids_match(
                committed(row, "external_ids"), ids
            )
            return "same" if done else "exists"

        found = self._read(state)
        if found == "same":
            return

        def run(ctx: VerbContext) -> None:
            row = ctx.named(AS, name)
            if row is None:
                ctx.insert(AS, name=name, addresses=entries, external_ids=ids)
                return
            if row._data is None:  # inserted by an earlier verb of this transaction
                row.addresses = sorted({*row.addresses, *entries})
                row.external_ids = {**row.external_ids, **ids}
                return
            for entry in entries:
                # NOTE: one set per node grows with its pods; a membership test on the
                # committed datum is O(log n), `row.addresses` would copy the whole set.
                if row._data is None or not has_string(row, "addresses", entry):
                    row.addvalue("addresses", entry)
            ctx.set_keys(row, "external_ids", ids)

        # NOTE: adding entries to a set is commutative (mutations), so the verbs of pods of one
        # node may share a transaction when they add different entries; a verb that may
        # create the set is kept apart from every other verb on that set.
        keys: set[Hashable] = {(AS, name, e) for e in entries}
        if found == "missing":
            keys.add((AS, name))
        self._transact("add_address_set_addresses", run, frozenset(keys))

    def remove_address_set_addresses(self, name: str, addresses: Sequence[str]) -> None:
        entries = set(logic.address_set_entries(addresses))

        def present() -> bool:
            row = self._index.first(AS, ("name", name))
            return row is not None and any(has_string(row, "addresses", e) for e in entries)

        if not self._read(present):
            return

        def run(ctx: VerbContext) -> None:
            row = ctx.named(AS, name)
            if row is None:
                return
            for entry in sorted(entries):
                if has_string(row, "addresses", entry):
                    row.delvalue("addresses", entry)

        self._transact("remove_address_set_addresses", run)

    def delete_address_set(self, name: str) -> None:
        if self._read(lambda: self._index.first(AS, ("name", name))) is None:
            return

        def run(ctx: VerbContext) -> None:
            row = ctx.named(AS, name)
            if row is not None:
                row.delete()
                ctx.deleted.add(row.uuid)

        self._transact("delete_address_set", run)

    def list_address_sets(self, external_ids: Mapping[str, str]) -> list[AddressSetInfo]:
        def read() -> list[AddressSetInfo]:
            out = []
            for row in self._idl.tables[AS].rows.values():
                ids = committed(row, "external_ids")
                if logic.ids_match(ids, external_ids):
                    addrs = tuple(sorted(committed(row, "addresses")))
                    out.append(AddressSetInfo(committed(row, "name"), addrs, dict(ids)))
            return sorted(out, key=lambda a: a.name)

        result: list[AddressSetInfo] = self._read(read)
        return result

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
        if not eip and self._read(lambda: self._nothing_to_remove(policy, lip, router)):
            # NOTE: every routed pod without EIP/SNAT comes here twice; an empty transaction
            # would still cost a round trip through the IDL thread.
            return

        def run(ctx: VerbContext) -> None:
            idl_routing_change.set_nat(
                ctx, router_row(ctx, router), policy, lip, eip, logical_mac, port
            )

        keys = frozenset({("nat", router, policy, lip), ("nat-eip", router, policy, eip)})
        self._transact("update_nat_rule", run, keys)

    def _nothing_to_remove(self, policy: str, lip: str, router: str) -> bool:
        """The router exists and has no `policy` NAT for `lip` (call under the IDL lock)."""
        lr = self._index.first(LR, ("name", router))
        return lr is not None and not any(
            has_ref(lr, "nat", r) for r in self._index.rows(NAT, ("lip", policy, lip))
        )

    def delete_nat_rule(self, logical_ip: str, router: str) -> None:
        lip = logic.canonical_prefix(logical_ip)

        def run(ctx: VerbContext) -> None:
            lr = ctx.named(LR, router)
            if lr is None:
                return
            for nat_type in logic.NAT_TYPES:
                for r in ctx.index.rows(NAT, ("lip", nat_type, lip)):
                    if has_ref(lr, "nat", r):
                        ctx.delete(r, lr, "nat")

        self._transact("delete_nat_rule", run)

    # -- one reconciler key's rows -----------------------------------------------------------

    def apply_routing(self, router: str, change: RoutingChange) -> None:
        if change.empty():
            return
        todo = logic.check_routing_change(change)
        found = self._read(lambda: idl_routing_change.pending(self._index, router, todo))
        missing = None
        if found is not None:
            todo, missing = found
            if todo.empty():
                # NOTE: a pod's rows are usually in place already (its add wrote them); an
                # empty transaction would still cost a round trip through the IDL thread.
                return

        def run(ctx: VerbContext) -> None:
            idl_routing_change.write(ctx, router, todo)

        # NOTE: the rows are looked up through the indexes by these keys, so the changes of
        # pods of one node (different entries) may share a transaction (group commit).
        self._transact("apply_routing", run, idl_routing_change.lock_keys(router, todo, missing))

    def list_nat_rules(self, router: str) -> list[NatRule]:
        def read() -> list[NatRule]:
            lr = self._index.first(LR, ("name", router))
            if lr is None:
                return []
            return sorted(
                (
                    NatRule(
                        router,
                        r.type,
                        r.external_ip,
                        r.logical_ip,
                        opt_value(r.logical_port),
                        opt_value(r.external_mac),
                    )
                    for r in lr.nat
                ),
                key=lambda n: (n.type, n.logical_ip, n.external_ip),
            )

        result: list[NatRule] = self._read(read)
        return result
