"""Every flag of the command line as data: name, default, value type and help, grouped as `--help`
shows them.

Names and defaults are kube-ovn v1.8's (`pkg/controller/config.go`) where kube-ovn has the flag,
klog's (`KLOG_FLAGS`) and ours. `parser.build_parser` turns `GROUPS` into argparse; the value
types here (`parse_bool`, `parse_duration`) read Go's syntax.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass

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

COMMAND_RUN = "run"
#: The exit status of a command line the parser refuses (argparse's).
EXIT_USAGE = 2
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

_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


def parse_bool(text: str) -> bool:
    """Go's boolean forms: 1/0, t/f, true/false, any case."""
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

#: klog's flags (klog v2 as kube-ovn v1.8 links it); the first six are honoured (see
#: `controller.config`), `--skip_headers` and `--stderrthreshold` too, the rest accepted and
#: ignored.
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


@dataclass(frozen=True, slots=True)
class Flag:
    """One option: its names (the first is the one `--help` leads with), default and help.

    A `boolean` flag takes Go's forms: bare `--flag` (true) or `--flag=true|false`."""

    names: tuple[str, ...]
    default: object
    help: str
    type: Callable[[str], object] | None = None
    choices: tuple[str, ...] | None = None
    dest: str | None = None
    boolean: bool = False


def _opt(
    name: str,
    default: object,
    text: str,
    *,
    type: Callable[[str], object] | None = None,
    choices: tuple[str, ...] | None = None,
    dest: str | None = None,
) -> Flag:
    return Flag((name,), default, text, type=type, choices=choices, dest=dest)


def _bool(name: str, default: bool, text: str, dest: str | None = None) -> Flag:
    return Flag((name,), default, text, type=parse_bool, dest=dest, boolean=True)


def _duration(name: str, default: float, text: str) -> Flag:
    return Flag((name,), default, text, type=parse_duration)


_OVN_NB = (
    _opt(
        "--ovn-nb-addr",
        "",
        "NB remote(s), e.g. tcp:[10.0.0.1]:6641,ssl:..., unix:/path; from the env if empty",
    ),
    _opt("--ovn-timeout", 60, "NB transaction timeout, seconds", type=int),
    _opt("--ovn-nb-ssl-key", "", "private key for ssl: remotes"),
    _opt("--ovn-nb-ssl-cert", "", "certificate for ssl: remotes"),
    _opt("--ovn-nb-ssl-ca", "", "CA certificate for ssl: remotes"),
    _opt(
        "--ovn-sb-addr",
        "",
        "the SB remote(s): check --dataplane reads it; the controller accepts it unused",
    ),
)

_NETWORKS = (
    _opt("--default-ls", DEFAULT_LOGICAL_SWITCH, "default subnet name"),
    _opt("--default-cidr", DEFAULT_CIDR, "default subnet CIDR(s), v4,v6"),
    _opt("--default-gateway", "", "default subnet gateway(s); first IP"),
    _opt(
        "--default-exclude-ips",
        "",
        "comma list of IPs or a..b ranges never allocated; the gateway if empty",
    ),
    _opt("--cluster-router", DEFAULT_CLUSTER_ROUTER, "default VPC router"),
    _opt("--node-switch", DEFAULT_NODE_SWITCH, "join subnet name"),
    _opt("--node-switch-cidr", DEFAULT_NODE_SWITCH_CIDR, "join CIDR(s)"),
    _opt("--node-switch-gateway", "", "join gateway(s); first IP"),
    _opt(
        "--network-type",
        NETWORK_TYPE_GENEVE,
        "network of the default subnet: geneve (overlay) or vlan (underlay, its Vlan "
        "--default-vlan-name)",
        choices=NETWORK_TYPES,
    ),
    _opt("--default-provider-name", "provider", "vlan provider network"),
    _opt("--default-interface-name", "", "vlan NIC (network-type vlan)"),
    _opt(
        "--default-vlan-name",
        "ovn-vlan",
        "the Vlan the default subnet names in its spec with --network-type=vlan",
    ),
    _opt("--default-vlan-id", 1, "that Vlan's VLAN ID (1..4095)", type=int),
    _opt(
        "--pod-nic-type",
        POD_NIC_VETH_PAIR,
        "how kube-ovn's CNI plugs a pod in, written to its ovn.kubernetes.io/pod_nic_type "
        "annotation unless the pod sets it",
        choices=POD_NIC_TYPES,
    ),
)

_LOAD_BALANCERS = tuple(
    _opt(
        f"--cluster-{proto}-loadbalancer",
        f"cluster-{proto}-loadbalancer",
        "kube-ovn's load balancer name; accepted, unused (no OVN load balancers here)",
    )
    for proto in ("tcp", "udp", "tcp-session", "udp-session")
)

