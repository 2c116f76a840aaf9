"""Command line and environment -> one validated, frozen `Config` (pure: no I/O).

`parse_args(argv, environ)` is the only entry point; `build_parser()` exists for `--help`. Flag
names and defaults are kube-ovn v1.8's (`pkg/controller/config.go`) where kube-ovn has the flag,
plus ours (metrics, logging, leader-election timings of kube-ovn >= 1.12, intervals, the switches
of the built-in minimal subnet / namespace / node controllers).

Booleans accept Go's forms: bare `--flag`, `--flag=true|false` (also 1/0/t/f, any case). As with
Go's flag package a bare boolean never consumes the next word. `--no-<flag>` is not accepted.

Derived defaults, as kube-ovn: `--default-gateway` = first address of each `--default-cidr`
block, `--default-exclude-ips` = that gateway, `--node-switch-gateway` likewise. When
`--ovn-nb-addr` is empty it is built from the environment the way `start-controller.sh` does:
`OVN_DB_IPS` (comma list -> `tcp:[ip]:6641,...`, `ssl:` when `ENABLE_SSL=true`), else
`OVN_NB_SERVICE_HOST`/`OVN_NB_SERVICE_PORT`.

Environment (downward API only): `POD_NAME` (leader-election identity, falling back to
`HOSTNAME`), `KUBE_NAMESPACE` (lease namespace, default `kube-system`), `KUBE_NODE_NAME` (the
`source.host` of recorded Events, kube-ovn's variable; empty when unset), `ENABLE_SSL`,
`OVN_DB_IPS`, `OVN_NB_SERVICE_HOST`, `OVN_NB_SERVICE_PORT`.

`--strict` belongs to the `check` command (pending pods fail the audit); with `run` it is an error.

Every invalid value raises `ConfigError` with a message naming the flag; argparse's own errors
(unknown flag, missing value, bad int) are wrapped in it too, so `main` can print and exit 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from controller.core.address import IPNetwork, address_count, parse_cidr, parse_ip
from controller.core.constants import (
    DEFAULT_CIDR,
    DEFAULT_CLUSTER_ROUTER,
    DEFAULT_CONTROLLER_NAMESPACE,
    DEFAULT_LOGICAL_SWITCH,
    DEFAULT_NODE_SWITCH,
    DEFAULT_NODE_SWITCH_CIDR,
    LEADER_ELECTION_LOCK_NAME,
    NETWORK_TYPE_GENEVE,
    NETWORK_TYPE_VLAN,
    NETWORK_TYPES,
    POD_NIC_TYPES,
    POD_NIC_VETH_PAIR,
)
from controller.core.errors import ConfigError

COMMAND_RUN = "run"
COMMAND_CHECK = "check"
COMMANDS = (COMMAND_RUN, COMMAND_CHECK)
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
DEFAULT_NB_PORT = 6641
DEFAULT_SSL_KEY = "/var/run/tls/key"
DEFAULT_SSL_CERT = "/var/run/tls/cert"
DEFAULT_SSL_CA = "/var/run/tls/cacert"
#: client-go leaderelection's JitterFactor: RenewDeadline must exceed it times RetryPeriod.
LEADER_ELECTION_JITTER = 1.2


@dataclass(frozen=True, slots=True)
class Config:
    """Everything the controller is configured with; built only by `parse_args`."""

    command: str = COMMAND_RUN
    kubeconfig: str = ""
    # OVN Northbound
    ovn_nb_addr: str = ""
    ovn_timeout: int = 60
    ovn_nb_ssl_key: str = ""
    ovn_nb_ssl_cert: str = ""
    ovn_nb_ssl_ca: str = ""
    # networks
    default_logical_switch: str = DEFAULT_LOGICAL_SWITCH
    default_cidr: str = DEFAULT_CIDR
    default_gateway: str = "10.16.0.1"
    default_exclude_ips: tuple[str, ...] = ("10.16.0.1",)
    cluster_router: str = DEFAULT_CLUSTER_ROUTER
    node_switch: str = DEFAULT_NODE_SWITCH
    node_switch_cidr: str = DEFAULT_NODE_SWITCH_CIDR
    node_switch_gateway: str = "100.64.0.1"
    network_type: str = NETWORK_TYPE_GENEVE
    default_provider_name: str = "provider"
    default_interface_name: str = ""
    default_vlan_name: str = "ovn-vlan"
    default_vlan_id: int = 1
    pod_nic_type: str = POD_NIC_VETH_PAIR
    enable_eip_snat: bool = True
    enable_keep_vm_ip: bool = False
    # the built-in minimal subnet / namespace / node controllers
    enable_subnet_controller: bool = True
    enable_namespace_controller: bool = True
    enable_node_controller: bool = True
    # workers and periodic loops
    worker_num: int = 3
    inspect_interval: float = 20.0
    gc_interval: float = 360.0
    # leader election
    leader_elect: bool = True
    leader_elect_lease_duration: float = 30.0
    leader_elect_renew_deadline: float = 20.0
    leader_elect_retry_period: float = 6.0
    leader_elect_resource_name: str = LEADER_ELECTION_LOCK_NAME
    leader_elect_resource_namespace: str = DEFAULT_CONTROLLER_NAMESPACE
    pod_name: str = ""
    pod_namespace: str = DEFAULT_CONTROLLER_NAMESPACE
    node_name: str = ""
    # observability
    metrics_addr: str = "0.0.0.0"
    metrics_port: int = 10660
    log_level: str = "info"
    log_format: str = "text"
    # the `check` command only
    strict: bool = False
    dataplane: bool = False  # also cross-check NB against the SB (and an OVS database)
    ovn_sb_addr: str = ""
    ovs_db: str = ""


class _RaisingParser(argparse.ArgumentParser):
    """argparse prints and exits on errors; we want a ConfigError instead."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r} (use true or false)")


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from a bare number ("20", "0.5") or a Go duration ("20s", "6m", "1h30m")."""
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 20, 20s, 6m)")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not text:
        raise argparse.ArgumentTypeError("empty duration")
    return total


_BOOL_FLAGS = (
    "--enable-eip-snat",
    "--keep-vm-ip",
    "--enable-subnet-controller",
    "--enable-namespace-controller",
    "--enable-node-controller",
    "--leader-elect",
    "--strict",
    "--dataplane",
)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (for --help and for `parse_args`)."""
    p = _RaisingParser(
        prog="kube-ovn-controller",
        description="kube-ovn pod network controller (Python re-implementation)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument(
        "command",
        nargs="?",
        default=COMMAND_RUN,
        choices=COMMANDS,
        help="run the controller, or check (audit the cluster against OVN and exit)",
    )
    p.add_argument("--kubeconfig", default="", help="path to a kubeconfig; in-cluster if empty")

    g = p.add_argument_group("OVN northbound")
    g.add_argument(
        "--ovn-nb-addr",
        default="",
        help="NB remote(s), e.g. tcp:[10.0.0.1]:6641,ssl:..., unix:/path; from the env if empty",
    )
    g.add_argument("--ovn-timeout", type=int, default=60, help="NB transaction timeout, seconds")
    g.add_argument("--ovn-nb-ssl-key", default="", help="private key for ssl: remotes")
    g.add_argument("--ovn-nb-ssl-cert", default="", help="certificate for ssl: remotes")
    g.add_argument("--ovn-nb-ssl-ca", default="", help="CA certificate for ssl: remotes")

    g = p.add_argument_group("networks")
    g.add_argument("--default-ls", default=DEFAULT_LOGICAL_SWITCH, help="default subnet name")
    g.add_argument("--default-cidr", default=DEFAULT_CIDR, help="default subnet CIDR(s), v4,v6")
    g.add_argument("--default-gateway", default="", help="default subnet gateway(s); first IP")
    g.add_argument(
        "--default-exclude-ips",
        default="",
        help="comma list of IPs or a..b ranges never allocated; the gateway if empty",
    )
    g.add_argument("--cluster-router", default=DEFAULT_CLUSTER_ROUTER, help="default VPC router")
    g.add_argument("--node-switch", default=DEFAULT_NODE_SWITCH, help="join subnet name")
    g.add_argument("--node-switch-cidr", default=DEFAULT_NODE_SWITCH_CIDR, help="join CIDR(s)")
    g.add_argument("--node-switch-gateway", default="", help="join gateway(s); first IP")
    g.add_argument("--network-type", default=NETWORK_TYPE_GENEVE, choices=NETWORK_TYPES)
    g.add_argument("--default-provider-name", default="provider", help="vlan provider network")
    g.add_argument("--default-interface-name", default="", help="vlan NIC (network-type vlan)")
    g.add_argument("--default-vlan-name", default="ovn-vlan")
    g.add_argument("--default-vlan-id", type=int, default=1)
    g.add_argument("--pod-nic-type", default=POD_NIC_VETH_PAIR, choices=POD_NIC_TYPES)

    g = p.add_argument_group("features (booleans take --flag or --flag=true|false)")

    def boolean(name: str, default: bool, text: str, dest: str | None = None) -> None:
        g.add_argument(
            name,
            dest=dest,
            nargs="?",
            const=True,
            default=default,
            type=_parse_bool,
            metavar="BOOL",
            help=text,
        )

    boolean("--enable-eip-snat", True, "program EIP/SNAT NAT rules and routes per pod")
    boolean("--keep-vm-ip", False, "KubeVirt VM pods keep their IP", dest="enable_keep_vm_ip")
    boolean("--enable-subnet-controller", True, "run the built-in minimal subnet controller")
    boolean("--enable-namespace-controller", True, "run the built-in minimal namespace controller")
    boolean("--enable-node-controller", True, "run the built-in minimal node controller")

    g = p.add_argument_group("workers and periodic loops")
    g.add_argument("--worker-num", type=int, default=3, help="workers per pod queue")
    g.add_argument(
        "--inspect-interval", type=parse_duration, default=20.0, help="pod inspection (s or 20s)"
    )
    g.add_argument("--gc-interval", type=parse_duration, default=360.0, help="LSP GC (s or 6m)")

    g = p.add_argument_group("leader election")
    boolean("--leader-elect", True, "elect a leader among replicas before doing anything")
    g.add_argument("--leader-elect-lease-duration", type=parse_duration, default=30.0)
    g.add_argument("--leader-elect-renew-deadline", type=parse_duration, default=20.0)
    g.add_argument("--leader-elect-retry-period", type=parse_duration, default=6.0)
    g.add_argument("--leader-elect-resource-name", default=LEADER_ELECTION_LOCK_NAME)
    g.add_argument(
        "--leader-elect-resource-namespace", default="", help="lease namespace; $KUBE_NAMESPACE"
    )

    g = p.add_argument_group("observability")
    g.add_argument("--metrics-addr", default="0.0.0.0", help="metrics listen address")
    g.add_argument(
        "--metrics-port",
        "--pprof-port",
        dest="metrics_port",
        type=int,
        default=10660,
        help="metrics port (/metrics); 0 lets the OS pick",
    )
    g.add_argument("--log-level", default="info", type=str.lower, choices=LOG_LEVELS)
    g.add_argument("--log-format", default="text", type=str.lower, choices=LOG_FORMATS)

    g = p.add_argument_group("check")
    boolean("--strict", False, "check: pods not allocated or routed yet count as findings")
    boolean("--dataplane", False, "check: also cross-check the NB against the SB port bindings")
    g.add_argument("--ovn-sb-addr", default="", help="check --dataplane: the SB remote(s)")
    g.add_argument(
        "--ovs-db", default="", help="check --dataplane: an Open_vSwitch database remote (optional)"
    )
    return p


