"""kube-ovn v1.8's controller command line (its install.sh Deployment) parses unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.config import UNSUPPORTED, parse_args
from controller.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ENV = {"POD_NAME": "kube-ovn-controller-6d8f7-x2x4q", "KUBE_NAMESPACE": "kube-system"}

#: dist/images/install.sh (v1.8.18) with ENABLE_LB=false ENABLE_NP=false and its other defaults
#: (EXCLUDE_IPS and VLAN_INTERFACE_NAME empty), as start-controller.sh passes them on: the NB and
#: SB addresses first, then the Deployment's args word for word.
KUBE_OVN_V18_ARGS = (
    "/kube-ovn/start-controller.sh",
    "--ovn-nb-addr=tcp:[172.18.0.2]:6641",
    "--ovn-sb-addr=tcp:[172.18.0.2]:6642",
    "--default-cidr=10.16.0.0/16",
    "--default-gateway=10.16.0.1",
    "--default-exclude-ips=",
    "--node-switch-cidr=100.64.0.0/16",
    "--network-type=geneve",
    "--default-interface-name=",
    "--default-vlan-id=100",
    "--pod-nic-type=veth-pair",
    "--enable-lb=false",
    "--enable-np=false",
    "--enable-external-vpc=true",
    "--logtostderr=false",
    "--alsologtostderr=true",
    "--log_file=/var/log/kube-ovn/kube-ovn-controller.log",
)


def test_install_sh_args_parse_with_their_meaning() -> None:
    cfg = parse_args(list(KUBE_OVN_V18_ARGS), {**ENV, "KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert cfg.ovn_nb_addr == "tcp:[172.18.0.2]:6641"
    assert cfg.ovn_sb_addr == "tcp:[172.18.0.2]:6642"
    assert (cfg.default_cidr, cfg.default_gateway) == ("10.16.0.0/16", "10.16.0.1")
    assert cfg.default_exclude_ips == ("10.16.0.1",)  # empty: the gateway, as kube-ovn
    assert cfg.default_vlan_id == 100 and cfg.default_interface_name == ""
    assert (cfg.logtostderr, cfg.alsologtostderr) == (False, True)
    assert cfg.log_file == "/var/log/kube-ovn/kube-ovn-controller.log"
    assert cfg.log_format == "klog"  # inside a cluster
    assert cfg.enable_external_vpc is True


def test_every_v18_flag_is_accepted_in_go_syntax() -> None:
    cfg = parse_args(
        [
            "--ovn-nb-addr",
            "tcp:[10.0.0.1]:6641",
            "--ovn-timeout=30",
            "--kubeconfig=",
            "--default-ls=ovn-default",
            "--cluster-router=ovn-cluster",
            "--node-switch=join",
            "--node-switch-gateway=100.64.0.1",
            "--cluster-tcp-loadbalancer=cluster-tcp-loadbalancer",
            "--cluster-udp-loadbalancer=cluster-udp-loadbalancer",
            "--cluster-tcp-session-loadbalancer=cluster-tcp-session-loadbalancer",
            "--cluster-udp-session-loadbalancer=cluster-udp-session-loadbalancer",
            "--worker-num",
            "5",
            "--pprof-port=10661",
            "--enable-pprof=false",
            "--default-provider-name=provider",
            "--default-vlan-name=ovn-vlan",
            "--enable-eip-snat",
            "--enable-ecmp=false",
            "--keep-vm-ip=true",
            "-v=4",
            "--log_dir=/tmp/x",
            "--log_file_max_size=200",
            "-stderrthreshold=WARNING",
            "--skip_headers=false",
            "--add_dir_header",
            "--vmodule=pod=5",
        ],
        ENV,
    )
    assert (cfg.ovn_timeout, cfg.worker_num, cfg.metrics_port) == (30, 5, 10661)
    assert cfg.enable_keep_vm_ip is True and cfg.enable_eip_snat is True
    assert (cfg.log_verbosity, cfg.log_level) == (4, "debug")
    assert (cfg.log_dir, cfg.log_file_max_size, cfg.stderrthreshold) == ("/tmp/x", 200, "WARNING")
    assert cfg.log_format == "text"  # outside a cluster


@pytest.mark.parametrize(("flag", "missing", "instead"), UNSUPPORTED)
def test_what_is_not_provided_stops_with_one_sentence(
    flag: str, missing: str, instead: str
) -> None:
    for spelling in (f"{flag}=true", flag, f"{flag}=1"):
        with pytest.raises(ConfigError) as err:
            parse_args(["--ovn-nb-addr=tcp:[10.0.0.1]:6641", spelling], ENV)
        assert str(err.value) == f"{flag}=true: {missing}; {instead}"
        assert "\n" not in str(err.value)


def test_klog_verbosity_and_log_level() -> None:
    nb = "--ovn-nb-addr=tcp:[10.0.0.1]:6641"
    assert parse_args([nb, "--v=2"], ENV).log_level == "info"
    assert parse_args([nb, "--v", "3"], ENV).log_level == "debug"
    assert parse_args([nb, "--v=5", "--log-level=warning"], ENV).log_level == "warning"
    assert parse_args([nb, "--stderrthreshold=2"], ENV).stderrthreshold == "ERROR"
    with pytest.raises(ConfigError, match="--stderrthreshold"):
        parse_args([nb, "--stderrthreshold=LOUD"], ENV)
    with pytest.raises(ConfigError, match="--v must be >= 0"):
        parse_args([nb, "--v=-1"], ENV)


def test_version_prints_and_exits_zero() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cmd.controller", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("kube-ovn-controller ")
    assert proc.stdout.split()[1][0].isdigit()


def test_enable_lb_true_stops_the_process_with_exit_2() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cmd.controller",
            "--ovn-nb-addr=tcp:[10.0.0.1]:6641",
            "--enable-lb",
        ],
        cwd=ROOT,
        env={**ENV, "PATH": "/usr/bin:/bin", **_pythonpath()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --enable-lb=true: Services through OVN load balancers are not provided by this "
        "controller; serve Services with kube-proxy and set --enable-lb=false"
    ]


def _pythonpath() -> dict[str, str]:
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