_FEATURES = (
    _bool("--enable-eip-snat", True, "program EIP/SNAT NAT rules and routes per pod"),
    _bool("--keep-vm-ip", False, "KubeVirt VM pods keep their IP", dest="enable_keep_vm_ip"),
    _bool("--enable-subnet-controller", True, "run the built-in minimal subnet controller"),
    _bool("--enable-namespace-controller", True, "run the built-in minimal namespace controller"),
    _bool("--enable-node-controller", True, "run the built-in minimal node controller"),
    _bool("--enable-external-vpc", True, "kube-ovn's external VPC sync; accepted, not done"),
    *(
        _bool(flag, False, "kube-ovn's switch; only false is accepted (not provided here)")
        for flag, _, _ in UNSUPPORTED
    ),
    *_LOAD_BALANCERS,
)

_WORKERS = (
    _opt("--worker-num", 3, "workers per pod queue", type=int),
    _duration("--inspect-interval", 20.0, "pod inspection (s or 20s)"),
    _duration("--gc-interval", 360.0, "LSP GC (s or 6m)"),
    _duration(
        "--routing-resync-period",
        60.0,
        "full pass of the routing reconciler over every key (s or 1m)",
    ),
)

_LEADER_ELECTION = (
    _bool("--leader-elect", True, "elect a leader among replicas before doing anything"),
    _duration(
        "--leader-elect-lease-duration",
        15.0,
        "how long a lease is held without renewal before others may take it (s or 15s)",
    ),
    _duration(
        "--leader-elect-renew-deadline",
        10.0,
        "the leader steps down when it has not renewed within this (s or 10s)",
    ),
    _duration(
        "--leader-elect-retry-period",
        2.0,
        "time between attempts to take or renew the lease (s or 2s)",
    ),
    _opt("--leader-elect-resource-name", LEADER_ELECTION_LOCK_NAME, "name of the Lease lock"),
    _opt("--leader-elect-resource-namespace", "", "lease namespace; $KUBE_NAMESPACE"),
)

_OBSERVABILITY = (
    _opt("--metrics-addr", "0.0.0.0", "metrics listen address"),
    Flag(
        ("--metrics-port", "--pprof-port"),
        10660,
        "metrics port (/metrics); 0 lets the OS pick",
        type=int,
        dest="metrics_port",
    ),
    _opt(
        "--log-level",
        None,
        "log level (default: info, or debug with --v >= 3)",
        type=str.lower,
        choices=LOG_LEVELS,
    ),
    _opt(
        "--log-format",
        None,
        "log format (default: klog inside a cluster, KUBERNETES_SERVICE_HOST set, else text)",
        type=str.lower,
        choices=LOG_FORMATS,
    ),
    _duration(
        "--nb-unreachable-timeout",
        120.0,
        "/healthz fails once the NB has been unreachable this long (s or 2m)",
    ),
    _duration(
        "--worker-stuck-timeout",
        300.0,
        "/healthz fails once a worker has spent this long on one item (s or 5m)",
    ),
)

_KLOG = (
    _opt("--v", None, "klog verbosity; >= 3 is --log-level=debug", type=int, dest="v"),
    _bool("--logtostderr", True, "log to stderr only (klog); false: to --log_file/--log_dir"),
    _bool("--alsologtostderr", False, "with --logtostderr=false: stderr as well"),
    _opt("--log_file", "", "with --logtostderr=false: this file"),
    _opt("--log_dir", "", "with --logtostderr=false: files in this dir"),
    _opt("--log_file_max_size", 1800, "MB before the file restarts; 0: none", type=int),
    _opt(
        "--stderrthreshold",
        "ERROR",
        "with --logtostderr=false: this severity and above also go to stderr",
    ),
    _bool("--skip_headers", False, "klog format: no header before the message"),
    _bool("--skip_log_headers", False, "accepted (klog's file headers)"),
    _bool("--add_dir_header", False, "accepted"),
    _bool("--one_output", False, "accepted (one file per severity is never made here)"),
    _opt("--vmodule", "", "accepted, ignored"),
    _opt("--log_backtrace_at", "", "accepted, ignored"),
)

_CHECK = (
    _bool("--strict", False, "check: pods not allocated or routed yet count as findings"),
    _bool("--dataplane", False, "check: also cross-check the NB against the SB port bindings"),
    _opt("--ovs-db", "", "check --dataplane: an Open_vSwitch database remote (optional)"),
)

#: The option groups in `--help` order: (title, flags).
GROUPS: tuple[tuple[str, tuple[Flag, ...]], ...] = (
    ("OVN northbound", _OVN_NB),
    ("networks", _NETWORKS),
    ("features (booleans take --flag or --flag=true|false)", _FEATURES),
    ("workers and periodic loops", _WORKERS),
    ("leader election", _LEADER_ELECTION),
    ("observability", _OBSERVABILITY),
    ("klog (kube-ovn's logging flags)", _KLOG),
    ("check", _CHECK),
)

#: The boolean flags: a bare one means true and never takes the next word (Go's flag syntax).
BOOL_FLAGS = frozenset(f.names[0] for _, flags in GROUPS for f in flags if f.boolean)
