"""The measured runs: the controller, the emulator's limit, the OVN limit, the libraries' floor."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from ovsdbapp.backend.ovs_idl import connection as ovsdbapp_connection
from ovsdbapp.schema.ovn_northbound.impl_idl import OvnNbApiIdlImpl

from bench.e2e.children import ApiPlane, ControllerProcess, Emulator, start_py_spy, stop_py_spy
from bench.e2e.clients import (
    PodWatch,
    RawWatch,
    Throughput,
    connection_pool,
    create_pods,
    throughput,
)
from bench.e2e.model import (
    CIDR,
    CLIENT_CPU,
    DEADLINE,
    FLOOR_PODS,
    GATEWAY,
    JOIN,
    JOIN_CIDR,
    JOIN_GATEWAY,
    NODES,
    NS,
    ROUTER,
    SWITCH,
    base_seed,
    cpu_times,
    memory_mib,
    pod_ip,
    pod_mac,
    port_spec,
)
from controller.core import router_policy as rp
from controller.core.constants import (
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    POLICY_SRC_IP,
    ROUTED_ANNOTATION,
)
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.sandbox.ovn.ovsdb import NbServer

# --- 1. the controller ---------------------------------------------------------------------------


@dataclass
class ControllerRun:
    result: Throughput
    per_pod: dict[str, float]  # API requests per pod, by "METHOD resource[/sub] code"
    ready_seconds: float
    ready_rss: float
    ip_template: dict[str, Any]
    alloc_patch: dict[str, Any]


def run_controller(
    n: int,
    workdir: Path,
    worker_num: int,
    profile: Path | None = None,
    plane: Callable[[Path, list[dict[str, Any]]], ApiPlane] = Emulator,
    rate: float | None = None,
) -> ControllerRun:
    """The controller's run for `n` pods, POSTed in a burst or at `rate` pods/s."""
    nb = NbServer(workdir / "nb").start()
    try:
        emulator = plane(workdir / "api", base_seed())
    except BaseException:
        nb.stop()
        raise
    controller = ControllerProcess(workdir, emulator.kubeconfig, nb.remote, worker_num)
    try:
        ready = controller.wait_ready()
        ready_rss = memory_mib(controller.pid)[0]
        names = [f"pod-{i:06d}" for i in range(n)]
        watch = PodWatch(emulator.url, n)
        watch.start()
        watch.opened.wait(30)
        emulator.reset()
        spy = start_py_spy(controller.pid, profile)
        (user0, sys0), emu0 = cpu_times(controller.pid), emulator.cpu_seconds()
        sent: dict[str, float] = {}
        create_pods(emulator.url, names, sent, rate)
        watch.wait()
        stop_py_spy(spy)
        user1, sys1 = cpu_times(controller.pid)
        cpu = user1 + sys1 - user0 - sys0
        emu_cpu = emulator.cpu_seconds() - emu0
        rss, hwm = memory_mib(controller.pid)
        counts = emulator.counts()
        watch.close()
        result = throughput(sent, watch)
        result.extra.update(
            {
                "controller CPU s": cpu,
                "controller CPU ms/pod": 1000 * cpu / n,
                "  of which system (kernel) ms/pod": 1000 * (sys1 - sys0) / n,
                "controller CPU % of wall": 100 * cpu / result.wall,
                "controller RSS MiB": rss,
                "controller peak RSS MiB": hwm,
                f"{emulator.name} CPU ms/pod": 1000 * emu_cpu / n,
            }
        )
        # The bench's own requests are not the controller's: its POSTs and its watch.
        counts["POST pods 201"] = counts.get("POST pods 201", 0) - n
        per_pod = {k: v / n for k, v in sorted(counts.items()) if v > 0}
        pool = connection_pool(emulator.url)
        sample = json.loads(pool.request("GET", f"/api/v1/namespaces/{NS}/pods/{names[0]}").data)
        alloc_patch = {
            k: v for k, v in sample["metadata"]["annotations"].items() if k != ROUTED_ANNOTATION
        }
        ips = json.loads(pool.request("GET", "/apis/kubeovn.io/v1/ips?limit=1").data)
        return ControllerRun(
            result,
            per_pod,
            ready,
            ready_rss,
            ips["items"][0],
            {"metadata": {"annotations": alloc_patch}},
        )
    finally:
        controller.stop()
        emulator.stop()
        nb.stop()


