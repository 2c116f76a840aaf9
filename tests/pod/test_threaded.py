"""run_workers: 3 workers per queue over ~200 pods; no address is held twice, all converge."""

from __future__ import annotations

import threading
from collections import Counter

from controller.queues import RealClock
from controller.testing.wait import wait_for
from tests.pod.env import NODE, Env, raw_pod, standard_env

PODS = 200
TIMEOUT = 60.0


def converged(env: Env, keys: list[str]) -> bool:
    env.sync_all()  # this thread plays the informer
    for key in keys:
        pod = env.kube.pods.get(key)
        if pod is None:
            return False
        annotations = pod["metadata"].get("annotations") or {}
        if annotations.get("ovn.kubernetes.io/routed") != "true":
            return False
    return True


def ip_of(env: Env, key: str) -> str:
    annotations = env.kube.pods[key]["metadata"]["annotations"]
    return str(annotations["ovn.kubernetes.io/ip_address"])


def test_three_workers_two_hundred_pods() -> None:
    env = standard_env(clock=RealClock())
    env.add_namespace("other")
    stop = threading.Event()
    threads = env.controller.run_workers(3, stop)
    try:
        keys = []
        for i in range(PODS):
            ns = "default" if i % 2 else "other"
            env.create_pod(raw_pod(f"p{i}", ns, node=NODE))
            keys.append(f"{ns}/p{i}")
        wait_for(lambda: converged(env, keys), TIMEOUT, "every pod to be routed", interval=0.01)

        ips = {key: ip_of(env, key) for key in keys}
        assert len(set(ips.values())) == PODS, Counter(ips.values()).most_common(3)
        for key, ip in ips.items():
            assert env.ipam.get_ip_owner(ip, "ovn-default") == key
        assert len(env.pod_ports()) == PODS
        assert len(env.routes()) == PODS
        assert env.ipam.verify() == []

        # Delete half while creating more: released addresses may be reused, never shared.
        gone = keys[::2]
        for key in gone:
            env.kube.pods.pop(key)
        more = []
        for i in range(PODS, PODS + 50):
            env.create_pod(raw_pod(f"p{i}", "default", node=NODE))
            more.append(f"default/p{i}")
        alive = [k for k in keys if k not in set(gone)] + more

        def settled() -> bool:
            if not converged(env, alive):
                return False
            return all(env.ipam.get_pod_address(k) == [] for k in gone)

        wait_for(settled, TIMEOUT, "deletes and new pods to settle", interval=0.01)
        final = {key: ip_of(env, key) for key in alive}
        assert len(set(final.values())) == len(alive)
        assert all(final[k] == ips[k] for k in alive if k in ips)  # survivors untouched
        assert sorted(env.pod_ports()) == sorted(
            f"{k.split('/')[1]}.{k.split('/')[0]}" for k in alive
        )
        assert len(env.routes()) == len(alive)
        assert env.ipam.verify() == []
        assert env.reasons() == []
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        assert not any(t.is_alive() for t in threads)
        env.close()
