"""The chart and the controller agree: every rendered argument parses into the intended Config.

The Deployment's args and env are fed to `controller.config.parse_args` exactly as the container
would receive them, so a flag renamed in the controller, or a value the chart formats in a way
the controller refuses, fails here rather than in a crash-looping pod.
"""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from controller import config as controller_config
from controller.core import constants
from tests.chart.helpers import CHART_DIR, NAMESPACE, container, load_json, render

# What the downward API and Kubernetes' service links put in the container's environment.
ENVIRON = {
    "POD_NAME": "kopc-kube-ovn-pod-controller-5d9c7-abcde",
    "KUBE_NAMESPACE": NAMESPACE,
    "OVN_NB_SERVICE_HOST": "10.96.0.10",
    "OVN_NB_SERVICE_PORT": "6641",
}
#: Flags the chart sets itself and keeps out of `config` (values.schema.json refuses them there).
CHART_OWNED = {
    "--ovn-nb-addr",
    "--ovn-nb-ssl-key",
    "--ovn-nb-ssl-cert",
    "--ovn-nb-ssl-ca",
    "--metrics-addr",
    "--metrics-port",
}
#: Controller flags the chart deliberately never passes.
NOT_EXPOSED = {
    "--kubeconfig",  # in-cluster config
    "--leader-elect-resource-namespace",  # the release namespace, where the Role grants the Lease
    "--pprof-port",  # kube-ovn's alias of --metrics-port
    "--strict",  # an option of the one-shot `check` command, not of the controller
    "--dataplane",  # `check` only, like --strict
    "--ovn-sb-addr",
    "--ovs-db",
    "--help",
    "-h",
}


def _controller_flags() -> set[str]:
    parser = controller_config.build_parser()
    return {option for action in parser._actions for option in action.option_strings}


def _parse(rendered_values: dict[str, Any], chart: helm_python.Chart) -> Any:
    c = container(render(chart, rendered_values))
    environ = dict(ENVIRON)
    for env in c["env"]:
        if "value" in env:
            environ[env["name"]] = env["value"]
    return controller_config.parse_args(c["args"], environ)


def test_config_keys_are_the_controllers_flags() -> None:
    schema = load_json(CHART_DIR / "values.schema.json")
    config_flags = {f"--{key}" for key in schema["properties"]["config"]["properties"]}
    assert config_flags.isdisjoint(CHART_OWNED)
    assert config_flags | CHART_OWNED | NOT_EXPOSED == _controller_flags()


def test_schema_enums_match_the_controller() -> None:
    config = load_json(CHART_DIR / "values.schema.json")["properties"]["config"]["properties"]

    def enum(key: str) -> set[str]:
        (choice,) = [s for s in config[key]["anyOf"] if "enum" in s]
        return set(choice["enum"])

    assert enum("network-type") == set(constants.NETWORK_TYPES)
    assert enum("pod-nic-type") == set(constants.POD_NIC_TYPES)
    assert enum("log-level") == set(controller_config.LOG_LEVELS)
    assert enum("log-format") == set(controller_config.LOG_FORMATS)


def test_default_render_parses_to_the_controllers_defaults(chart: helm_python.Chart) -> None:
    got = _parse({}, chart)
    want = controller_config.parse_args([], ENVIRON)
    assert got == want
    assert got.ovn_nb_addr == "tcp:[10.96.0.10]:6641"
    assert got.leader_elect is True
    assert got.leader_elect_resource_namespace == NAMESPACE
    assert got.metrics_port == 10660


def test_overridden_values_reach_the_config(chart: helm_python.Chart) -> None:
    got = _parse(
        {
            "replicaCount": 1,
            "config": {
                "default-cidr": ["10.20.0.0/16", "fd00:20::/64"],
                "default-exclude-ips": ["10.20.0.1..10.20.0.9"],
                "node-switch-cidr": "100.65.0.0/16",
                "network-type": "vlan",
                "default-interface-name": "eth1",
                "default-vlan-id": 100,
                "pod-nic-type": "internal-port",
                "keep-vm-ip": True,
                "enable-node-controller": False,
                "worker-num": 12,
                "gc-interval": 90,
                "routing-resync-period": "2m",
                "inspect-interval": "1m30s",
                "leader-elect": False,
                "log-level": "debug",
                "log-format": "json",
                "ovn-timeout": 1000000,
            },
            "metrics": {"port": 9100, "bindAddress": "::"},
            "ovn": {"nbAddr": "tcp:[10.0.0.1]:6641,tcp:[10.0.0.2]:6641"},
        },
        chart,
    )
    assert got.default_cidr == "10.20.0.0/16,fd00:20::/64"
    assert got.default_gateway == "10.20.0.1,fd00:20::1"
    assert got.default_exclude_ips == ("10.20.0.1..10.20.0.9",)
    assert got.node_switch_cidr == "100.65.0.0/16"
    assert (got.network_type, got.default_interface_name, got.default_vlan_id) == (
        "vlan",
        "eth1",
        100,
    )
    assert got.pod_nic_type == "internal-port"
    assert got.enable_keep_vm_ip is True
    assert got.enable_node_controller is False
    assert got.worker_num == 12
    assert got.gc_interval == 90.0
    assert got.routing_resync_period == 120.0
    assert got.inspect_interval == 90.0
    assert got.leader_elect is False
    assert (got.log_level, got.log_format) == ("debug", "json")
    assert got.ovn_timeout == 1000000
    assert (got.metrics_addr, got.metrics_port) == ("::", 9100)
    assert got.ovn_nb_addr == "tcp:[10.0.0.1]:6641,tcp:[10.0.0.2]:6641"


@pytest.mark.parametrize("nb_addr", ["ssl:[10.0.0.1]:6641", ""], ids=["explicit", "service"])
def test_ssl_values_reach_the_config(chart: helm_python.Chart, nb_addr: str) -> None:
    values = {"ovn": {"nbAddr": nb_addr, "ssl": {"enabled": True, "mountPath": "/etc/ovn-tls"}}}
    got = _parse(values, chart)
    # Without an explicit address the ENABLE_SSL env the chart sets turns the Service into ssl:.
    assert got.ovn_nb_addr == (nb_addr or "ssl:[10.96.0.10]:6641")
    assert (got.ovn_nb_ssl_key, got.ovn_nb_ssl_cert, got.ovn_nb_ssl_ca) == (
        "/etc/ovn-tls/key",
        "/etc/ovn-tls/cert",
        "/etc/ovn-tls/cacert",
    )