# --- 2. the emulator limit -----------------------------------------------------------------------

REPLAYED = (
    "GET ips 404",
    "GET ips 200",
    "POST ips 201",
    "PUT ips 200",
    "PATCH pods 200",
    "POST events 201",
    "PATCH events 200",
)


def _spread(rate: float, i: int) -> int:
    """How many of a call with `rate` per pod pod i makes, so that N pods make N * rate."""
    return int((i + 1) * rate) - int(i * rate)


def replay_ip(ctl: ControllerRun, name: str) -> dict[str, Any]:
    """The IP CR the controller wrote (its run's sample), for pod `name`."""
    body: dict[str, Any] = json.loads(json.dumps(ctl.ip_template))
    body["metadata"] = {"name": f"{name}.{NS}", "labels": body["metadata"].get("labels", {})}
    body["spec"]["podName"] = name
    return body


def run_emulator_limit(
    n: int,
    workdir: Path,
    worker_num: int,
    ctl: ControllerRun,
    plane: Callable[[Path, list[dict[str, Any]]], ApiPlane] = Emulator,
) -> Throughput:
    emulator = plane(workdir / "api-limit", base_seed())
    rates = {k: v for k, v in ctl.per_pod.items() if k in REPLAYED}
    pod_patches = rates.pop("PATCH pods 200", 2.0)
    index: dict[str, int] = {}
    add_q: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    update_q: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    errors: list[str] = []

    def on_added(name: str) -> None:
        add_q.put(name)

    def call(
        pool: urllib3.HTTPConnectionPool,
        method: str,
        path: str,
        body: Any,
        ctype: str = "application/json",
    ) -> None:
        data = None if body is None else json.dumps(body).encode()
        resp = pool.request(method, path, body=data, headers={"Content-Type": ctype})
        if resp.status >= 500:
            errors.append(f"{method} {path}: {resp.status}")

    def event_body(name: str) -> dict[str, Any]:
        return {
            "metadata": {"generateName": f"{name}."},
            "reason": "Bench",
            "message": "replay",
            "type": "Normal",
            "involvedObject": {"kind": "Pod", "namespace": NS, "name": name},
        }

    # the replaying threads' own CPU: what the same requests cost a client through urllib3
    # alone (no watch decoding, no logic), the floor under the controller's API side
    client_cpu: dict[int, float] = {}

    def add_worker() -> None:
        pool = connection_pool(emulator.url)
        pods_path = f"/api/v1/namespaces/{NS}/pods"
        cpu0 = time.thread_time()
        while (name := add_q.get()) is not None:
            i = index.setdefault(name, len(index))
            ip_path = f"/apis/kubeovn.io/v1/ips/{name}.{NS}"
            for key, rate in rates.items():
                for _ in range(_spread(rate, i)):
                    method, resource, _code = key.split()
                    if resource == "ips" and method == "GET":
                        call(pool, "GET", ip_path, None)
                    elif resource == "ips" and method == "POST":
                        call(pool, "POST", "/apis/kubeovn.io/v1/ips", replay_ip(ctl, name))
                    elif resource == "ips":
                        call(pool, "PUT", ip_path, replay_ip(ctl, name))
                    elif method == "POST":
                        call(pool, "POST", f"/api/v1/namespaces/{NS}/events", event_body(name))
            # all pod PATCHes but the last carry the allocation; the last one is `routed`
            for _ in range(max(1, _spread(pod_patches, i) - 1)):
                call(
                    pool,
                    "PATCH",
                    f"{pods_path}/{name}",
                    ctl.alloc_patch,
                    "application/merge-patch+json",
                )
            update_q.put(name)
            client_cpu[threading.get_ident()] = time.thread_time() - cpu0

    def update_worker() -> None:
        pool = connection_pool(emulator.url)
        body = {"metadata": {"annotations": {ROUTED_ANNOTATION: "true"}}}
        cpu0 = time.thread_time()
        while (name := update_q.get()) is not None:
            call(
                pool,
                "PATCH",
                f"/api/v1/namespaces/{NS}/pods/{name}",
                body,
                "application/merge-patch+json",
            )
            client_cpu[threading.get_ident()] = time.thread_time() - cpu0

    informers = [
        RawWatch(emulator.url, "/api/v1/pods"),
        RawWatch(emulator.url, "/apis/kubeovn.io/v1/ips"),
    ]
    for w in informers:
        w.start()
    workers = [threading.Thread(target=add_worker, daemon=True) for _ in range(worker_num)]
    workers += [threading.Thread(target=update_worker, daemon=True) for _ in range(worker_num)]
    try:
        for worker in workers:
            worker.start()
        names = [f"pod-{i:06d}" for i in range(n)]
        watch = PodWatch(emulator.url, n, on_added)
        watch.start()
        watch.opened.wait(30)
        emu0 = emulator.cpu_seconds()
        sent: dict[str, float] = {}
        create_pods(emulator.url, names, sent)
        watch.wait()
        emu_cpu = emulator.cpu_seconds() - emu0
        watch.close()
        if errors:
            raise RuntimeError(f"{len(errors)} replayed calls failed, first: {errors[0]}")
        result = throughput(sent, watch)
        result.extra[f"{emulator.name} CPU ms/pod"] = 1000 * emu_cpu / n
        result.extra[CLIENT_CPU] = 1000 * sum(client_cpu.values()) / n
        return result
    finally:
        for _ in range(worker_num):
            add_q.put(None)
            update_q.put(None)
        for w in informers:
            w.stop.set()
        emulator.stop()


