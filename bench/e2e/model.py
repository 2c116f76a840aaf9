"""Constants of a run, process accounting (/proc) and the objects every run creates."""

from __future__ import annotations

import os
import re
from typing import Any

from controller.core.annotations import PodNetworkAnnotations, apply_allocation
from controller.core.constants import (
    ROUTED_ANNOTATION,
)
from controller.ovn.api import PortSpec
from controller.pod_logic import build_ip_cr
from tests.e2e.helpers import node as node_obj
from tests.e2e.helpers import pod as pod_obj

NS = "bench"
NODES = 4
CIDR = "10.16.0.0/16"
GATEWAY = "10.16.0.1"
ROUTER = "ovn-cluster"
SWITCH = "ovn-default"
JOIN = "join"
JOIN_CIDR = "100.64.0.0/16"
JOIN_GATEWAY = "100.64.0.1"
CREATORS = 4
REAL_NAME = "kube-apiserver+etcd"  # bench/realplane.py RealApi.name
DEADLINE = 600.0  # seconds, the bound of every wait of a run
FLOOR_PODS = 1000  # enough for a stable per-pod figure
CLIENT_CPU = "replay client CPU ms/pod"  # the limits' own client threads, see the runs
CLK_TCK = os.sysconf("SC_CLK_TCK")
LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z")


# --- process accounting --------------------------------------------------------------------------


def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process (all its threads) in seconds, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB, from /proc/<pid>/status."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


# --- objects -------------------------------------------------------------------------------------


def nodes() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Node", **node_obj(f"node-{i}", f"172.18.0.{i + 2}")}
        for i in range(NODES)
    ]


def base_seed() -> list[dict[str, Any]]:
    # kube-system and default exist in a new emulator store
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, *nodes()]


def pod_ip(i: int) -> str:
    n = i + 2  # .0 is the network, .1 the gateway
    return f"10.16.{n >> 8}.{n & 255}"


def pod_mac(i: int) -> str:
    return f"00:00:00:{(i >> 16) & 255:02X}:{(i >> 8) & 255:02X}:{i & 255:02X}"


def port_spec(name: str, i: int) -> PortSpec:
    return PortSpec(
        name=f"{name}.{NS}",
        switch=SWITCH,
        mac=pod_mac(i),
        ips=(pod_ip(i),),
        cidrs=(CIDR,),
        pod_name=name,
        pod_namespace=NS,
    )


def existing_pod(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """An allocated and routed pod, and its IP CR, as the controller would have left them."""
    name = f"old-{i:06d}"
    allocation = PodNetworkAnnotations(
        ip_address=pod_ip(i),
        mac_address=pod_mac(i),
        cidr=CIDR,
        gateway=GATEWAY,
        logical_switch=SWITCH,
        network_type="geneve",
    )
    annotations = apply_allocation({}, allocation, pod_nic_type="veth-pair")
    annotations[ROUTED_ANNOTATION] = "true"
    node_name = f"node-{i % NODES}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        **pod_obj(name, NS, annotations=annotations, node_name=node_name),
    }
    ip_cr = build_ip_cr(
        pod_name=name,
        ip=pod_ip(i),
        mac=pod_mac(i),
        subnet=SWITCH,
        namespace=NS,
        node_name=node_name,
        provider="ovn",
        pod_type="",
        node_switch=JOIN,
    )
    return pod, ip_cr
