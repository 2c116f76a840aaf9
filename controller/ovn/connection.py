"""Connection settings and IDL construction for OVN_Northbound (python-ovs / ovsdbapp level).

Contract:

* `parse_remotes(addr)` validates kube-ovn's `--ovn-nb-addr`: one or more comma-separated
  `tcp:HOST:PORT`, `ssl:HOST:PORT` or `unix:PATH` remotes (IPv6 hosts in brackets). Bad input
  raises `ValueError` naming the offending remote.
* `NbConnectionConfig` carries the remotes, `--ovn-timeout` and the ssl key/cert/CA flags; ssl
  remotes without all three files are refused up front.
* `build_idl(config, tables)` fetches the server schema (bounded by the timeout), registers only
  the given tables and columns, and returns an IDL that connects to the Raft *leader only*,
  reconnects by itself with a short backoff, and never yields the CPU per row (no eventlet here).
  Its rows hold what python-ovs's own Idl would hold; inserts are built by NbIdl itself and
  datums parsed by `controller.ovn.datum` (the initial dump of 20,000 ports: 2.2 -> 1.5 s).
* `use_stdlib_logging()` routes python-ovs's vlog into stdlib logging;
  `enable_c_json_parser()` switches python-ovs to Debian's C JSON parser when it is installed.

This module and impl_idl.py (with its idl_*.py parts) are the only ones that import python-ovs /
ovsdbapp.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import ipaddress
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ovs
import ovs.json as ovs_json
from ovs import stream as ovs_stream
from ovs.db import custom_index as ovs_custom_index
from ovs.db import error as ovs_error
from ovs.db import idl as ovs_idl
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
from ovsdbapp.backend.ovs_idl import idlutils, vlog

from controller.ovn.api import OvnError, OvnTimeoutError
from controller.ovn.datum import Atom, Datum, datum_from_json

LOG = logging.getLogger(__name__)

NB_DB = "OVN_Northbound"

# Debian's python3-openvswitch ships the C parser; the PyPI sdist usually builds without it.
_C_JSON_DIRS = (Path("/usr/lib/python3/dist-packages/ovs"),)

# Reconnect backoff (ms). python-ovs defaults to 1 s doubling up to 8 s; a restarted or
# re-elected NB must be picked up well within --ovn-timeout.
MIN_BACKOFF_MS = 200
MAX_BACKOFF_MS = 2000


@dataclass(frozen=True, slots=True)
class NbConnectionConfig:
    """Everything needed to reach OVN_Northbound (kube-ovn's --ovn-nb-addr and --ovn-timeout)."""

    remotes: tuple[str, ...]
    timeout: float = 60.0
    ssl_private_key: str | None = None
    ssl_certificate: str | None = None
    ssl_ca_cert: str | None = None
    leader_only: bool = True
    # Inactivity probe for tcp/ssl (ms); None keeps python-ovs's default (5 s).
    probe_interval_ms: int | None = None

    def __post_init__(self) -> None:
        if not self.remotes:
            raise ValueError("no OVN NB remote given (--ovn-nb-addr)")
        if not self.timeout > 0:
            raise ValueError(f"--ovn-timeout must be positive, not {self.timeout}")
        if any(r.startswith("ssl:") for r in self.remotes):
            missing = [
                flag
                for flag, value in (
                    ("private key", self.ssl_private_key),
                    ("certificate", self.ssl_certificate),
                    ("CA certificate", self.ssl_ca_cert),
                )
                if not value
            ]
            if missing:
                raise ValueError(f"ssl remote needs the {', '.join(missing)} file(s)")

    @classmethod
    def from_addr(cls, addr: str, timeout: float = 60.0, **kwargs: Any) -> NbConnectionConfig:
        return cls(remotes=parse_remotes(addr), timeout=timeout, **kwargs)

    @property
    def remote(self) -> str:
        """The comma-joined form python-ovs takes."""
        return ",".join(self.remotes)


def _check_host_port(remote: str, rest: str) -> None:
    if rest.startswith("["):
        host, sep, port = rest[1:].partition("]:")
        if not sep:
            raise ValueError(f"bad OVN NB remote {remote!r}: expected [IP]:PORT")
        # kube-ovn's start script brackets every address, IPv4 included ("tcp:[10.0.0.1]:6641"),
        # and python-ovs accepts that form, so both families are fine inside brackets.
        try:
            ipaddress.ip_address(host)
        except ValueError as e:
            raise ValueError(f"bad OVN NB remote {remote!r}: {e}") from None
    else:
        host, sep, port = rest.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValueError(f"bad OVN NB remote {remote!r}: expected HOST:PORT")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad OVN NB remote {remote!r}: port must be 1-65535")


def parse_remotes(addr: str) -> tuple[str, ...]:
    """Split and validate a comma-separated --ovn-nb-addr."""
    remotes = tuple(r.strip() for r in addr.split(",") if r.strip())
    if not remotes:
        raise ValueError("no OVN NB remote given (--ovn-nb-addr)")
    for r in remotes:
        kind, sep, rest = r.partition(":")
        if not sep or not rest:
            raise ValueError(f"bad OVN NB remote {r!r}: expected tcp:, ssl: or unix:")
        if kind in ("tcp", "ssl"):
            _check_host_port(r, rest)
        elif kind != "unix":
            raise ValueError(f"bad OVN NB remote {r!r}: unsupported scheme {kind!r}")
    return remotes


_logging_lock = threading.Lock()


def use_stdlib_logging() -> None:
    """Send python-ovs vlog output (reconnects, parse errors, bad datums) to stdlib logging."""
    with _logging_lock:
        if not vlog.is_patched(vlog.CRITICAL):
            vlog.use_python_logger()


def enable_c_json_parser(dirs: Sequence[Path] = _C_JSON_DIRS) -> bool:
    """Use python-ovs's C JSON parser if the installed ovs has it or Debian's is compatible.

    The pure-Python parser dominates IDL sync time (about 60% of a 10k-port initial dump). The
    PyPI ovs sdist builds without its C extension on Debian, but python3-openvswitch ships one for
    the system Python; it is ABI-compatible when the interpreter's extension suffix matches.
    """
    if ovs_json.PARSER == ovs_json.PARSER_C:
        return True
    for d in dirs:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = d / f"_json{suffix}"
            if not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location("ovs._json", path)
            if spec is None or spec.loader is None:
                continue
            try:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except (ImportError, OSError) as e:
                LOG.info("C JSON parser at %s unusable: %s", path, e)
                continue
            sys.modules["ovs._json"] = module
            ovs._json = module
            # ovs.json binds the name `ovs` only when its own `import ovs._json` succeeded.
            ovs_json.ovs = ovs
            ovs_json.PARSER = ovs_json.PARSER_C
            LOG.info("python-ovs uses the C JSON parser from %s", path)
            return True
    return False


def json_parser() -> str:
    return str(ovs_json.PARSER)


def configure_ssl(config: NbConnectionConfig) -> None:
    """python-ovs keeps ssl files process-wide (class attributes of Stream)."""
    if config.ssl_private_key:
        ovs_stream.Stream.ssl_set_private_key_file(config.ssl_private_key)
    if config.ssl_certificate:
        ovs_stream.Stream.ssl_set_certificate_file(config.ssl_certificate)
    if config.ssl_ca_cert:
        ovs_stream.Stream.ssl_set_ca_cert_file(config.ssl_ca_cert)


def fetch_schema_helper(config: NbConnectionConfig) -> ovs_idl.SchemaHelper:
    """get_schema from the first remote that answers, within the configured timeout."""
    result: list[Any] = []

    def fetch() -> None:
        try:
            result.append(idlutils.get_schema_helper(config.remote, NB_DB))
        except Exception as e:
            result.append(e)

    # NOTE: python-ovs's blocking open/transact have no timeout; a thread bounds them.
    t = threading.Thread(target=fetch, name="ovn-nb-schema", daemon=True)
    t.start()
    t.join(config.timeout)
    if not result:
        raise OvnTimeoutError(f"no OVN NB schema from {config.remote} within {config.timeout}s")
    if isinstance(result[0], Exception):
        raise OvnError(f"cannot fetch OVN NB schema from {config.remote}: {result[0]}")
    helper: ovs_idl.SchemaHelper = result[0]
    return helper


# Sets bigger than this are diffed in place (see NbIdl._Idl__apply_diff).
_BIG_SET = 64

RowNotify = Callable[[str, Any, Any], None]


class NbIdl(ovsdbapp_connection.OvsdbIdl):  # type: ignore[misc]
    """IDL with a row-change hook for our own indexes and no per-row `time.sleep(0)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.row_notify: RowNotify | None = None
        self.on_clear: Callable[[], None] | None = None
        self._plans: dict[str, tuple[Any, Any]] = {}

    def cooperative_yield(self) -> None:
        # NOTE: ovsdbapp sleeps 0 s per row for eventlet; that costs ~0.1 ms per row here.
        return

    def notify(self, event: str, row: Any, updates: Any = None) -> None:
        if self.row_notify is not None:
            self.row_notify(event, row, updates)

    def _Idl__apply_diff(self, table: Any, row: Any, row_diff: Mapping[str, Any]) -> dict[str, Any]:
        # NOTE: python-ovs copies a set column before applying each diff (so that `updates`
        # can carry the old value) and then compares old and new: O(ports on the switch) per
        # port add/delete. We never read the old value of a big set, so big sets are updated
        # in place and left out of `updates`; everything else behaves as upstream.
        old_row: dict[str, Any] = {}
        for column_name, datum_diff_json in row_diff.items():
            column = table.columns.get(column_name)
            if not column:
                LOG.warning("unknown column %s updating table %s", column_name, table.name)
                continue
            try:
                datum_diff = datum_from_json(column.type, datum_diff_json)
            except ovs_error.Error as e:
                LOG.warning("error parsing column %s in table %s: %s", column_name, table.name, e)
                continue
            # An absent column reads as a fresh default datum (ColumnDefaultDict): big sets are
            # always stored, so the in-place path only ever sees a stored datum.
            if column.type.is_set() and len(row._data[column_name].values) > _BIG_SET:
                row._data[column_name].diff(datum_diff)
                continue
            old_row[column_name] = row._data[column_name].copy()
            datum = row._data[column_name].diff(datum_diff)
            if datum != row._data[column_name]:
                row._data[column_name] = datum
        return old_row

    def _Idl__process_update2(self, table: Any, uuid: Any, row_update: Mapping[str, Any]) -> Any:
        # NOTE: python-ovs builds a row from an insert by adding the JSON of a default for each
        # absent scalar column, then comparing every parsed datum with a default datum made per
        # column per row; an insert of a row we do not hold is built here directly to the same
        # result. Everything else goes upstream.
        new = row_update.get("initial")
        if new is None:
            new = row_update.get("insert")
        if new is None or uuid in table.rows or not isinstance(new, dict):
            return super()._Idl__process_update2(table, uuid, row_update)
        row = ovs_idl.Row(self, table, uuid, ovs_idl.ColumnDefaultDict(table))
        stored = row._data
        changed = False
        columns, scalars = self._insert_plan(table)
        for column_name, datum_json in new.items():
            found = columns.get(column_name)
            if found is None:
                LOG.warning("unknown column %s updating table %s", column_name, table.name)
                continue
            column, type_, scalar = found
            try:
                datum = datum_from_json(type_, datum_json)
            except ovs_error.Error as e:
                LOG.warning("error parsing column %s in table %s: %s", column_name, table.name, e)
                continue
            # python-ovs's default datum of a column with at least one member never equals a
            # parsed one (its atom wraps another atom), so such columns are always stored;
            # an empty set or map is the default and is left out.
            if scalar or datum.values:
                stored[column_name] = datum
                changed = changed or column.alert
        for column_name, column, type_, kind in scalars:
            if column_name not in new:
                stored[column_name] = Datum(type_, {Atom(kind, kind.default): None})
                changed = changed or column.alert
        rows = table.rows
        if type(rows) is ovs_custom_index.IndexedRows and not rows.indexes and _lists(rows.data):
            # NOTE: IndexedRows keeps a list per key and learns that a key is new from a
            # KeyError, a dear step per insert; the key is known to be new here.
            rows.data[uuid] = [row]
        else:
            rows[uuid] = row
        return ovs_idl.Notice(ovs_idl.ROW_CREATE, row) if changed else False

    def _insert_plan(self, table: Any) -> tuple[dict[str, Any], list[tuple[str, Any, Any, Any]]]:
        """Per table, made once: column name -> (column, type, has a member at least), and
        the columns python-ovs fills with their default when an insert leaves them out (at
        least one member, not a map, not read-only) with their atom type."""
        cached = self._plans.get(table.name)
        if cached is None or cached[0] is not table:
            readonly = self.readonly.get(table.name, ())
            columns: dict[str, Any] = {}
            scalars: list[tuple[str, Any, Any, Any]] = []
            for name, column in table.columns.items():
                type_ = column.type  # IdlColumn forwards attributes through __getattr__
                columns[name] = (column, type_, type_.n_min != 0)
                if type_.n_min != 0 and not type_.is_map() and name not in readonly:
                    scalars.append((name, column, type_, type_.key.type))
            cached = (table, (columns, scalars))
            self._plans[table.name] = cached
        return cached[1]

    def _Idl__clear(self) -> None:
        # NOTE: python-ovs empties the cache without per-row notifications before a full
        # re-dump (reconnect to a server that lost our history); indexes must start over too.
        super()._Idl__clear()
        if self.on_clear is not None:
            self.on_clear()


def build_idl(config: NbConnectionConfig, tables: Mapping[str, Sequence[str]]) -> NbIdl:
    """An NbIdl monitoring only `tables` (table -> columns), leader-only, fast reconnect."""
    use_stdlib_logging()
    configure_ssl(config)
    helper = fetch_schema_helper(config)
    schema_tables = helper.schema_json["tables"]
    for table, columns in tables.items():
        if table not in schema_tables:
            raise OvnError(f"OVN NB schema on {config.remote} has no table {table}")
        known = schema_tables[table]["columns"]
        present = [c for c in columns if c in known]
        if len(present) != len(columns):
            LOG.warning("OVN NB schema lacks %s.%s", table, sorted(set(columns) - set(present)))
        helper.register_columns(table, present)
    idl = NbIdl(
        config.remote,
        helper,
        probe_interval=config.probe_interval_ms,
        leader_only=config.leader_only,
    )
    # NOTE: no public setter; python-ovs exposes the session's Reconnect FSM only as _session.
    session = getattr(idl, "_session", None)
    if session is not None:
        session.reconnect.set_backoff(MIN_BACKOFF_MS, MAX_BACKOFF_MS)
    return idl


def _lists(data: dict[Any, Any]) -> bool:
    """Does this IndexedRows store a list per key (python-ovs 4; 3.x stores the row itself)?
    Read from a stored value, so the first insert into a table takes the generic path."""
    for value in data.values():
        return type(value) is list
    return False
