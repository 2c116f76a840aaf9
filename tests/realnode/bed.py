"""The real-node tier's view of `controller.sandbox.demo.realnodes`: the bed the demo's
`--node real` runs (real control plane, NB, OVN data plane, the controller as a subprocess,
a CNI daemon per node, containerd + kubelet per node), plus the checks each scenario ends with:
`audit()` (`check --strict` against the bed: exit code and report) and `held_twice()`
(addresses that two live pods hold, by annotation or status.podIP).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controller.audit.check import run_check
from controller.config import parse_args
from controller.core.constants import ALLOCATED_ANNOTATION, IP_ADDRESS_ANNOTATION
from controller.sandbox.cluster.controlplane import RealControlPlane
from controller.sandbox.demo.realnodes import (
    CONTROLLER_NAMESPACE,
    NODES,
    RealNodeBed,
    open_real_node_bed,
    pod_ready,
    wait_rollout,
    workload_pod_spec,
)

Bed = RealNodeBed
ready = pod_ready
__all__ = [
    "NODES", "Bed", "audit", "held_twice", "open_bed", "ready", "wait_rollout",
    "workload_pod_spec",
]  # fmt: skip


@contextmanager
def open_bed(plane: RealControlPlane, kubelet: Path, workdir: Path) -> Iterator[Bed]:
    with open_real_node_bed(plane, workdir, kubelet=kubelet) as bed:
        yield bed


def held_twice(bed: Bed) -> dict[str, list[str]]:
    """Addresses that more than one live pod holds (annotation or status.podIP)."""
    holders: dict[str, list[str]] = {}
    for pod in bed.core.list_pod_for_all_namespaces().items:
        if pod.spec.host_network:
            continue
        ann = pod.metadata.annotations or {}
        ips: set[str] = set()
        if ann.get(ALLOCATED_ANNOTATION) == "true":
            ips.update(a for a in ann.get(IP_ADDRESS_ANNOTATION, "").split(",") if a)
        if pod.status and pod.status.pod_ip:
            ips.add(pod.status.pod_ip)
        for ip in ips:
            holders.setdefault(ip, []).append(f"{pod.metadata.namespace}/{pod.metadata.name}")
    return {ip: names for ip, names in holders.items() if len(names) > 1}


def audit(bed: Bed) -> tuple[int, str]:
    """`check --strict` (controller.audit.check) against the bed: exit code and report."""
    out = io.StringIO()
    argv = [
        "check",
        f"--kubeconfig={bed.admin_kubeconfig}",
        f"--ovn-nb-addr={bed.nb_server.remote}",
    ]
    config = parse_args(argv, {"KUBE_NAMESPACE": CONTROLLER_NAMESPACE})
    code = run_check(config, out=out, strict=True)
    return code, out.getvalue()