# --- 3. the OVN limit ----------------------------------------------------------------------------


def ensure_topology(client: OvsdbappNbClient) -> None:
    client.ensure_logical_router(ROUTER)
    client.ensure_logical_switch(JOIN, ROUTER, JOIN_CIDR, JOIN_GATEWAY, {"vpc": ROUTER})
    client.ensure_logical_switch(SWITCH, ROUTER, CIDR, GATEWAY, {"vpc": ROUTER})


def run_ovn_limit(n: int, workdir: Path, worker_num: int) -> Throughput:
    nb = NbServer(workdir / "nb-limit").start()
    client = OvsdbappNbClient.from_addr(nb.remote, timeout=60.0)
    try:
        ensure_topology(client)
        route_q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        add_q: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        sent: dict[str, float] = {}
        watch = PodWatch("http://unused:0", n)  # only its result maps are used
        lock = threading.Lock()

        def add_worker() -> None:
            while (i := add_q.get()) is not None:
                client.create_port(port_spec(f"pod-{i:06d}", i))
                with lock:
                    watch.allocated[f"pod-{i:06d}"] = time.monotonic()
                route_q.put(i)

        def update_worker() -> None:
            while (i := route_q.get()) is not None:
                name, ip = f"pod-{i:06d}", pod_ip(i)
                node = f"node-{i % NODES}"
                aset = rp.set_name(SWITCH, node, 4)
                ids = rp.ids(rp.KIND_GATEWAY, 4, subnet=SWITCH, node=node)
                for cidr, subnet in ((CIDR, SWITCH), (JOIN_CIDR, JOIN)):
                    client.add_router_policy(
                        ROUTER,
                        rp.SUBNET_PRIORITY,
                        rp.dst_match(cidr),
                        "allow",
                        (),
                        rp.ids(rp.KIND_SUBNET, 4, subnet=subnet),
                    )
                client.add_router_policy(
                    ROUTER,
                    rp.GATEWAY_PRIORITY,
                    rp.src_set_match(aset, 4),
                    "reroute",
                    [f"100.64.0.{i % NODES + 2}"],
                    ids,
                )
                client.add_address_set_addresses(aset, [ip], ids)
                client.update_nat_rule(
                    NAT_TYPE_DNAT_AND_SNAT, ip, "", ROUTER, pod_mac(i), f"{name}.{NS}"
                )
                client.update_nat_rule(NAT_TYPE_SNAT, ip, "", ROUTER)
                client.delete_static_route(ip, ROUTER, POLICY_SRC_IP)
                with lock:
                    watch.routed[name] = time.monotonic()

        threads = [threading.Thread(target=add_worker, daemon=True) for _ in range(worker_num)]
        threads += [threading.Thread(target=update_worker, daemon=True) for _ in range(worker_num)]
        for t in threads:
            t.start()
        for i in range(n):
            sent[f"pod-{i:06d}"] = time.monotonic()
            add_q.put(i)
        cpu0 = time.process_time()  # nothing else runs in this process meanwhile
        deadline = time.monotonic() + DEADLINE
        while len(watch.routed) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"OVN limit: {len(watch.routed)}/{n} routed in {DEADLINE}s")
            time.sleep(0.05)
        for _ in range(worker_num):
            add_q.put(None)
            route_q.put(None)
        result = throughput(sent, watch)
        result.extra[CLIENT_CPU] = 1000 * (time.process_time() - cpu0) / n
        # every pod is "created" at once here: the latency is queueing, not meaningful
        result.p50_allocated = result.p99_allocated = result.p50_routed = 0.0
        result.p99_routed = 0.0
        return result
    finally:
        client.close()
        nb.stop()


