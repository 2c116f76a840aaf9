"""`OvsdbappNbClient`: the NbClient contract over one long-lived ovsdbapp IDL connection.

This module and its parts (connection.py: the IDL and its connection; idl_index.py: the
monitored tables and the row indexes; idl_context.py: the verb bodies run in the IDL thread;
idl_txn.py: the deadline transaction; idl_routing.py: the route, router policy, address set and
NAT verbs) are the only ones that talk to python-ovs / ovsdbapp. Guarantees:

* One verb = one OVSDB transaction (for the hot verbs of concurrent callers, a share of one:
  group commit, idl_group.py, results and errors kept per verb), composed of commands run in
  ovsdbapp's IDL thread, always with errors checked. Every failure surfaces as an `OvnError`
  subclass.
* Every call returns or raises within `--ovn-timeout`: one deadline covers queueing behind other
  transactions, waiting for a (re)connection and the commit itself. A transaction whose caller
  already gave up is not started.
* The connection is per client (ovsdbapp keeps it on the API *class*, so each client gets its
  own subclass) and reconnects by itself, to the Raft leader only.
* No verb scans a table: our own indexes, fed by IDL row notifications, map port names, pods,
  security groups, IPs, route prefixes and NAT addresses to rows; "is this row in that switch /
  router" is answered from the parent's raw set datum in O(1). Deleting a port is O(1), unlike
  ovsdbapp's `lsp_del` (which copies the switch's whole port list twice).
* Reads (`get_port`, `list_*`) come from the IDL cache under the connection lock; they serve the
  last known state while disconnected. Writes never commit against a stale cache: a verb waits
  (within the deadline) for the connection to be back and in sync first.
* The duplicate-address and port-elsewhere checks read the cache, which trails *other* writers
  by the notification latency (milliseconds); the client's own writes are visible on return.
* `on_request(method, seconds, ok)` is called after every verb (for a latency histogram).
* `start=False` builds the client (schema fetched) without connecting; `start()` then connects
  and waits for the initial dump, on whatever thread calls it; `synced` / `wait_synced` tell
  when it is in, `connected` is False until then (without waiting on the lock `start()` holds).
  No verb may be called before.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from ovsdbapp import exceptions as ovsdbapp_exc
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
from ovsdbapp.backend.ovs_idl import idlutils

from controller.core.constants import VENDOR
from controller.core.naming import pod_key
from controller.ovn import external_ids as ext
from controller.ovn import logic
from controller.ovn import security_groups as sgv
from controller.ovn.api import (
    InvalidRequestError,
    NbClient,
    OvnError,
    OvnNotFoundError,
    OvnTimeoutError,
    PortGroupInfo,
    PortInfo,
    PortSpec,
    SecurityGroupRows,
)
from controller.ovn.connection import NbConnectionConfig, NbIdl, build_idl, enable_c_json_parser
from controller.ovn.idl_context import (
    VerbContext,
    attach_router,
    create_port_rows,
    set_memberships,
    sync_sg,
)
from controller.ovn.idl_group import GroupCommitter
from controller.ovn.idl_index import MONITORED, NbIndex, Row, has_ref, text, text_map, texts
from controller.ovn.idl_routing import RoutingVerbs
from controller.ovn.idl_txn import NbApi, VerbCommand, idl_connected, release_sync_garbage
from controller.ovn.tables import LR, LRP, LS, LSP, PG

LOG = logging.getLogger(__name__)

SLOW_CALL_SECONDS = 0.5  # kube-ovn warns about NB calls slower than 500 ms
# The port types list_ports offers the gc and the audit: pod and node ports ("") and router ports.
_LISTED = frozenset({"", "router"})

RequestObserver = Callable[[str, float, bool], None]


class OvsdbappNbClient(RoutingVerbs):
    """NbClient over ovsdbapp (see the module docstring for the guarantees)."""

    def __init__(
        self,
        config: NbConnectionConfig,
        *,
        on_request: RequestObserver | None = None,
        c_json: bool = True,
        group_commit: bool = True,
        start: bool = True,
    ) -> None:
        """Fetch the schema and build the IDL; with `start` (the default) also connect and
        wait for the initial dump, else `start()` does that later (another thread may)."""
        if c_json:
            enable_c_json_parser()
        self._config = config
        self._on_request = on_request
        self._group_commit = group_commit
        idl: NbIdl = build_idl(config, MONITORED)
        self._idl = idl
        self._index = NbIndex(idl.tables)
        idl.row_notify = self._index.on_row
        idl.on_clear = self._index.reset
        self._conn = ovsdbapp_connection.Connection(idl=idl, timeout=config.timeout)
        self._group: GroupCommitter | None = None
        self._start_lock = threading.Lock()  # one start() at a time
        self._state_lock = threading.Lock()  # _starting, _closed, _synced
        self._starting = False
        self._closed = threading.Event()
        self._synced = threading.Event()
        if start:
            self.start()

    def start(self) -> None:
        """Connect and wait for the initial dump, within the timeout (OvnTimeoutError after
        it). Idempotent; after `close()` it does nothing. A `close()` while it waits takes
        effect when the dump is in: the connection is then stopped at once."""
        with self._start_lock:
            with self._state_lock:
                if self._synced.is_set() or self._closed.is_set():
                    return
                self._starting = True
            try:
                self._sync()
            finally:
                with self._state_lock:
                    self._starting = False
                    closed = self._closed.is_set()  # close() may have run meanwhile
                    if not closed and self._conn.is_running:
                        self._synced.set()
            if closed:
                self._stop_connection()

    def _sync(self) -> None:
        idl, config = self._idl, self._config
        # NOTE: ovsdbapp stores the connection on the API class; a subclass per client keeps
        # two clients (tests, Raft members) from silently sharing the first one's connection.
        api_cls = type("NbApi", (NbApi,), {"_ovsdb_connection": None})
        start = time.monotonic()
        try:
            self._api = api_cls(self._conn, start=True, auto_index=False)
        except ovsdbapp_exc.OvsdbConnectionUnavailable as e:
            idl.close()
            raise OvnTimeoutError(
                f"cannot connect to OVN NB {config.remote} within {config.timeout}s"
            ) from e
        # The hot verbs of concurrent workers share transactions (see idl_group.py).
        if self._group_commit:
            self._group = GroupCommitter(self._api, self._index, self._conn)
        release_sync_garbage()
        LOG.info(
            "connected to OVN NB %s, %d ports synced in %.3fs",
            config.remote,
            len(idl.tables[LSP].rows),
            time.monotonic() - start,
        )

    @property
    def synced(self) -> bool:
        """Has the initial dump been received (`start()` returned)?"""
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """`synced`, waiting up to `timeout` for it."""
        return self._synced.wait(timeout)

    @classmethod
    def from_addr(cls, addr: str, timeout: float = 60.0, **kwargs: Any) -> OvsdbappNbClient:
        """kube-ovn's --ovn-nb-addr / --ovn-timeout; ssl_* kwargs go to NbConnectionConfig."""
        on_request = kwargs.pop("on_request", None)
        c_json = kwargs.pop("c_json", True)
        group_commit = kwargs.pop("group_commit", True)
        start = kwargs.pop("start", True)
        config = NbConnectionConfig.from_addr(addr, timeout, **kwargs)
        return cls(
            config, on_request=on_request, c_json=c_json, group_commit=group_commit, start=start
        )

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        # NOTE: never waits on the connection lock. The initial dump holds it, and so does
        # every transaction while it waits, up to --ovn-timeout, for the server to come back:
        # the health probes ask this during an outage and must be answered at once. Two
        # attribute reads of the IDL's state give a snapshot that is good enough for them.
        if not self._synced.is_set():
            return False
        return idl_connected(self._idl)

    def close(self) -> None:
        """Stop the IDL thread; pending calls fail with OvnError. Idempotent."""
        with self._state_lock:
            self._closed.set()
            starting, synced = self._starting, self._synced.is_set()
        if starting:
            return  # start() stops the connection once the dump is in
        if not synced:
            self._idl.close()  # never started: only the session to close
            return
        self._stop_connection()

    def _stop_connection(self) -> None:
        conn = self._conn
        if not conn.is_running:
            return
        conn.is_running = False
        # NOTE: ovsdbapp's stop() does a blocking put(None) into a queue of size 1; if the IDL
        # thread has already left its loop with a transaction still queued, that never returns.
        while True:
            try:
                conn.txns.put(None, timeout=0.05)
                break
            except queue.Full:
                stale = conn.txns.get_nowait()
                if stale is not None:
                    with contextlib.suppress(queue.Full):
                        stale.results.put_nowait(
                            idlutils.ExceptionResult(ex=OvnError("OVN NB client closed"), tb="")
                        )
        conn.thread.join(self._config.timeout)
        if self._group is not None:
            self._group.fail_all(OvnError("OVN NB client closed"))
        if conn.thread.is_alive():
            LOG.warning("OVN NB connection thread did not stop")
        else:
            conn.thread = None

    def __enter__(self) -> OvsdbappNbClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------

    def _transact(
        self,
        method: str,
        fn: Callable[[VerbContext], Any],
        keys: frozenset[Hashable] | None = None,
    ) -> Any:
        """Run one verb; with `keys` (what it looks up through the indexes) it may share its
        transaction with other threads' verbs (group commit), else it gets its own."""
        if not self._conn.is_running:
            raise OvnError(f"{method}: OVN NB client is closed")
        start = time.monotonic()
        ok = False
        try:
            if keys is not None and self._group is not None:
                result = self._group.run(method, fn, keys, self._config.timeout)
                ok = True
                return result
            with self._api.transaction(check_error=True, log_errors=False) as txn:
                cmd = txn.add(VerbCommand(self._api, self._index, method, fn))
            ok = True
            return cmd.result
        except OvnError:
            raise
        except ovsdbapp_exc.TimeoutException as e:
            raise OvnTimeoutError(
                f"{method}: OVN NB timed out after {self._config.timeout}s"
            ) from e
        except idlutils.RowNotFound as e:
            raise OvnNotFoundError(f"{method}: {e}") from e
        except Exception as e:
            raise OvnError(f"{method}: {e}") from e
        finally:
            elapsed = time.monotonic() - start
            if elapsed > SLOW_CALL_SECONDS:
                LOG.warning("OVN NB %s took %.0f ms", method, elapsed * 1000)
            if self._on_request is not None:
                self._on_request(method, elapsed, ok)

    def _read(self, fn: Callable[[], Any]) -> Any:
        with self._conn.lock:
            return fn()

    # -- logical switch ports --------------------------------------------------------------

    def create_port(self, spec: PortSpec) -> None:
        self.create_ports([spec])

    def create_ports(self, specs: Sequence[PortSpec]) -> None:
        prepared = [(s, logic.port_columns(s)) for s in specs]
        if not prepared:
            return
        if len({s.name for s, _ in prepared}) != len(prepared):
            raise InvalidRequestError("the same port appears twice in one batch")

        def run(ctx: VerbContext) -> None:
            for spec, cols in prepared:
                create_port_rows(ctx, spec, cols)

        # Ports with security groups also sync port groups through the indexes: alone.
        keys = None
        if not any(cols.security_groups for _, cols in prepared):
            keys = frozenset(("port", s.name) for s, _ in prepared)
        self._transact("create_port" if len(prepared) == 1 else "create_ports", run, keys)

    def delete_port(self, name: str) -> None:
        self.delete_ports([name])

    def delete_ports(self, names: Sequence[str]) -> None:
        names = list(dict.fromkeys(names))
        if not names:
            return

        def run(ctx: VerbContext) -> None:
            for name in names:
                lsp = ctx.named(LSP, name)
                if lsp is not None:
                    ctx.delete(lsp, ctx.switch_of(lsp), "ports")

        keys = frozenset(("port", name) for name in names)
        self._transact("delete_port" if len(names) == 1 else "delete_ports", run, keys)

    def get_port(self, name: str) -> PortInfo | None:
        def read() -> PortInfo | None:
            lsp = self._index.first(LSP, ("name", name))
            return None if lsp is None else self._port_info(lsp)

        result: PortInfo | None = self._read(read)
        return result

    def _port_info(self, lsp: Row, switches: dict[str, Row | None] | None = None) -> PortInfo:
        # NOTE: list_ports reads every port (the gc, twice at start-up): committed datums are
        # read directly, Row.__getattr__ rebuilds a set column's datum on every access; the
        # switch named by each port is looked up once per listing (`switches`).
        ids = text_map(lsp, "external_ids")
        named = ids.get(ext.LS_KEY, "")
        if switches is None:
            ls = self._index.first(LS, ("name", named))
        elif named in switches:
            ls = switches[named]
        else:
            ls = switches[named] = self._index.first(LS, ("name", named))
        if ls is None or not has_ref(ls, "ports", lsp):
            ls = VerbContext(self._index, None).switch_of(lsp)
        return PortInfo(
            name=text(lsp, "name"),
            switch=text(ls, "name") if ls is not None else "",
            addresses=tuple(texts(lsp, "addresses")),
            port_security=tuple(texts(lsp, "port_security")),
            external_ids=ids,
            type=text(lsp, "type"),
        )

    def list_pod_ports(self, pod_name: str, pod_namespace: str) -> list[str]:
        key = ("pod", pod_key(pod_namespace, pod_name))
        names: list[str] = self._read(lambda: sorted(r.name for r in self._index.rows(LSP, key)))
        return names

    def list_ports(self, vendor: str = VENDOR) -> list[PortInfo]:
        def read() -> list[PortInfo]:
            # Pod, node and router ports only: a localnet (or vtep, l2gateway) port carries
            # kube-ovn's vendor too but wires a switch to the fabric; kube-ovn's own listing
            # (ListLogicalSwitchPort, type="") never offers it to the garbage collection.
            rows = [
                r for r in self._index.rows(LSP, ("vendor", vendor)) if text(r, "type") in _LISTED
            ]
            switches: dict[str, Row | None] = {}
            return sorted((self._port_info(r, switches) for r in rows), key=lambda p: p.name)

        result: list[PortInfo] = self._read(read)
        return result

    # -- security groups -------------------------------------------------------------------

    def create_sg_port_group(self, sg: str) -> None:
        logic.check_row_name(sg, "security group")
        self._transact("create_sg_port_group", lambda ctx: ctx.ensure_sg_port_group(sg) and None)

    def reconcile_port_sg(self, port: str, security_groups: Sequence[str]) -> list[str]:
        new = list(logic.check_sg_names(security_groups))

        def run(ctx: VerbContext) -> list[str]:
            lsp = ctx.named(LSP, port)
            if lsp is None:
                raise OvnNotFoundError(f"logical switch port {port} not found")
            change = logic.sg_change(lsp.external_ids, lsp.port_security, new)
            ctx.set_keys(lsp, "external_ids", change.external_ids)
            set_memberships(ctx, lsp, change.stale, change.groups)
            return change.changed

        changed: list[str] = self._transact("reconcile_port_sg", run)
        return changed

    def sync_sg_ports(self, sg: str) -> None:
        logic.check_row_name(sg, "security group")

        def run(ctx: VerbContext) -> None:
            if sg != ext.DENY_ALL_SG:
                sync_sg(ctx, sg)
            ctx.sync_deny_all()

        self._transact("sync_sg_ports", run)

    def list_sg_port_groups(self) -> list[PortGroupInfo]:
        def read() -> list[PortGroupInfo]:
            out = []
            for pg in self._idl.tables[PG].rows.values():
                ids = pg.external_ids
                if ids.get(ext.PG_TYPE_KEY) != ext.PG_TYPE_SECURITY_GROUP:
                    continue
                ports = tuple(sorted(p.name for p in pg.ports))
                out.append(PortGroupInfo(pg.name, ids.get(ext.PG_SG_KEY, ""), ports))
            return sorted(out, key=lambda g: g.name)

        result: list[PortGroupInfo] = self._read(read)
        return result

    def apply_security_group(
        self, sg: str, acls: Sequence[logic.AclSpec], remote_groups: Sequence[str] = ()
    ) -> None:
        wanted, remotes = sgv.check_apply(sg, acls, remote_groups)
        self._transact("apply_security_group", lambda c: sgv.idl_apply(c, sg, wanted, remotes))

    def delete_security_group(self, sg: str) -> None:
        sgv.check_group(sg)
        self._transact("delete_security_group", lambda ctx: sgv.idl_delete(ctx, sg))

    def list_security_groups(self) -> list[SecurityGroupRows]:
        rows: list[SecurityGroupRows] = self._read(lambda: sgv.idl_list(self._idl.tables))
        return rows

    # -- switches and routers --------------------------------------------------------------

    def ensure_logical_router(self, name: str) -> None:
        logic.check_row_name(name, "logical router")

        def run(ctx: VerbContext) -> None:
            if ctx.named(LR, name) is None:
                ctx.insert(LR, name=name, external_ids={ext.VENDOR_KEY: VENDOR})

        self._transact("ensure_logical_router", run)

    def ensure_logical_switch(
        self, name: str, router: str, cidr: str, gateway: str, external_ids: Mapping[str, str]
    ) -> None:
        logic.check_row_name(name, "logical switch")
        other = logic.switch_other_config(cidr, gateway)
        ids = {**dict(external_ids), ext.VENDOR_KEY: VENDOR}
        networks = logic.router_port_networks(cidr, gateway) if router else []

        def run(ctx: VerbContext) -> None:
            ls = ctx.named(LS, name)
            if ls is None:
                ls = ctx.insert(LS, name=name, external_ids=ids, other_config=other)
            else:
                ctx.set_keys(ls, "external_ids", ids)
                ctx.set_keys(ls, "other_config", other)
            if router:
                attach_router(ctx, ls, name, router, networks)

        self._transact("ensure_logical_switch", run)

    def delete_logical_switch(self, name: str) -> None:
        def run(ctx: VerbContext) -> None:
            ls = ctx.named(LS, name)
            if ls is None:
                return
            for lsp in ls.ports:
                if lsp.type != "router":
                    continue
                lrp = ctx.named(LRP, lsp.options.get("router-port", ""))
                if lrp is not None:
                    ctx.delete(lrp, ctx.router_of(lrp, "ports"), "ports")
            ls.delete()

        self._transact("delete_logical_switch", run)

    def list_logical_switches(self) -> list[str]:
        names: list[str] = self._read(
            lambda: sorted(r.name for r in self._idl.tables[LS].rows.values())
        )
        return names


def _conforms(client: OvsdbappNbClient) -> NbClient:
    """mypy proves here that the real client implements the whole NbClient contract."""
    return client
