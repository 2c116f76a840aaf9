"""One-shot, read-only OVSDB queries over JSON-RPC (RFC 7047 `transact` with `select`).

`select(remote, db, table, columns)` connects to `remote` (`unix:PATH`, `tcp:HOST:PORT`,
`ssl:HOST:PORT`; a comma-separated list is tried in order until one answers), runs one select
of every row and returns the rows as dicts of plain Python values: strings, numbers and booleans
as they are, a `["uuid", u]` as `u`, a set as a list, a map as a dict (an empty optional column
becomes `[]`). Every socket operation is bounded by `timeout`; any failure raises
`OvsdbQueryError` with the remote and the reason. No IDL, no schema download, no writes: what the
`check --dataplane` audit needs from the Southbound and Open_vSwitch databases.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.errors import ControllerError


class OvsdbQueryError(ControllerError, RuntimeError):
    """A query could not be answered (connection, protocol or database error)."""


@dataclass(frozen=True, slots=True)
class SslFiles:
    private_key: str = ""
    certificate: str = ""
    ca_cert: str = ""


def _connect(remote: str, timeout: float, tls: SslFiles) -> socket.socket:
    scheme, _, rest = remote.partition(":")
    if scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(rest)
        return sock
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    if scheme not in ("tcp", "ssl") or not port.isdigit():
        raise OvsdbQueryError(f"{remote}: not unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT")
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    if scheme == "ssl":
        ctx = ssl.create_default_context(cafile=tls.ca_cert or None)
        ctx.check_hostname = False  # OVN certificates name the component, not the host
        if tls.certificate:
            ctx.load_cert_chain(tls.certificate, tls.private_key or None)
        sock = ctx.wrap_socket(sock)
    return sock


def _value(raw: Any) -> Any:
    if isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], str):
        kind, body = raw
        if kind == "uuid":
            return body
        if kind == "set":
            return [_value(v) for v in body]
        if kind == "map":
            return {_value(k): _value(v) for k, v in body}
    return raw


def _query(sock: socket.socket, request: dict[str, Any]) -> dict[str, Any]:
    sock.sendall(json.dumps(request).encode())
    decoder = json.JSONDecoder()
    buf = ""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise OvsdbQueryError("connection closed before the reply")
        buf += chunk.decode()
        while buf:
            try:
                msg, end = decoder.raw_decode(buf.lstrip())
            except json.JSONDecodeError:
                break  # incomplete: read more
            buf = buf.lstrip()[end:]
            if isinstance(msg, dict) and msg.get("id") == request["id"]:
                return msg
            if isinstance(msg, dict) and msg.get("method") == "echo":
                sock.sendall(
                    json.dumps({"id": msg.get("id"), "result": msg.get("params", [])}).encode()
                )


def select(
    remote: str,
    db: str,
    table: str,
    columns: Sequence[str],
    *,
    timeout: float = 10.0,
    tls: SslFiles | None = None,
) -> list[dict[str, Any]]:
    """Every row of `table` (only `columns`) from the first remote of `remote` that answers."""
    errors = []
    for one in [r.strip() for r in remote.split(",") if r.strip()]:
        request = {
            "id": 1,
            "method": "transact",
            "params": [db, {"op": "select", "table": table, "where": [], "columns": list(columns)}],
        }
        try:
            with _connect(one, timeout, tls or SslFiles()) as sock:
                reply = _query(sock, request)
        except (OSError, ValueError, OvsdbQueryError) as exc:
            errors.append(f"{one}: {exc}")
            continue
        if reply.get("error") is not None:
            errors.append(f"{one}: {reply['error']}")
            continue
        result = reply.get("result") or [{}]
        if not isinstance(result, list) or "error" in result[0]:
            errors.append(f"{one}: {result}")
            continue
        return [{k: _value(v) for k, v in row.items()} for row in result[0].get("rows", [])]
    raise OvsdbQueryError(f"cannot select {db}.{table}: {'; '.join(errors) or 'no remote'}")
