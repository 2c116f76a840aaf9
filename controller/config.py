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

kube-ovn v1.8's controller Deployment runs unchanged (an image swap): every flag of its
`pkg/controller/config.go` is accepted with the same syntax, and klog's flags too (`--v`,
`--logtostderr`, `--alsologtostderr`, `--log_file`, `--log_dir`, `--log_file_max_size`,
`--stderrthreshold`, `--skip_headers`, ... see `KLOG_FLAGS`). A leading `.../start-controller.sh`
(kube-ovn's container args begin with its wrapper script) is skipped: the NB address it would
compute comes from the same environment here. Flags naming something this controller does not do
(`UNSUPPORTED`: `--enable-lb`, `--enable-np`, `--enable-ecmp`, `--enable-pprof` set to true) stop
start-up with one sentence saying what is missing and what to set instead; `--ovn-sb-addr` and the
load-balancer names are accepted and unused (nothing here reads the southbound DB or programs
load balancers). `--v=N` sets the level when `--log-level` is not given: N >= 3 (kube-ovn's
detail level) is debug, else info. The log format defaults to `klog` (klog's header) inside a
cluster (`KUBERNETES_SERVICE_HOST` set), `text` elsewhere.

Every invalid value raises `ConfigError` with a message naming the flag; argparse's own errors
(unknown flag, missing value, bad int) are wrapped in it too, so `main` can print and exit 2.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.config_flags.declarations import (
    COMMAND_CHECK,
    COMMAND_RUN,
    COMMANDS,
    DEFAULT_NB_PORT,
    EXIT_USAGE,
    KLOG_DEBUG_VERBOSITY,
    KLOG_FLAGS,
    KLOG_SEVERITIES,
    KUBE_OVN_START_SCRIPT,
    LOG_FORMAT_KLOG,
    LOG_FORMATS,
    LOG_LEVELS,
    UNSUPPORTED,
    parse_duration,
)
from controller.config_flags.parser import build_parser, normalize_bool_flags, strip_start_script
from controller.config_flags.values import (
    check_dataplane_remotes,
    check_positive,
    check_supported,
    parse_exclude_ips,
    parse_gateway,
    parse_networks,
    parse_stderr_threshold,
    resolve_log_level,
    resolve_nb_addr,
)
from controller.core.address import IPNetwork
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
    POD_NIC_VETH_PAIR,
)
from controller.core.errors import ConfigError

# The command line's names stay importable from here (tests, the chart checks, `controller.app`).
__all__ = [
    "COMMANDS",
    "COMMAND_CHECK",
    "COMMAND_RUN",
    "DEFAULT_NB_PORT",
    "DEFAULT_SSL_CA",
    "DEFAULT_SSL_CERT",
    "DEFAULT_SSL_KEY",
    "EXIT_USAGE",
    "KLOG_DEBUG_VERBOSITY",
    "KLOG_FLAGS",
    "KLOG_SEVERITIES",
    "KUBE_OVN_START_SCRIPT",
    "LEADER_ELECTION_JITTER",
    "LOG_FORMATS",
    "LOG_FORMAT_KLOG",
    "LOG_LEVELS",
    "UNSUPPORTED",
    "Config",
    "build_parser",
    "parse_args",
    "parse_duration",
]

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
    routing_resync_period: float = 60.0
    # leader election
    leader_elect: bool = True
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
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
    # klog's output flags (kube-ovn's Deployment sets them); see controller.runtime.log
    log_verbosity: int = 0
    logtostderr: bool = True
    alsologtostderr: bool = False
    log_file: str = ""
    log_dir: str = ""
    log_file_max_size: int = 1800  # MB; 0 = unlimited
    stderrthreshold: str = "ERROR"
    skip_headers: bool = False
    # health bounds (/healthz fails past them)
    nb_unreachable_timeout: float = 120.0
    worker_stuck_timeout: float = 300.0
    # the SB remote(s): read by `check --dataplane`; kube-ovn's controller args carry it too
    ovn_sb_addr: str = ""
    # kube-ovn v1.8 flags accepted for an image swap; they change nothing here
    enable_external_vpc: bool = True
    cluster_tcp_loadbalancer: str = "cluster-tcp-loadbalancer"
    cluster_udp_loadbalancer: str = "cluster-udp-loadbalancer"
    cluster_tcp_session_loadbalancer: str = "cluster-tcp-session-loadbalancer"
    cluster_udp_session_loadbalancer: str = "cluster-udp-session-loadbalancer"
    # the `check` command only
    strict: bool = False
    dataplane: bool = False  # also cross-check NB against the SB (and an OVS database)
    ovs_db: str = ""


def _version() -> str:
    try:
        return importlib.metadata.version("kube-ovn-pod-controller")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _check_logging(ns: argparse.Namespace) -> None:
    if ns.v is not None and ns.v < 0:
        raise ConfigError(f"--v must be >= 0, got {ns.v}")
    if ns.log_file_max_size < 0:
        raise ConfigError(f"--log_file_max_size must be >= 0, got {ns.log_file_max_size}")
    check_positive("--nb-unreachable-timeout", ns.nb_unreachable_timeout)
    check_positive("--worker-stuck-timeout", ns.worker_stuck_timeout)


def _check_command(ns: argparse.Namespace) -> None:
    if ns.strict and ns.command != COMMAND_CHECK:
        raise ConfigError("--strict only applies to the check command")
    check_dataplane_remotes(ns)


def _check_loops(ns: argparse.Namespace) -> None:
    if ns.worker_num < 1:
        raise ConfigError(f"--worker-num must be >= 1, got {ns.worker_num}")
    check_positive("--ovn-timeout", ns.ovn_timeout)
    check_positive("--inspect-interval", ns.inspect_interval)
    check_positive("--gc-interval", ns.gc_interval)
    check_positive("--routing-resync-period", ns.routing_resync_period)


def _check_leader_election(ns: argparse.Namespace) -> None:
    check_positive("--leader-elect-lease-duration", ns.leader_elect_lease_duration)
    check_positive("--leader-elect-renew-deadline", ns.leader_elect_renew_deadline)
    check_positive("--leader-elect-retry-period", ns.leader_elect_retry_period)
    if ns.leader_elect_renew_deadline >= ns.leader_elect_lease_duration:
        raise ConfigError(
            "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
        )
    if ns.leader_elect_renew_deadline <= LEADER_ELECTION_JITTER * ns.leader_elect_retry_period:
        raise ConfigError(
            "--leader-elect-renew-deadline must exceed 1.2 x --leader-elect-retry-period"
        )


def _check_metrics(ns: argparse.Namespace) -> None:
    if not 0 <= ns.metrics_port <= 65535:
        raise ConfigError(f"--metrics-port must be in 0..65535, got {ns.metrics_port}")
    try:
        ipaddress.ip_address(ns.metrics_addr)
    except ValueError:
        raise ConfigError(f"--metrics-addr: {ns.metrics_addr!r} is not an IP address") from None


def _check_network_names(ns: argparse.Namespace) -> None:
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


#: The checks of single flags and of pairs of them, in the order the flags are documented (the
#: first failing one is the error reported).
_FLAG_CHECKS = (
    check_supported,
    _check_logging,
    _check_command,
    _check_loops,
    _check_leader_election,
    _check_metrics,
    _check_network_names,
)


def _networks(ns: argparse.Namespace) -> tuple[list[IPNetwork], list[IPNetwork]]:
    """The default subnet's and the join subnet's CIDR blocks, which must not overlap."""
    default_nets = parse_networks("--default-cidr", ns.default_cidr)
    node_nets = parse_networks("--node-switch-cidr", ns.node_switch_cidr)
    for a in default_nets:
        for b in node_nets:
            if a.version == b.version and a.overlaps(b):
                raise ConfigError(f"--default-cidr {a} overlaps --node-switch-cidr {b}")
    return default_nets, node_nets


def _nb_tls_files(
    ns: argparse.Namespace, nb_addr: str, environ: Mapping[str, str]
) -> tuple[str, str, str]:
    """The NB client's (key, certificate, CA) files: the flags, else under ENABLE_SSL=true the
    /var/run/tls defaults; ConfigError when an ssl: remote is left without all three."""
    ssl_env = environ.get("ENABLE_SSL", "").lower() == "true"
    key = ns.ovn_nb_ssl_key or (DEFAULT_SSL_KEY if ssl_env else "")
    cert = ns.ovn_nb_ssl_cert or (DEFAULT_SSL_CERT if ssl_env else "")
    ca = ns.ovn_nb_ssl_ca or (DEFAULT_SSL_CA if ssl_env else "")
    if any(r.startswith("ssl:") for r in nb_addr.split(",")) and not (key and cert and ca):
        raise ConfigError(
            "ssl: remotes in --ovn-nb-addr need --ovn-nb-ssl-key, --ovn-nb-ssl-cert and "
            "--ovn-nb-ssl-ca (or ENABLE_SSL=true for the /var/run/tls defaults)"
        )
    return key, cert, ca


def parse_args(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    """Parse and validate; raise ConfigError on any problem (argparse errors included).

    `--help` still prints and raises SystemExit(0), as argparse does; so does `--version`.
    """
    if "--version" in argv or "-version" in argv:
        print(f"kube-ovn-controller {_version()}")
        raise SystemExit(0)
    ns = build_parser().parse_args(normalize_bool_flags(strip_start_script(argv)))

    for check in _FLAG_CHECKS:
        check(ns)

    default_nets, node_nets = _networks(ns)
    default_gw = parse_gateway(
        "--default-gateway", ns.default_gateway, default_nets, "--default-cidr"
    )
    node_gw = parse_gateway(
        "--node-switch-gateway", ns.node_switch_gateway, node_nets, "--node-switch-cidr"
    )

    nb_addr = resolve_nb_addr(ns.ovn_nb_addr, environ)
    key, cert, ca = _nb_tls_files(ns, nb_addr, environ)

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
        default_exclude_ips=parse_exclude_ips(ns.default_exclude_ips, default_gw),
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
        routing_resync_period=ns.routing_resync_period,
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
        log_level=resolve_log_level(ns),
        log_format=ns.log_format
        or (LOG_FORMAT_KLOG if environ.get("KUBERNETES_SERVICE_HOST") else "text"),
        log_verbosity=ns.v or 0,
        logtostderr=ns.logtostderr,
        alsologtostderr=ns.alsologtostderr,
        log_file=ns.log_file,
        log_dir=ns.log_dir,
        log_file_max_size=ns.log_file_max_size,
        stderrthreshold=parse_stderr_threshold(ns.stderrthreshold),
        skip_headers=ns.skip_headers,
        nb_unreachable_timeout=ns.nb_unreachable_timeout,
        worker_stuck_timeout=ns.worker_stuck_timeout,
        ovn_sb_addr=ns.ovn_sb_addr,
        enable_external_vpc=ns.enable_external_vpc,
        cluster_tcp_loadbalancer=ns.cluster_tcp_loadbalancer,
        cluster_udp_loadbalancer=ns.cluster_udp_loadbalancer,
        cluster_tcp_session_loadbalancer=ns.cluster_tcp_session_loadbalancer,
        cluster_udp_session_loadbalancer=ns.cluster_udp_session_loadbalancer,
        strict=ns.strict,
        dataplane=ns.dataplane,
        ovs_db=ns.ovs_db,
    )
