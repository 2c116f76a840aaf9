"""controller.config.parse_args: kube-ovn flag names, defaults, derivations and clear errors."""

from __future__ import annotations

import dataclasses

import pytest

from controller.config import Config, build_parser, parse_args, parse_duration
from controller.core.errors import ConfigError

NB = "--ovn-nb-addr=tcp:[127.0.0.1]:6641"
ENV = {"POD_NAME": "kube-ovn-controller-0"}


def parse(*argv: str, env: dict[str, str] | None = None) -> Config:
    return parse_args([NB, *argv], ENV if env is None else env)


def test_defaults_match_kube_ovn() -> None:
    cfg = parse()
    assert cfg.command == "run"
    assert cfg.ovn_nb_addr == "tcp:[127.0.0.1]:6641"
    assert cfg.ovn_timeout == 60
    assert cfg.worker_num == 3
    assert cfg.default_logical_switch == "ovn-default"
    assert cfg.default_cidr == "10.16.0.0/16"
    assert cfg.default_gateway == "10.16.0.1"
    assert cfg.default_exclude_ips == ("10.16.0.1",)
    assert cfg.cluster_router == "ovn-cluster"
    assert cfg.node_switch == "join"
    assert cfg.node_switch_cidr == "100.64.0.0/16"
    assert cfg.node_switch_gateway == "100.64.0.1"
    assert cfg.pod_nic_type == "veth-pair"
    assert cfg.enable_eip_snat is True
    assert cfg.enable_keep_vm_ip is False
    assert cfg.metrics_port == 10660
    assert (
        cfg.leader_elect_lease_duration,
        cfg.leader_elect_renew_deadline,
        cfg.leader_elect_retry_period,
    ) == (15.0, 10.0, 2.0)  # kube-ovn v1.8.18's (pkg/controller/election.go)
    assert cfg.leader_elect is True
    assert cfg.leader_elect_resource_name == "kube-ovn-controller"
    assert cfg.leader_elect_resource_namespace == "kube-system"
    assert cfg.pod_name == "kube-ovn-controller-0"
    assert (cfg.inspect_interval, cfg.gc_interval) == (20.0, 360.0)
    assert (
        cfg.enable_subnet_controller,
        cfg.enable_namespace_controller,
        cfg.enable_node_controller,
    ) == (True, True, True)
    assert (cfg.log_level, cfg.log_format) == ("info", "text")


def test_config_is_frozen() -> None:
    cfg = parse()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.worker_num = 5  # type: ignore[misc]  # frozen on purpose


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--keep-vm-ip"], True),
        (["--keep-vm-ip=true"], True),
        (["--keep-vm-ip=TRUE"], True),
        (["--keep-vm-ip=1"], True),
        (["--keep-vm-ip=t"], True),
        (["--keep-vm-ip=false"], False),
        (["--keep-vm-ip=0"], False),
        ([], False),
    ],
)
def test_go_style_booleans(argv: list[str], expected: bool) -> None:
    assert parse(*argv).enable_keep_vm_ip is expected


def test_bare_boolean_does_not_eat_the_subcommand() -> None:
    cfg = parse("--enable-eip-snat", "check")
    assert cfg.enable_eip_snat is True
    assert cfg.command == "check"


def test_boolean_switches_turn_off_builtin_controllers() -> None:
    cfg = parse(
        "--enable-subnet-controller=false",
        "--enable-namespace-controller=false",
        "--enable-node-controller=false",
        "--enable-eip-snat=false",
    )
    assert not cfg.enable_subnet_controller
    assert not cfg.enable_namespace_controller
    assert not cfg.enable_node_controller
    assert not cfg.enable_eip_snat


def test_bad_boolean_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid boolean value 'yes'"):
        parse("--keep-vm-ip=yes")


def test_dual_stack_derives_gateways_and_excludes() -> None:
    cfg = parse("--default-cidr=10.16.0.0/16,fd00:10:16::/64")
    assert cfg.default_gateway == "10.16.0.1,fd00:10:16::1"
    assert cfg.default_exclude_ips == ("10.16.0.1", "fd00:10:16::1")


def test_cidr_is_normalised_to_its_network() -> None:
    cfg = parse("--default-cidr=10.16.3.7/16", "--node-switch-cidr=100.64.9.9/16")
    assert cfg.default_cidr == "10.16.0.0/16"
    assert cfg.default_gateway == "10.16.0.1"
    assert cfg.node_switch_gateway == "100.64.0.1"


