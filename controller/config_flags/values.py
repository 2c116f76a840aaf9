"""The per-flag value checks of `controller.config.parse_args` (pure).

Each `check_*` / `parse_*` / `resolve_*` validates one flag (or one related group) and raises
`ConfigError` naming the flag; the semantics are documented in `controller.config`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from controller.config_flags.declarations import (
    COMMAND_CHECK,
    DEFAULT_NB_PORT,
    KLOG_DEBUG_VERBOSITY,
    KLOG_SEVERITIES,
    UNSUPPORTED,
)
from controller.core.address import IPNetwork, address_count, parse_cidr, parse_ip
from controller.core.errors import ConfigError


def check_supported(ns: argparse.Namespace) -> None:
    for flag, missing, instead in UNSUPPORTED:
        if getattr(ns, flag[2:].replace("-", "_")):
            raise ConfigError(f"{flag}=true: {missing}; {instead}")


def parse_stderr_threshold(value: str) -> str:
    text = value.strip().upper()
    if text.isdigit() and int(text) < len(KLOG_SEVERITIES):
        return KLOG_SEVERITIES[int(text)]
    if text in KLOG_SEVERITIES:
        return text
    raise ConfigError(f"--stderrthreshold: {value!r} is not INFO, WARNING, ERROR, FATAL or 0..3")


def resolve_log_level(ns: argparse.Namespace) -> str:
    if ns.log_level is not None:
        return str(ns.log_level)
    if ns.v is not None and ns.v >= KLOG_DEBUG_VERBOSITY:
        return "debug"
    return "info"


def parse_networks(flag: str, value: str) -> list[IPNetwork]:
    """One or two CIDRs (v4, or v6, or "v4,v6"), normalised to their network address."""
    parts = value.split(",")
    if not value or len(parts) > 2:
        raise ConfigError(f"{flag}: expected a CIDR or an 'IPv4,IPv6' CIDR pair, got {value!r}")
    networks = []
    for part in parts:
        parsed = parse_cidr(part.strip())
        if parsed is None:
            raise ConfigError(f"{flag}: {part!r} is not a valid CIDR")
        network = parsed[1]
        if address_count(network) < 2:
            raise ConfigError(f"{flag}: {part!r} is too small for a gateway and one pod")
        networks.append(network)
    if len(networks) == 2 and not (networks[0].version == 4 and networks[1].version == 6):
        raise ConfigError(f"{flag}: a dual stack value must be 'IPv4,IPv6', got {value!r}")
    return networks


def parse_gateway(flag: str, value: str, networks: list[IPNetwork], cidr_flag: str) -> str:
    if not value:
        return ",".join(str(n.network_address + 1) for n in networks)
    parts = value.split(",")
    if len(parts) != len(networks):
        raise ConfigError(
            f"{flag}: {value!r} must have one address per {cidr_flag} block "
            f"({','.join(map(str, networks))})"
        )
    for part, network in zip(parts, networks, strict=True):
        ip = parse_ip(part.strip())
        if ip is None:
            raise ConfigError(f"{flag}: {part!r} is not a valid IP address")
        if ip.version != network.version:
            raise ConfigError(
                f"{flag}: {part} is IPv{ip.version} but {network} is IPv{network.version}"
            )
        if ip not in network:
            raise ConfigError(f"{flag}: {part} is not in {cidr_flag} {network}")
        if ip in (network.network_address, network.broadcast_address):
            raise ConfigError(f"{flag}: {part} is the network or broadcast address of {network}")
    return ",".join(p.strip() for p in parts)


def parse_exclude_ips(value: str, gateway: str) -> tuple[str, ...]:
    if not value:
        return tuple(gateway.split(","))
    out = []
    for item in value.split(","):
        item = item.strip()  # noqa: PLW2901
        if not item:
            raise ConfigError(f"--default-exclude-ips: empty element in {value!r}")
        ends = item.split("..")
        if len(ends) > 2:
            raise ConfigError(f"--default-exclude-ips: {item!r} is not an IP or an a..b range")
        parsed = [parse_ip(e) for e in ends]
        if any(ip is None for ip in parsed):
            raise ConfigError(f"--default-exclude-ips: {item!r} is not an IP or an a..b range")
        if len(parsed) == 2:
            start, end = parsed
            assert start is not None and end is not None
            if start.version != end.version:
                raise ConfigError(f"--default-exclude-ips: {item!r} mixes IPv4 and IPv6")
            if int(start) > int(end):
                raise ConfigError(f"--default-exclude-ips: {item!r} has its start after its end")
        out.append(item)
    return tuple(out)


def resolve_nb_addr(value: str, environ: Mapping[str, str]) -> str:
    ssl = environ.get("ENABLE_SSL", "").lower() == "true"
    if not value:
        scheme = "ssl" if ssl else "tcp"
        db_ips = [ip.strip() for ip in environ.get("OVN_DB_IPS", "").split(",") if ip.strip()]
        if db_ips:
            value = ",".join(f"{scheme}:[{ip}]:{DEFAULT_NB_PORT}" for ip in db_ips)
        elif environ.get("OVN_NB_SERVICE_HOST"):
            port = environ.get("OVN_NB_SERVICE_PORT") or str(DEFAULT_NB_PORT)
            value = f"{scheme}:[{environ['OVN_NB_SERVICE_HOST']}]:{port}"
        else:
            raise ConfigError("--ovn-nb-addr is required (or set OVN_DB_IPS / OVN_NB_SERVICE_HOST)")
    for remote in value.split(","):
        check_remote(remote.strip())
    return ",".join(r.strip() for r in value.split(","))


def check_remote(remote: str, flag: str = "--ovn-nb-addr") -> None:
    scheme, sep, rest = remote.partition(":")
    if not sep or not rest:
        raise ConfigError(f"{flag}: {remote!r} is not tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH")
    if scheme == "unix":
        return
    if scheme not in ("tcp", "ssl"):
        raise ConfigError(f"{flag}: unsupported scheme {scheme!r} in {remote!r}")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{flag}: {remote!r} needs a port in 1..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or (":" in host and parse_ip(host) is None):
        raise ConfigError(f"{flag}: {remote!r} has an invalid host")


def check_dataplane_remotes(ns: argparse.Namespace) -> None:
    # --ovn-sb-addr is in kube-ovn's controller args, so only the check-only flags are refused
    if (ns.dataplane or ns.ovs_db) and ns.command != COMMAND_CHECK:
        raise ConfigError("--dataplane and --ovs-db only apply to check")
    if ns.ovs_db and not ns.dataplane:
        raise ConfigError("--ovs-db needs --dataplane")
    if ns.dataplane and not ns.ovn_sb_addr:
        raise ConfigError("check --dataplane needs --ovn-sb-addr")
    for flag, value in (("--ovn-sb-addr", ns.ovn_sb_addr), ("--ovs-db", ns.ovs_db)):
        for remote in value.split(",") if value else ():
            check_remote(remote.strip(), flag)


def check_positive(flag: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"{flag} must be > 0, got {value:g}")