# --- 3b. the libraries' own floor -------------------------------------------------------------


@dataclass
class Floor:
    """CPU per pod of the bare libraries doing the controller's per-pod writes from one thread,
    nothing else in the process: what no controller built on them can go below."""

    n: int
    api_ms: float  # urllib3 (the kubernetes client's transport): POST ip, PATCH pod
    ovn_ms: float  # ovsdbapp's own NB API: one transaction of lsp_add, addresses, address set


def run_floor(n: int, workdir: Path, ctl: ControllerRun) -> Floor:
    n = min(n, FLOOR_PODS)
    names = [f"pod-{i:06d}" for i in range(n)]
    emulator = Emulator(workdir / "api", base_seed())
    try:
        create_pods(emulator.url, names, {})  # not timed: the pods the PATCHes need
        pool = connection_pool(emulator.url)
        patch = json.dumps(ctl.alloc_patch).encode()
        cpu0 = time.thread_time()
        for name in names:
            ip = json.dumps(replay_ip(ctl, name)).encode()
            for method, path, data, ctype in (
                ("POST", "/apis/kubeovn.io/v1/ips", ip, "application/json"),
                (
                    "PATCH",
                    f"/api/v1/namespaces/{NS}/pods/{name}",
                    patch,
                    "application/merge-patch+json",
                ),
            ):
                resp = pool.request(method, path, body=data, headers={"Content-Type": ctype})
                if resp.status >= 300:
                    raise RuntimeError(f"floor: {method} {path}: {resp.status}")
        api_ms = 1000 * (time.thread_time() - cpu0) / n
    finally:
        emulator.stop()

    nb = NbServer(workdir / "nb").start()
    conn = None
    try:
        idl = ovsdbapp_connection.OvsdbIdl.from_server(nb.remote, "OVN_Northbound")
        conn = ovsdbapp_connection.Connection(idl, timeout=60)
        api = OvnNbApiIdlImpl(conn)
        aset = rp.set_name(SWITCH, "node-0", 4)
        with api.transaction(check_error=True) as txn:
            txn.add(api.ls_add(SWITCH))
            txn.add(api.address_set_add(aset))
        # the process's CPU, not the thread's: ovsdbapp commits on its own connection thread
        cpu0 = time.process_time()
        for i, name in enumerate(names):
            port = f"{name}.{NS}"
            with api.transaction(check_error=True) as txn:
                txn.add(api.lsp_add(SWITCH, port))
                txn.add(api.lsp_set_addresses(port, [f"{pod_mac(i)} {pod_ip(i)}"]))
                txn.add(api.address_set_add_addresses(aset, [pod_ip(i)]))
        ovn_ms = 1000 * (time.process_time() - cpu0) / n
    finally:
        if conn is not None:
            conn.stop()
        nb.stop()
    return Floor(n, api_ms, ovn_ms)