def test_explicit_gateway_and_excludes() -> None:
    cfg = parse(
        "--default-cidr=192.168.0.0/24",
        "--default-gateway=192.168.0.254",
        "--default-exclude-ips=192.168.0.254, 192.168.0.10..192.168.0.20",
    )
    assert cfg.default_gateway == "192.168.0.254"
    assert cfg.default_exclude_ips == ("192.168.0.254", "192.168.0.10..192.168.0.20")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--default-cidr=10.16.0.0/33"], "--default-cidr: '10.16.0.0/33' is not a valid CIDR"),
        (["--default-cidr=banana"], "is not a valid CIDR"),
        (["--default-cidr=10.0.0.0/31"], "too small"),
        (["--default-cidr=fd00::/64,10.16.0.0/16"], "must be 'IPv4,IPv6'"),
        (["--default-cidr=10.1.0.0/16,10.2.0.0/16"], "must be 'IPv4,IPv6'"),
        (["--default-cidr=10.1.0.0/16,fd00::/64,fd01::/64"], "CIDR pair"),
        (["--default-gateway=10.17.0.1"], "10.17.0.1 is not in --default-cidr 10.16.0.0/16"),
        (["--default-gateway=fd00::1"], "is IPv6 but 10.16.0.0/16 is IPv4"),
        (["--default-gateway=10.16.0.0"], "network or broadcast"),
        (["--default-gateway=10.16.255.255"], "network or broadcast"),
        (["--default-gateway=nope"], "not a valid IP address"),
        (
            ["--default-cidr=10.16.0.0/16,fd00::/64", "--default-gateway=10.16.0.1"],
            "one address per --default-cidr block",
        ),
        (["--node-switch-gateway=10.16.0.1"], "not in --node-switch-cidr"),
        (["--node-switch-cidr=10.16.128.0/24"], "overlaps"),
        (["--default-exclude-ips=10.16.0.300"], "not an IP or an a..b range"),
        (["--default-exclude-ips=10.16.0.9..10.16.0.1"], "start after its end"),
        (["--default-exclude-ips=10.16.0.1..fd00::1"], "mixes IPv4 and IPv6"),
        (["--default-exclude-ips=10.16.0.1,,10.16.0.2"], "empty element"),
        (["--default-exclude-ips=1.1.1.1..2.2.2.2..3.3.3.3"], "a..b range"),
        (["--worker-num=0"], "--worker-num must be >= 1, got 0"),
        (["--worker-num=x"], "invalid int value"),
        (["--ovn-timeout=0"], "--ovn-timeout must be > 0"),
        (["--inspect-interval=0s"], "--inspect-interval must be > 0"),
        (["--gc-interval=-1"], "--gc-interval must be > 0"),
        (["--gc-interval=soon"], "invalid duration"),
        (["--leader-elect-renew-deadline=30"], "shorter than --leader-elect-lease-duration"),
        (["--leader-elect-retry-period=17"], "exceed 1.2 x"),
        (["--leader-elect-retry-period=0"], "--leader-elect-retry-period must be > 0"),
        (["--metrics-port=70000"], "--metrics-port must be in 0..65535"),
        (["--metrics-addr=localhost"], "--metrics-addr"),
        (["--log-format=xml"], "invalid choice: 'xml'"),
        (["--log-level=trace"], "invalid choice: 'trace'"),
        (["--pod-nic-type=macvtap"], "invalid choice"),
        (["--network-type=vlan"], "requires --default-interface-name"),
        (["--default-vlan-id=5000"], "1..4095"),
        (["--default-ls=join"], "must differ"),
        (["--cluster-router="], "--cluster-router must not be empty"),
        (["--no-such-flag"], "unrecognized arguments"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["--ovn-nb-addr=tcp:1.2.3.4"], "needs a port"),
        (["--ovn-nb-addr=http://x:1"], "unsupported scheme 'http'"),
        (["--ovn-nb-addr=tcp:[zz::1]:6641"], "invalid host"),
        (["--ovn-nb-addr=ssl:[10.0.0.1]:6641"], "need --ovn-nb-ssl-key"),
    ],
)
def test_bad_values_raise_readable_config_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(*argv)
    assert message in str(info.value)


def test_durations_accept_numbers_and_go_syntax() -> None:
    assert parse_duration("20") == 20.0
    assert parse_duration("0.5") == 0.5
    assert parse_duration("20s") == 20.0
    assert parse_duration("6m") == 360.0
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("1500ms") == 1.5
    cfg = parse("--inspect-interval=1m", "--gc-interval=90")
    assert (cfg.inspect_interval, cfg.gc_interval) == (60.0, 90.0)


