"""Benchmark of the informer stack against the API server emulator.

For each size (10,000 and 50,000 pods; 2,000 with --quick) it measures, each in a fresh
process so resident memory is attributable:

* ``list (models)``: the `kubernetes` client's `list_pod_for_all_namespaces` in pages of 500,
  deserialised into V1Pod models and kept — what a naive Python informer pays;
* ``list (raw JSON)``: the same pages through the same client with `_preload_content=False` and
  `json.loads`, kept — the floor for any informer that caches every object;
* ``informer sync``: a SharedIndexInformer (paged LIST, RealFIFO, namespace index, one handler)
  from start until the handler has received every initial add;
* ``informer events``: after the sync, the emulator updates pods as fast as it can and the
  handler counts the MODIFIED notifications; events/s is measured at the handler, beside the
  time the emulator needed to produce them.

The emulator runs in its own process and seeds its store directly. Time is wall-clock; memory is
the growth of the measuring process's resident set (VmRSS) from just before the first request
to after the objects are held, after a GC. Usage: ``python bench/informer.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import harness  # noqa: F401 - puts the repository root on sys.path

NAMESPACES = [f"ns{i}" for i in range(10)]


def _pod(i: int) -> dict[str, Any]:
    name = f"app-{i // 10:05d}-{i:06d}"
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACES[i % len(NAMESPACES)],
            "labels": {"app": f"app-{i // 10:05d}", "pod-template-hash": "5d9c8b7f6d"},
            "annotations": {
                "ovn.kubernetes.io/allocated": "true",
                "ovn.kubernetes.io/ip_address": f"10.16.{i // 250 % 256}.{i % 250 + 2}",
                "ovn.kubernetes.io/mac_address": f"00:00:00:{i >> 16 & 255:02x}:"
                f"{i >> 8 & 255:02x}:{i & 255:02x}",
                "ovn.kubernetes.io/logical_switch": "ovn-default",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{i // 10:05d}-5d9c8b7f6d",
                    "uid": "0f0e0d0c-0b0a-0908-0706-050403020100",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"node-{i % 100}",
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/app:1.2.3",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "env": [{"name": "MODE", "value": "production"}],
                    "volumeMounts": [
                        {
                            "name": "kube-api-access",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                        ]
                    },
                }
            ],
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.16.{i // 250 % 256}.{i % 250 + 2}",
            "hostIP": f"172.18.0.{i % 100 + 2}",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- the emulator process ---------------------------------------------------------------------


def _serve(n: int, conn: Connection) -> None:
    from controller.sandbox.apiserver.server import ApiServer

    server = ApiServer(history_window=200_000, bookmark_interval=60.0).start()
    store = server.store
    for ns in NAMESPACES:
        store.create("namespaces", {"metadata": {"name": ns}})
    t0 = time.perf_counter()
    for i in range(n):
        store.create("pods", _pod(i))
    conn.send((server.url, time.perf_counter() - t0))
    while True:
        cmd, arg = conn.recv()
        if cmd == "stop":
            break
        if cmd == "update":
            t0 = time.perf_counter()
            for j in range(arg):
                i = j % n
                obj = store.get(
                    "pods", NAMESPACES[i % len(NAMESPACES)], _pod(i)["metadata"]["name"]
                )
                obj["metadata"]["labels"]["rev"] = str(j)
                store.update("pods", obj)
            conn.send(time.perf_counter() - t0)
    server.stop()


# -- the measuring processes ------------------------------------------------------------------


def _api_client(url: str) -> Any:
    from kubernetes import client

    return client.ApiClient(client.Configuration(host=url))


def _measure(
    kind: str, url: str, n: int, events: int, server: Connection | None, out: Connection
) -> None:
    from kubernetes import client

    from controller.cache import ListWatch, SharedIndexInformer

    api = _api_client(url)
    core = client.CoreV1Api(api)
    core.list_namespace()  # warm the connection pool and lazy imports
    gc.collect()
    rss0 = _rss_mb()
    result: dict[str, float] = {}
    t0 = time.perf_counter()
    held: list[Any] = []
    if kind == "list_models":
        token = None
        while True:
            page = core.list_pod_for_all_namespaces(limit=500, _continue=token)
            held.extend(page.items)
            token = page.metadata._continue
            if not token:
                break
    elif kind == "list_json":
        token = None
        while True:
            kwargs: dict[str, Any] = {"_continue": token} if token else {}
            resp = core.list_pod_for_all_namespaces(limit=500, _preload_content=False, **kwargs)
            body = json.loads(resp.data)
            held.extend(body["items"])
            token = body["metadata"].get("continue")
            if not token:
                break
    else:
        counts = {"add": 0, "update": 0}
        done = threading.Event()
        target = {"update": 0}

        def on_add(obj: Any) -> None:
            counts["add"] += 1

        def on_update(old: Any, new: Any) -> None:
            counts["update"] += 1
            if counts["update"] >= target["update"] > 0:
                done.set()

        informer = SharedIndexInformer(ListWatch(api, plural="pods"))
        reg = informer.add_event_handler(on_add=on_add, on_update=on_update)
        stop = threading.Event()
        informer.start(stop)
        while not (reg.has_synced() and counts["add"] >= n):
            time.sleep(0.001)
        result["sync_seconds"] = time.perf_counter() - t0
        gc.collect()
        result["rss_mb"] = _rss_mb() - rss0
        assert len(informer.indexer) == n
        if events and server is not None:
            target["update"] = events
            t1 = time.perf_counter()
            server.send(("update", events))
            gen = server.recv()
            done.wait(300)
            result["events_seconds"] = time.perf_counter() - t1
            result["events_generated_seconds"] = gen
            result["events"] = counts["update"]
        stop.set()
        out.send(result)
        return
    result["seconds"] = time.perf_counter() - t0
    gc.collect()
    result["rss_mb"] = _rss_mb() - rss0
    assert len(held) == n, len(held)
    out.send(result)


def _run_child(
    ctx: Any, kind: str, url: str, n: int, events: int, server: Connection | None
) -> dict[str, float]:
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_measure, args=(kind, url, n, events, server, send))
    proc.start()
    result: dict[str, float] = recv.recv()
    proc.join(60)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 pods only (smoke run)")
    parser.add_argument("--sizes", type=int, nargs="*", help="pod counts (default 10000 50000)")
    parser.add_argument("--events", type=int, help="updates for the events/s figure")
    args = parser.parse_args()
    sizes = args.sizes or ([2000] if args.quick else [10_000, 50_000])
    events = args.events or (2000 if args.quick else 20_000)
    ctx = mp.get_context("spawn")
    print(
        f"{'pods':>6}  {'measurement':<22} {'seconds':>8} {'objects/s':>10} "
        f"{'RSS MB':>8}  {'vs list (models)':>16}"
    )
    for n in sizes:
        server_end, child_end = ctx.Pipe()
        srv = ctx.Process(target=_serve, args=(n, child_end))
        srv.start()
        url, seed_s = server_end.recv()
        models = _run_child(ctx, "list_models", url, n, 0, None)
        raw = _run_child(ctx, "list_json", url, n, 0, None)
        inf = _run_child(ctx, "informer", url, n, events, server_end)
        server_end.send(("stop", None))
        srv.join(30)
        base_s, base_mb = models["seconds"], models["rss_mb"]
        rows = [
            ("list (models)", models["seconds"], models["rss_mb"]),
            ("list (raw JSON)", raw["seconds"], raw["rss_mb"]),
            ("informer sync", inf["sync_seconds"], inf["rss_mb"]),
        ]
        for label, secs, mb in rows:
            print(
                f"{n:>6}  {label:<22} {secs:>8.2f} {n / secs:>10.0f} {mb:>8.1f}  "
                f"time x{secs / base_s:.2f}, mem x{mb / base_mb:.2f}"
            )
        if "events" in inf:
            ev, secs = inf["events"], inf["events_seconds"]
            gen = inf["events_generated_seconds"]
            print(
                f"{n:>6}  {'informer events':<22} {secs:>8.2f} {ev / secs:>10.0f} "
                f"{'':>8}  handler saw {ev:.0f} updates; the emulator needed {gen:.2f} s "
                f"({ev / gen:.0f}/s) to make them"
            )
        print(f"{n:>6}  (emulator seeded in {seed_s:.1f} s)")


if __name__ == "__main__":
    main()
