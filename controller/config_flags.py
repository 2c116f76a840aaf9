"""The command line's syntax and its per-flag value checks, for `controller.config` (pure).

`build_parser()` is the argparse parser with kube-ovn v1.8's flag names and defaults
(`pkg/controller/config.go`), klog's flags (`KLOG_FLAGS`) and ours; `normalize_bool_flags` and
`strip_start_script` bring Go flag syntax and kube-ovn's container args to argparse;
`parse_duration` reads Go durations. The `check_*` / `parse_*` / `resolve_*` helpers validate one
flag (or one related group) each and raise `ConfigError` naming the flag; `controller.config.
parse_args` calls them in order and builds the `Config`. The semantics are documented there.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from typing import NoReturn

from controller.core.address import IPNetwork, address_count, parse_cidr, parse_ip
from controller.core.constants import (
    DEFAULT_CIDR,
    DEFAULT_CLUSTER_ROUTER,
    DEFAULT_LOGICAL_SWITCH,
    DEFAULT_NODE_SWITCH,
    DEFAULT_NODE_SWITCH_CIDR,
    LEADER_ELECTION_LOCK_NAME,
    NETWORK_TYPE_GENEVE,
    NETWORK_TYPES,
    POD_NIC_TYPES,
    POD_NIC_VETH_PAIR,
)
from controller.core.errors import ConfigError

COMMAND_RUN = "run"
COMMAND_CHECK = "check"
COMMANDS = (COMMAND_RUN, COMMAND_CHECK)
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json", "klog")
LOG_FORMAT_KLOG = "klog"
#: klog's severities for --stderrthreshold (names or 0..3, as klog accepts).
KLOG_SEVERITIES = ("INFO", "WARNING", "ERROR", "FATAL")
#: kube-ovn logs details at klog V(3) and above: those map to debug.
KLOG_DEBUG_VERBOSITY = 3
KUBE_OVN_START_SCRIPT = "start-controller.sh"
DEFAULT_NB_PORT = 6641


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


#: kube-ovn switches this controller does not implement: (flag, what is missing, what to do).
UNSUPPORTED: tuple[tuple[str, str, str], ...] = (
    (
        "--enable-lb",
        "Services through OVN load balancers are not provided by this controller",
        "serve Services with kube-proxy and set --enable-lb=false",
    ),
    (
        "--enable-np",
        "NetworkPolicy through OVN ACLs is not provided by this controller",
        "enforce NetworkPolicy another way (or not at all) and set --enable-np=false",
    ),
    (
        "--enable-ecmp",
        "ECMP routes for centralized subnets are not provided by this controller",
        "set --enable-ecmp=false",
    ),
    (
        "--enable-pprof",
        "Go's pprof endpoints do not exist in this Python controller",
        "drop --enable-pprof (--pprof-port still sets the metrics port)",
    ),
)

#: klog's flags (klog v2 as kube-ovn v1.8 links it); the first six are honoured (see the module
#: docstring), `--skip_headers` and `--stderrthreshold` too, the rest accepted and ignored.
KLOG_FLAGS = (
    "--v",
    "--logtostderr",
    "--alsologtostderr",
    "--log_file",
    "--log_dir",
    "--log_file_max_size",
    "--stderrthreshold",
    "--skip_headers",
    "--skip_log_headers",
    "--add_dir_header",
    "--one_output",
    "--vmodule",
    "--log_backtrace_at",
)

_BOOL_FLAGS = (
    "--enable-lb",
    "--enable-np",
    "--enable-ecmp",
    "--enable-pprof",
    "--enable-external-vpc",
    "--logtostderr",
    "--alsologtostderr",
    "--skip_headers",
    "--skip_log_headers",
    "--add_dir_header",
    "--one_output",
    "--enable-eip-snat",
    "--keep-vm-ip",
    "--enable-subnet-controller",
    "--enable-namespace-controller",
    "--enable-node-controller",
    "--leader-elect",
    "--strict",
    "--dataplane",
)


class _HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" where the default says something: not for an empty or unset
    one (the help text says what that means); booleans as kube-ovn writes them, true/false;
    durations in seconds."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default is None or default == "" or default is argparse.SUPPRESS or not text:
            return text
        if isinstance(default, bool):
            shown = "true" if default else "false"
        elif isinstance(default, float):
            shown = f"{default:g}s"
        else:
            shown = str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (for --help and for `parse_args`)."""
    p = _RaisingParser(
        prog="kube-ovn-controller",
        description="kube-ovn pod network controller (Python re-implementation)",
        epilog="--version prints the version and exits.",
        formatter_class=_HelpFormatter,
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
    g.add_argument(
        "--ovn-sb-addr",
        default="",
        help="the SB remote(s): check --dataplane reads it; the controller accepts it unused",
    )

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
    g.add_argument(
        "--network-type",
        default=NETWORK_TYPE_GENEVE,
        choices=NETWORK_TYPES,
        help="network of the default subnet: geneve (overlay) or vlan (underlay, its Vlan "
        "--default-vlan-name)",
    )
    g.add_argument("--default-provider-name", default="provider", help="vlan provider network")
    g.add_argument("--default-interface-name", default="", help="vlan NIC (network-type vlan)")
    g.add_argument(
        "--default-vlan-name",
        default="ovn-vlan",
        help="the Vlan the default subnet names in its spec with --network-type=vlan",
    )
    g.add_argument("--default-vlan-id", type=int, default=1, help="that Vlan's VLAN ID (1..4095)")
    g.add_argument(
        "--pod-nic-type",
        default=POD_NIC_VETH_PAIR,
        choices=POD_NIC_TYPES,
        help="how kube-ovn's CNI plugs a pod in, written to its ovn.kubernetes.io/pod_nic_type "
        "annotation unless the pod sets it",
    )

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
    boolean("--enable-external-vpc", True, "kube-ovn's external VPC sync; accepted, not done")
    for flag, _, _ in UNSUPPORTED:
        boolean(flag, False, "kube-ovn's switch; only false is accepted (not provided here)")
    for proto in ("tcp", "udp", "tcp-session", "udp-session"):
        g.add_argument(
            f"--cluster-{proto}-loadbalancer",
            default=f"cluster-{proto}-loadbalancer",
            help="kube-ovn's load balancer name; accepted, unused (no OVN load balancers here)",
        )

    g = p.add_argument_group("workers and periodic loops")
    g.add_argument("--worker-num", type=int, default=3, help="workers per pod queue")
    g.add_argument(
        "--inspect-interval", type=parse_duration, default=20.0, help="pod inspection (s or 20s)"
    )
    g.add_argument("--gc-interval", type=parse_duration, default=360.0, help="LSP GC (s or 6m)")

    g = p.add_argument_group("leader election")
    boolean("--leader-elect", True, "elect a leader among replicas before doing anything")
    g.add_argument(
        "--leader-elect-lease-duration",
        type=parse_duration,
        default=15.0,
        help="how long a lease is held without renewal before others may take it (s or 15s)",
    )
    g.add_argument(
        "--leader-elect-renew-deadline",
        type=parse_duration,
        default=10.0,
        help="the leader steps down when it has not renewed within this (s or 10s)",
    )
    g.add_argument(
        "--leader-elect-retry-period",
        type=parse_duration,
        default=2.0,
        help="time between attempts to take or renew the lease (s or 2s)",
    )
    g.add_argument(
        "--leader-elect-resource-name",
        default=LEADER_ELECTION_LOCK_NAME,
        help="name of the Lease lock",
    )
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
    g.add_argument(
        "--log-level",
        default=None,
        type=str.lower,
        choices=LOG_LEVELS,
        help="log level (default: info, or debug with --v >= 3)",
    )
    g.add_argument(
        "--log-format",
        default=None,
        type=str.lower,
        choices=LOG_FORMATS,
        help="log format (default: klog inside a cluster, KUBERNETES_SERVICE_HOST set, else text)",
    )
    g.add_argument(
        "--nb-unreachable-timeout",
        type=parse_duration,
        default=120.0,
        help="/healthz fails once the NB has been unreachable this long (s or 2m)",
    )
    g.add_argument(
        "--worker-stuck-timeout",
        type=parse_duration,
        default=300.0,
        help="/healthz fails once a worker has spent this long on one item (s or 5m)",
    )

    g = p.add_argument_group("klog (kube-ovn's logging flags)")
    g.add_argument(
        "--v", dest="v", type=int, default=None, help="klog verbosity; >= 3 is --log-level=debug"
    )
    boolean("--logtostderr", True, "log to stderr only (klog); false: to --log_file/--log_dir")
    boolean("--alsologtostderr", False, "with --logtostderr=false: stderr as well")
    g.add_argument("--log_file", default="", help="with --logtostderr=false: this file")
    g.add_argument("--log_dir", default="", help="with --logtostderr=false: files in this dir")
    g.add_argument(
        "--log_file_max_size", type=int, default=1800, help="MB before the file restarts; 0: none"
    )
    g.add_argument(
        "--stderrthreshold",
        default="ERROR",
        help="with --logtostderr=false: this severity and above also go to stderr",
    )
    boolean("--skip_headers", False, "klog format: no header before the message")
    boolean("--skip_log_headers", False, "accepted (klog's file headers)")
    boolean("--add_dir_header", False, "accepted")
    boolean("--one_output", False, "accepted (one file per severity is never made here)")
    g.add_argument("--vmodule", default="", help="accepted, ignored")
    g.add_argument("--log_backtrace_at", default="", help="accepted, ignored")

    g = p.add_argument_group("check")
    boolean("--strict", False, "check: pods not allocated or routed yet count as findings")
    boolean("--dataplane", False, "check: also cross-check the NB against the SB port bindings")
    g.add_argument(
        "--ovs-db", default="", help="check --dataplane: an Open_vSwitch database remote (optional)"
    )
    return p


def normalize_bool_flags(argv: Sequence[str]) -> list[str]:
    """Go flag syntax on argparse: a bare boolean never eats the next word (`--flag=true`), and
    a single dash works for long names as with Go's flag package (`-v=3`, `-logtostderr=false`)."""
    out = []
    for arg in argv:
        if arg.startswith("-") and not arg.startswith("--") and arg not in ("-", "-h"):
            arg = "-" + arg  # noqa: PLW2901
        out.append(f"{arg}=true" if arg in _BOOL_FLAGS else arg)
    return out


def strip_start_script(argv: Sequence[str]) -> list[str]:
    args = list(argv)
    if args and args[0].rsplit("/", 1)[-1] == KUBE_OVN_START_SCRIPT:
        return args[1:]
    return args


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