def _normalize_bool_flags(argv: Sequence[str]) -> list[str]:
    """A bare boolean flag must not eat the next word (Go semantics): spell it `--flag=true`."""
    out = []
    for arg in argv:
        out.append(f"{arg}=true" if arg in _BOOL_FLAGS else arg)
    return out


def _networks(flag: str, value: str) -> list[IPNetwork]:
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


def _gateway(flag: str, value: str, networks: list[IPNetwork], cidr_flag: str) -> str:
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


def _exclude_ips(value: str, gateway: str) -> tuple[str, ...]:
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


def _nb_addr(value: str, environ: Mapping[str, str]) -> str:
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
        _check_remote(remote.strip())
    return ",".join(r.strip() for r in value.split(","))


def _check_remote(remote: str, flag: str = "--ovn-nb-addr") -> None:
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


def _dataplane_remotes(ns: argparse.Namespace) -> None:
    if (ns.dataplane or ns.ovn_sb_addr or ns.ovs_db) and ns.command != COMMAND_CHECK:
        raise ConfigError("--dataplane, --ovn-sb-addr and --ovs-db only apply to check")
    if (ns.ovn_sb_addr or ns.ovs_db) and not ns.dataplane:
        raise ConfigError("--ovn-sb-addr and --ovs-db need --dataplane")
    if ns.dataplane and not ns.ovn_sb_addr:
        raise ConfigError("check --dataplane needs --ovn-sb-addr")
    for flag, value in (("--ovn-sb-addr", ns.ovn_sb_addr), ("--ovs-db", ns.ovs_db)):
        for remote in value.split(",") if value else ():
            _check_remote(remote.strip(), flag)


