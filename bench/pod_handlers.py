"""Pod handler throughput: the PodController's add -> update -> delete cycle with in-memory ports.

Usage: python bench/pod_handlers.py [--quick] [--pods N] [--workers W]

What is measured (all in one run, same machine, same fakes):

* baseline: the pure part of an add, per pod: `pod_logic` planning plus the IPAM allocation
  (no NB, no API writes) - the floor the handler cannot go under;
* serial: the handlers run inline on one thread (`process_next_work_item` per item), for N pods
  through add, update (route + NAT) and delete;
* threaded: `PodController.run_workers(W)` over the same N pods, the test thread playing the
  informer (it feeds the API server's changes back into the cache).

The NB port is `FakeNbClient` (in-memory rows; each verb costs what it touches) and the API
server is `FakeKubeApi`, so the figures are the controller's own overhead (models, locking,
queues, logging) and not a prediction of a real cluster, where kube-ovn reports about 0.1-0.2 s
of handler time per pod (kubeovn/kube-ovn#2495). Python threads share the GIL, so the threaded
ratio shows queueing overhead rather than a speed-up.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Callable

import harness  # noqa: F401 - puts the repository root on sys.path

from controller import pod_logic as pl
from controller.core import annotations as ann
from controller.core.model import Pod, PodNet, ProviderType, Subnet
from controller.ipam import IPAM
from controller.queues import RealClock
from tests.pod.env import NODE, Env, raw_pod, standard_env


def _env() -> Env:
    return standard_env(clock=RealClock())


def baseline(n: int) -> float:
    subnet = Subnet.from_dict(
        {"metadata": {"name": "ovn-default"}, "spec": {"cidrBlock": "10.16.0.0/16"}}
    )
    ipam = IPAM()
    ipam.add_or_update_subnet("ovn-default", "10.16.0.0/16", ["10.16.0.1"])
    net = PodNet(ProviderType.ORIGINAL, "ovn", subnet, True)
    raws = [raw_pod(f"p{i}", node=NODE) for i in range(n)]
    start = time.perf_counter()
    for raw in raws:
        pod = Pod.from_dict(raw)
        pl.validate_pod_network(pod.annotations)
        request = pl.plan_address_request(pod, net, [], keep_vm_ip=False)
        v4, v6, mac, got = pl.acquire_address(ipam, request, [])
        allocation = pl.build_pod_allocation(net, got, v4=v4, v6=v6, mac=mac)
        pl.build_pod_annotations(pod.annotations, net, allocation, pod_nic_type="veth-pair")
    return time.perf_counter() - start


def _lifecycle_keys(env: Env, n: int) -> list[str]:
    keys = []
    for i in range(n):
        env.create_pod(raw_pod(f"p{i}", node=NODE))
        keys.append(f"default/p{i}")
    return keys


def serial(n: int) -> tuple[float, float]:
    env = _env()
    try:
        keys = _lifecycle_keys(env, n)
        start = time.perf_counter()
        env.converge(rounds=50)
        up = time.perf_counter() - start
        for key in keys:
            env.kube.pods.pop(key)
        start = time.perf_counter()
        env.converge(rounds=50)
        down = time.perf_counter() - start
        assert env.pod_ports() == []
        return up, down
    finally:
        env.close()


def _wait_for(condition: Callable[[], bool], tick: threading.Event, timeout: float = 600) -> None:
    """Poll `condition` until true; a stuck run fails instead of hanging the benchmark."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"threaded run did not converge within {timeout:.0f} s")
        tick.wait(0.02)


def threaded(n: int, workers: int) -> tuple[float, float]:
    env = _env()
    stop = threading.Event()
    threads = env.controller.run_workers(workers, stop)
    tick = threading.Event()
    try:
        start = time.perf_counter()
        keys = _lifecycle_keys(env, n)

        def routed() -> bool:
            env.sync_all()
            return all(
                ann.is_routed(env.kube.pods[k]["metadata"].get("annotations") or {}) for k in keys
            )

        _wait_for(routed, tick)
        up = time.perf_counter() - start
        start = time.perf_counter()
        for key in keys:
            env.kube.pods.pop(key)
        env.sync_all()
        _wait_for(lambda: not env.pod_ports(), tick)
        down = time.perf_counter() - start
        return up, down
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    n = 100 if args.quick else args.pods
    logging.disable(logging.INFO)  # the per-item "take N ms" lines would dominate

    base = baseline(n)
    s_up, s_down = serial(n)
    t_up, t_down = threaded(n, args.workers)
    print(f"pods: {n}, workers: {args.workers}")
    print(f"baseline (pure add: pod_logic + IPAM): {n / base:10.0f} pods/s")
    print(f"serial   add+update:  {n / s_up:8.0f} pods/s   ({s_up / base:5.1f}x baseline time)")
    print(f"serial   delete:      {n / s_down:8.0f} pods/s")
    print(f"threaded add+update:  {n / t_up:8.0f} pods/s   ({t_up / s_up:5.2f}x serial time)")
    print(f"threaded delete:      {n / t_down:8.0f} pods/s   ({t_down / s_down:5.2f}x serial time)")


if __name__ == "__main__":
    main()