def test_nb_addr_from_ovn_db_ips_like_start_script() -> None:
    env = {"POD_NAME": "p", "OVN_DB_IPS": "10.0.0.1, 10.0.0.2,fd00::3"}
    cfg = parse_args([], env)
    assert cfg.ovn_nb_addr == "tcp:[10.0.0.1]:6641,tcp:[10.0.0.2]:6641,tcp:[fd00::3]:6641"


def test_nb_addr_ssl_from_env_uses_tls_paths() -> None:
    env = {"POD_NAME": "p", "OVN_DB_IPS": "10.0.0.1", "ENABLE_SSL": "true"}
    cfg = parse_args([], env)
    assert cfg.ovn_nb_addr == "ssl:[10.0.0.1]:6641"
    assert (cfg.ovn_nb_ssl_key, cfg.ovn_nb_ssl_cert, cfg.ovn_nb_ssl_ca) == (
        "/var/run/tls/key",
        "/var/run/tls/cert",
        "/var/run/tls/cacert",
    )


def test_nb_addr_from_service_env() -> None:
    env = {"POD_NAME": "p", "OVN_NB_SERVICE_HOST": "10.96.0.7", "OVN_NB_SERVICE_PORT": "6651"}
    assert parse_args([], env).ovn_nb_addr == "tcp:[10.96.0.7]:6651"


def test_nb_addr_is_required() -> None:
    with pytest.raises(ConfigError, match="--ovn-nb-addr is required"):
        parse_args([], {"POD_NAME": "p"})


def test_unix_and_multi_remote_nb_addr() -> None:
    cfg = parse_args(["--ovn-nb-addr=unix:/run/ovn/nb.sock, tcp:10.0.0.1:6641"], ENV)
    assert cfg.ovn_nb_addr == "unix:/run/ovn/nb.sock,tcp:10.0.0.1:6641"


def test_ssl_flags_explicit() -> None:
    cfg = parse_args(
        [
            "--ovn-nb-addr=ssl:[10.0.0.1]:6641",
            "--ovn-nb-ssl-key=/k",
            "--ovn-nb-ssl-cert=/c",
            "--ovn-nb-ssl-ca=/ca",
        ],
        ENV,
    )
    assert (cfg.ovn_nb_ssl_key, cfg.ovn_nb_ssl_cert, cfg.ovn_nb_ssl_ca) == ("/k", "/c", "/ca")


def test_leader_election_identity_and_namespace_from_env() -> None:
    cfg = parse(env={"POD_NAME": "ctrl-1", "KUBE_NAMESPACE": "ovn-system"})
    assert cfg.pod_name == "ctrl-1"
    assert cfg.pod_namespace == "ovn-system"
    assert cfg.leader_elect_resource_namespace == "ovn-system"
    cfg = parse("--leader-elect-resource-namespace=other", env={"POD_NAME": "x"})
    assert cfg.leader_elect_resource_namespace == "other"


def test_leader_election_falls_back_to_hostname_then_errors() -> None:
    assert parse(env={"HOSTNAME": "host-a"}).pod_name == "host-a"
    with pytest.raises(ConfigError, match="set POD_NAME"):
        parse(env={})
    assert parse("--leader-elect=false", env={}).leader_elect is False
    assert parse("check", env={}).command == "check"


def test_node_name_from_env() -> None:
    assert parse(env={"POD_NAME": "p", "KUBE_NODE_NAME": "node-7"}).node_name == "node-7"
    assert parse().node_name == ""


def test_strict_is_a_check_only_boolean() -> None:
    assert parse("check").strict is False
    assert parse("check", "--strict").strict is True
    assert parse("--strict", "check").command == "check"  # a bare boolean eats no word
    assert parse("check", "--strict=false").strict is False
    with pytest.raises(ConfigError, match="--strict only applies to the check command"):
        parse("--strict")


def test_pprof_port_is_an_alias_of_metrics_port() -> None:
    assert parse("--pprof-port=9999").metrics_port == 9999
    assert parse("--metrics-port=0").metrics_port == 0


def test_log_level_is_case_insensitive() -> None:
    cfg = parse("--log-level=DEBUG", "--log-format=JSON")
    assert (cfg.log_level, cfg.log_format) == ("debug", "json")


def test_help_lists_kube_ovn_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(["--help"], {})
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--ovn-nb-addr", "--kubeconfig", "--default-cidr", "--keep-vm-ip", "check"):
        assert flag in out
    assert build_parser().prog == "kube-ovn-controller"


def test_nb_addr_built_from_env_is_a_valid_remote() -> None:
    from controller.ovn.connection import parse_remotes

    cfg = parse(env={"POD_NAME": "p", "OVN_DB_IPS": "10.0.0.1,fd00::3"})
    assert parse_remotes(cfg.ovn_nb_addr) == tuple(cfg.ovn_nb_addr.split(","))
