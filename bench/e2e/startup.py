"""Start-up with existing pods: time to /readyz by phase, and the v1.8 route migration."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench.e2e.children import ControllerProcess, Emulator, start_py_spy, stop_py_spy
from bench.e2e.model import (
    CIDR,
    DEADLINE,
    JOIN,
    JOIN_CIDR,
    LOG_TS,
    NODES,
    ROUTER,
    SWITCH,
    base_seed,
    cpu_seconds,
    existing_pod,
    memory_mib,
    pod_ip,
    port_spec,
)
from bench.e2e.runs import ensure_topology
from bench.routing import seed_routes
from controller.core import router_policy as rp
from controller.core.constants import (
    POLICY_SRC_IP,
)
from controller.ovn.api import PortSpec
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer

# --- 4. start-up with existing pods --------------------------------------------------------------


@dataclass
class Startup:
    existing: int
    seed_seconds: float
    ready_seconds: float
    rss_at_ready: float
    peak_rss: float
    cpu_seconds: float
    phases: dict[str, float]
    # with --existing-routes=v18: from /readyz until the last src-ip route is gone, and CPU then
    migration_seconds: float = 0.0
    migration_cpu_seconds: float = 0.0
    migrated_pods: int = 0  # the most pods one migration scan queued (the rest: gc)


def _log_time(line: str) -> float | None:
    m = LOG_TS.match(line)
    if m is None:
        return None
    return datetime.fromisoformat(m.group(1) + "+00:00").timestamp()


def startup_phases(lines: list[str], spawned: float, ready_at: float) -> dict[str, float]:
    """Phases of the start-up from the controller's log (timestamps at ms resolution)."""
    marks: dict[str, float] = {}
    ipam_seconds = 0.0
    for line in lines:
        t = _log_time(line)
        if t is None:
            continue
        if "leading: starting informers" in line:
            marks.setdefault("leading", t)
        elif "seconds to initialize IPAM" in line:
            marks.setdefault("ipam_done", t)
            m = re.search(r"take ([\d.]+) seconds", line)
            ipam_seconds = float(m.group(1)) if m else 0.0
        elif "ms to collect garbage" in line and "started" not in marks:
            marks["gc_done"] = t  # the start-up gc is two passes (orphaned twice to delete)
        elif "controller started:" in line:
            marks.setdefault("started", t)
    phases: dict[str, float] = {}
    if "leading" in marks:
        phases["spawn to leading (imports, NB schema)"] = marks["leading"] - spawned
    if "leading" in marks and "ipam_done" in marks:
        # the NB's initial dump comes in on its own thread from before the election on
        phases["informer lists, NB dump, bootstrap"] = (
            marks["ipam_done"] - ipam_seconds - marks["leading"]
        )
        phases["IPAM rebuild (its log)"] = ipam_seconds
    if "ipam_done" in marks and "gc_done" in marks:
        phases["start-up gc (two passes)"] = marks["gc_done"] - marks["ipam_done"]
    last = marks.get("gc_done", marks.get("ipam_done"))
    if last is not None and "started" in marks:
        phases["subnet/namespace/node workers to started"] = marks["started"] - last
    if "started" in marks:
        phases["started to /readyz 200 seen"] = ready_at - marks["started"]
    return phases


def _seed_policies(client: OvsdbappNbClient, existing: int) -> None:
    for cidr, subnet in ((CIDR, SWITCH), (JOIN_CIDR, JOIN)):
        ids = rp.ids(rp.KIND_SUBNET, 4, subnet=subnet)
        client.add_router_policy(ROUTER, rp.SUBNET_PRIORITY, rp.dst_match(cidr), "allow", (), ids)
    for k in range(NODES):
        node = f"node-{k}"
        aset = rp.set_name(SWITCH, node, 4)
        ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=SWITCH, node=node)
        client.add_address_set_addresses(aset, [pod_ip(i) for i in range(k, existing, NODES)], ids)
        client.add_router_policy(
            ROUTER,
            rp.GATEWAY_PRIORITY,
            rp.src_set_match(aset, 4),
            "reroute",
            [f"100.64.0.{k + 2}"],
            ids,
        )


def run_startup(
    existing: int,
    workdir: Path,
    worker_num: int,
    profile: Path | None = None,
    routes: str = "none",
) -> Startup:
    t0 = time.monotonic()
    seed = base_seed()
    specs: list[PortSpec] = []
    for i in range(existing):
        pod, ip_cr = existing_pod(i)
        seed += [pod, ip_cr]
        specs.append(port_spec(pod["metadata"]["name"], i))
    nb = NbServer(workdir / "nb-startup").start()
    emulator: Emulator | None = None
    controller: ControllerProcess | None = None
    try:
        with OvsdbappNbClient.from_addr(nb.remote, timeout=120.0) as client:
            ensure_topology(client)
            for k in range(0, len(specs), 1000):
                client.create_ports(specs[k : k + 1000])
        if routes == "policies":
            # the routing rows of a migrated cluster: one address set and policy per node
            with OvsdbappNbClient.from_addr(nb.remote, timeout=120.0) as client:
                _seed_policies(client, existing)
        if routes == "v18":
            # every existing pod carries kube-ovn v1.8's src-ip route: the start-up migrates them
            seed_routes(nb.remote, range(existing), pod_ip, lambda i: f"100.64.0.{i % NODES + 2}")
        emulator = Emulator(workdir / "api-startup", seed)
        seed_seconds = time.monotonic() - t0
        controller = ControllerProcess(workdir, emulator.kubeconfig, nb.remote, worker_num)
        spy = start_py_spy(controller.pid, profile)
        ready = controller.wait_ready()
        ready_at = time.time()
        stop_py_spy(spy)
        rss, hwm = memory_mib(controller.pid)
        cpu = cpu_seconds(controller.pid)
        phases = startup_phases(controller.log_lines(), controller.started, ready_at)
        result = Startup(existing, seed_seconds, ready, rss, hwm, cpu, phases)
        if routes == "v18":
            with OvsdbappNbClient.from_addr(nb.remote, timeout=120.0) as reader:
                deadline = time.monotonic() + DEADLINE
                while any(r.policy == POLICY_SRC_IP for r in reader.list_static_routes(ROUTER)):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"src-ip routes still there after {DEADLINE}s")
                    time.sleep(0.2)
            result.migration_seconds = time.time() - ready_at
            result.migration_cpu_seconds = cpu_seconds(controller.pid) - cpu
            queued = [
                int(m.group(1))
                for line in controller.log_lines()
                if (m := re.search(r"static routes of (\d+) pods", line))
            ]
            result.migrated_pods = max(queued, default=0)
        return result
    finally:
        if controller is not None:
            controller.stop()
        if emulator is not None:
            emulator.stop()
        nb.stop()