def _positive(flag: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"{flag} must be > 0, got {value:g}")


def parse_args(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    """Parse and validate; raise ConfigError on any problem (argparse errors included).

    `--help` still prints and raises SystemExit(0), as argparse does.
    """
    ns = build_parser().parse_args(_normalize_bool_flags(argv))

    if ns.strict and ns.command != COMMAND_CHECK:
        raise ConfigError("--strict only applies to the check command")
    _dataplane_remotes(ns)
    if ns.worker_num < 1:
        raise ConfigError(f"--worker-num must be >= 1, got {ns.worker_num}")
    _positive("--ovn-timeout", ns.ovn_timeout)
    _positive("--inspect-interval", ns.inspect_interval)
    _positive("--gc-interval", ns.gc_interval)
    _positive("--leader-elect-lease-duration", ns.leader_elect_lease_duration)
    _positive("--leader-elect-renew-deadline", ns.leader_elect_renew_deadline)
    _positive("--leader-elect-retry-period", ns.leader_elect_retry_period)
    if ns.leader_elect_renew_deadline >= ns.leader_elect_lease_duration:
        raise ConfigError(
            "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
        )
    if ns.leader_elect_renew_deadline <= LEADER_ELECTION_JITTER * ns.leader_elect_retry_period:
        raise ConfigError(
            "--leader-elect-renew-deadline must exceed 1.2 x --leader-elect-retry-period"
        )
    if not 0 <= ns.metrics_port <= 65535:
        raise ConfigError(f"--metrics-port must be in 0..65535, got {ns.metrics_port}")
    try:
        ipaddress.ip_address(ns.metrics_addr)
    except ValueError:
        raise ConfigError(f"--metrics-addr: {ns.metrics_addr!r} is not an IP address") from None
    if not 1 <= ns.default_vlan_id <= 4095:
        raise ConfigError(f"--default-vlan-id must be in 1..4095, got {ns.default_vlan_id}")
    if ns.network_type == NETWORK_TYPE_VLAN and not ns.default_interface_name:
        raise ConfigError("--network-type=vlan requires --default-interface-name")
    for flag, name in (
        ("--default-ls", ns.default_ls),
        ("--node-switch", ns.node_switch),
        ("--cluster-router", ns.cluster_router),
    ):
        if not name:
            raise ConfigError(f"{flag} must not be empty")
    if ns.default_ls == ns.node_switch:
        raise ConfigError("--default-ls and --node-switch must differ")

    default_nets = _networks("--default-cidr", ns.default_cidr)
    node_nets = _networks("--node-switch-cidr", ns.node_switch_cidr)
    for a in default_nets:
        for b in node_nets:
            if a.version == b.version and a.overlaps(b):
                raise ConfigError(f"--default-cidr {a} overlaps --node-switch-cidr {b}")
    default_gw = _gateway("--default-gateway", ns.default_gateway, default_nets, "--default-cidr")
    node_gw = _gateway(
        "--node-switch-gateway", ns.node_switch_gateway, node_nets, "--node-switch-cidr"
    )

    nb_addr = _nb_addr(ns.ovn_nb_addr, environ)
    ssl_env = environ.get("ENABLE_SSL", "").lower() == "true"
    key = ns.ovn_nb_ssl_key or (DEFAULT_SSL_KEY if ssl_env else "")
    cert = ns.ovn_nb_ssl_cert or (DEFAULT_SSL_CERT if ssl_env else "")
    ca = ns.ovn_nb_ssl_ca or (DEFAULT_SSL_CA if ssl_env else "")
    if any(r.startswith("ssl:") for r in nb_addr.split(",")) and not (key and cert and ca):
        raise ConfigError(
            "ssl: remotes in --ovn-nb-addr need --ovn-nb-ssl-key, --ovn-nb-ssl-cert and "
            "--ovn-nb-ssl-ca (or ENABLE_SSL=true for the /var/run/tls defaults)"
        )

    pod_name = environ.get("POD_NAME") or environ.get("HOSTNAME", "")
    # The audit never campaigns for the lease, so it needs no identity.
    if ns.leader_elect and not pod_name and ns.command != COMMAND_CHECK:
        raise ConfigError("leader election needs an identity: set POD_NAME or --leader-elect=false")
    pod_namespace = environ.get("KUBE_NAMESPACE") or DEFAULT_CONTROLLER_NAMESPACE

    return Config(
        command=ns.command,
        kubeconfig=ns.kubeconfig,
        ovn_nb_addr=nb_addr,
        ovn_timeout=ns.ovn_timeout,
        ovn_nb_ssl_key=key,
        ovn_nb_ssl_cert=cert,
        ovn_nb_ssl_ca=ca,
        default_logical_switch=ns.default_ls,
        default_cidr=",".join(str(n) for n in default_nets),
        default_gateway=default_gw,
        default_exclude_ips=_exclude_ips(ns.default_exclude_ips, default_gw),
        cluster_router=ns.cluster_router,
        node_switch=ns.node_switch,
        node_switch_cidr=",".join(str(n) for n in node_nets),
        node_switch_gateway=node_gw,
        network_type=ns.network_type,
        default_provider_name=ns.default_provider_name,
        default_interface_name=ns.default_interface_name,
        default_vlan_name=ns.default_vlan_name,
        default_vlan_id=ns.default_vlan_id,
        pod_nic_type=ns.pod_nic_type,
        enable_eip_snat=ns.enable_eip_snat,
        enable_keep_vm_ip=ns.enable_keep_vm_ip,
        enable_subnet_controller=ns.enable_subnet_controller,
        enable_namespace_controller=ns.enable_namespace_controller,
        enable_node_controller=ns.enable_node_controller,
        worker_num=ns.worker_num,
        inspect_interval=ns.inspect_interval,
        gc_interval=ns.gc_interval,
        leader_elect=ns.leader_elect,
        leader_elect_lease_duration=ns.leader_elect_lease_duration,
        leader_elect_renew_deadline=ns.leader_elect_renew_deadline,
        leader_elect_retry_period=ns.leader_elect_retry_period,
        leader_elect_resource_name=ns.leader_elect_resource_name,
        leader_elect_resource_namespace=ns.leader_elect_resource_namespace or pod_namespace,
        pod_name=pod_name,
        pod_namespace=pod_namespace,
        node_name=environ.get("KUBE_NODE_NAME", ""),
        metrics_addr=ns.metrics_addr,
        metrics_port=ns.metrics_port,
        log_level=ns.log_level,
        log_format=ns.log_format,
        strict=ns.strict,
        dataplane=ns.dataplane,
        ovn_sb_addr=ns.ovn_sb_addr,
        ovs_db=ns.ovs_db,
    )
