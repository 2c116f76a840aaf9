"""The `kube-ovn` CNI plugin stand-in: what a container runtime execs (CNI spec 1.0).

`python -m controller.sandbox.ovn.cni_plugin` (or the `kube-ovn` executable cni_install.py
writes into a CNI bin dir) implements ADD, DEL, CHECK and VERSION. Like kube-ovn v1.8.18's
plugin (cmd/cni/cni.go) it is thin: it reads the network configuration from stdin and the
CNI_* variables from the environment, POSTs a request to the node's daemon (cni_daemon.py) on
the config's `server_socket` over HTTP on a unix socket (pkg/request/cniserver.go lines 51-82:
`/api/v1/add`, `/api/v1/del`; `/api/v1/check` is this stand-in's own) and turns the answer into
the spec's result on stdout. Only the standard library is imported: containerd execs it for
every sandbox, with a minimal environment.

* Config (cni.go lines 153-189): `server_socket` is required (code 7 without it); `provider`
  defaults to `ovn`; a config whose `type` is not `kube-ovn` takes both from its `ipam` section
  (kube-ovn as the IPAM plugin of another CNI). `cniVersion` must be one of
  `SUPPORTED_VERSIONS` (code 1).
* Environment: CNI_COMMAND; CNI_CONTAINERID, CNI_IFNAME, CNI_PATH for ADD/DEL/CHECK, CNI_NETNS
  for ADD/CHECK; CNI_ARGS must carry K8S_POD_NAMESPACE and K8S_POD_NAME (cni.go lines 191-206);
  anything missing is code 4.
* ADD prints `cniVersion`, `interfaces` (the pod's interface, its MAC and sandbox), `ips` (the
  address with its subnet's prefix and, on eth0, the gateway), `routes` (the default route(s)
  via the gateway(s) on eth0, cni.go lines 70-120) and `dns` (empty). DEL prints nothing; CHECK
  prints nothing when the interface is as the annotations say.
* Errors are the spec's JSON error on stdout with a non-zero exit: 1 incompatible version,
  4 bad environment, 6 undecodable config, 7 invalid config, 5 daemon unreachable, 11 (try again
  later) when the controller has not annotated the pod within the daemon's deadline, 999 (the
  CNI library's ErrInternal, what kube-ovn's plugin returns) for any other refusal.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import os
import socket
import sys
from collections.abc import Mapping
from typing import IO, Any

SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0")
CNI_TYPE = "kube-ovn"
OVN_PROVIDER = "ovn"
TIMEOUT = 240.0  # the daemon waits up to 20 s for annotations and 20 s for the port to bind

# the spec's well-known error codes
INCOMPATIBLE_VERSION = 1
INVALID_ENVIRONMENT = 4
IO_FAILURE = 5
DECODING_FAILURE = 6
INVALID_CONFIG = 7
TRY_AGAIN_LATER = 11
INTERNAL = 999


class CniError(Exception):
    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def post(socket_path: str, route: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST `body` to the daemon; its status and JSON answer ({} when it has none)."""
    conn = _UnixHTTPConnection(socket_path, TIMEOUT)
    try:
        data = json.dumps(body).encode()
        conn.request("POST", route, data, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
    except OSError as exc:
        raise CniError(IO_FAILURE, f"cannot reach the CNI daemon at {socket_path}: {exc}") from None
    finally:
        conn.close()
    try:
        answer = json.loads(raw) if raw else {}
    except ValueError:
        answer = {"error": raw.decode(errors="replace")}
    return resp.status, answer if isinstance(answer, dict) else {}


def load_config(stdin: bytes) -> dict[str, Any]:
    try:
        conf = json.loads(stdin)
    except ValueError as exc:
        raise CniError(DECODING_FAILURE, "failed to load netconf", str(exc)) from None
    if not isinstance(conf, dict):
        raise CniError(DECODING_FAILURE, "failed to load netconf", "not a JSON object")
    version = str(conf.get("cniVersion") or "")
    if version not in SUPPORTED_VERSIONS:
        raise CniError(
            INCOMPATIBLE_VERSION,
            f"incompatible CNI versions: config is {version!r}",
            f"supported: {', '.join(SUPPORTED_VERSIONS)}",
        )
    ipam = conf.get("ipam")
    if conf.get("type") != CNI_TYPE and isinstance(ipam, dict):
        conf["provider"] = ipam.get("provider")
        conf["server_socket"] = ipam.get("server_socket")
    if not conf.get("server_socket"):
        raise CniError(INVALID_CONFIG, "server_socket is required in cni.conf")
    conf["provider"] = str(conf.get("provider") or OVN_PROVIDER)
    return conf


def _env(env: Mapping[str, str], key: str) -> str:
    value = env.get(key, "")
    if not value:
        raise CniError(INVALID_ENVIRONMENT, f"{key} is required")
    return value


def parse_args(cni_args: str, key: str) -> str:
    for arg in cni_args.split(";"):
        name, _, value = arg.partition("=")
        if name == key and value:
            return value
    raise CniError(INVALID_ENVIRONMENT, f"{key} is required in CNI_ARGS")


def build_result(version: str, answer: Mapping[str, Any], netns: str) -> dict[str, Any]:
    """The spec's ADD result from the daemon's answer (kube-ovn's CniResponse)."""
    ips = [p for p in str(answer.get("address") or "").split(",") if p]
    cidrs = [p for p in str(answer.get("cidr") or "").split(",") if p]
    gws = [p for p in str(answer.get("gateway") or "").split(",") if p]
    result_ips: list[dict[str, Any]] = []
    routes: list[dict[str, str]] = []
    for ip_text, cidr in zip(ips, cidrs, strict=False):
        addr = ipaddress.ip_address(ip_text)
        net = ipaddress.ip_network(cidr, strict=False)
        entry: dict[str, Any] = {"address": f"{addr}/{net.prefixlen}", "interface": 0}
        gw = next((g for g in gws if ipaddress.ip_address(g).version == addr.version), "")
        if gw:
            entry["gateway"] = gw
            routes.append({"dst": "0.0.0.0/0" if addr.version == 4 else "::/0", "gw": gw})
        if not version.startswith("1."):
            entry["version"] = str(addr.version)  # 0.3.x and 0.4.0 name the family
        result_ips.append(entry)
    iface = {"name": str(answer.get("nicname") or ""), "mac": str(answer.get("mac_address") or "")}
    iface["sandbox"] = netns
    return {
        "cniVersion": version,
        "interfaces": [iface],
        "ips": result_ips,
        "routes": routes,
        "dns": {},
    }


def run(command: str, env: Mapping[str, str], stdin: bytes) -> dict[str, Any] | None:
    """Carry out one CNI command; the result to print (None for none); `CniError` on failure."""
    if command == "VERSION":
        return {"cniVersion": "1.0.0", "supportedVersions": list(SUPPORTED_VERSIONS)}
    if command not in ("ADD", "DEL", "CHECK"):
        raise CniError(INVALID_ENVIRONMENT, f"unknown CNI_COMMAND {command!r}")
    conf = load_config(stdin)
    request = {
        "cni_type": str(conf.get("type") or ""),
        "container_id": _env(env, "CNI_CONTAINERID"),
        "if_name": _env(env, "CNI_IFNAME"),
        "net_ns": env.get("CNI_NETNS", ""),
        "provider": conf["provider"],
    }
    _env(env, "CNI_PATH")
    if command != "DEL":
        _env(env, "CNI_NETNS")
    cni_args = _env(env, "CNI_ARGS")
    request["pod_name"] = parse_args(cni_args, "K8S_POD_NAME")
    request["pod_namespace"] = parse_args(cni_args, "K8S_POD_NAMESPACE")
    route = {"ADD": "/api/v1/add", "DEL": "/api/v1/del", "CHECK": "/api/v1/check"}[command]
    status, answer = post(str(conf["server_socket"]), route, request)
    if status >= 300:
        code = int(answer.get("cni_code") or INTERNAL)
        what = {"ADD": "request ip", "DEL": "delete ip", "CHECK": "check"}[command]
        raise CniError(code, f"{what} return {status} {answer.get('error', '')}".strip())
    if command == "ADD":
        return build_result(str(conf["cniVersion"]), answer, request["net_ns"])
    return None


def main(
    env: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    env = os.environ if env is None else env
    out = sys.stdout if stdout is None else stdout
    command = env.get("CNI_COMMAND", "")
    data = b"" if command == "VERSION" else (stdin or sys.stdin.buffer).read()
    try:
        if not command:
            raise CniError(INVALID_ENVIRONMENT, "CNI_COMMAND is required")
        result = run(command, env, data)
    except CniError as exc:
        version = "1.0.0"
        with contextlib.suppress(ValueError, AttributeError):
            version = str(json.loads(data).get("cniVersion") or version)
        error = {"cniVersion": version, "code": exc.code, "msg": exc.msg}
        if exc.details:
            error["details"] = exc.details
        json.dump(error, out)
        out.write("\n")
        return 1
    if result is not None:
        json.dump(result, out)
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
