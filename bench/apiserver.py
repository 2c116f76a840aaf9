"""API server emulator throughput: list, paginated list, watch fan-out and create over real HTTP.

Usage: python bench/apiserver.py [--quick] [--pods N] [--watchers W] [--events E]

Scenarios (raw urllib3, no model deserialisation, so the figures are the server's):

* seed: N pods written through the in-process store (what a test's setup costs);
* full list: one GET of all N pods, beside the baseline of serialising the same N dicts with
  json.dumps in this process (what a server that serialised per request would pay at least);
* paged list: limit=500 pages through all N pods;
* namespace list: one small namespace among the N pods (served from a sorted-key range);
* watch fan-out: W raw watch streams, E writes through the store; until every stream saw E events;
* create: pods POSTed over one keep-alive connection, beside GET /version on the same connection
  (the HTTP round-trip floor).
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time

import harness  # noqa: F401 - puts the repository root on sys.path
import urllib3

from controller.sandbox.apiserver.server import ApiServer

SPEC = {
    "containers": [
        {
            "name": "app",
            "image": "registry.local/app:1.0",
            "resources": {"requests": {"cpu": "100m"}},
        }
    ],
    "nodeName": "node-1",
}


def _pod(i: int, ns: str = "default") -> dict[str, object]:
    return {
        "metadata": {
            "name": f"pod-{i:06d}",
            "namespace": ns,
            "labels": {"app": f"app-{i % 50}"},
            "annotations": {"ovn.kubernetes.io/logical_switch": "ovn-default"},
        },
        "spec": SPEC,
    }


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--watchers", type=int, default=4)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--creates", type=int, default=2_000)
    args = parser.parse_args()
    if args.quick:
        args.pods, args.events, args.creates = 2_000, 500, 200
    n = args.pods

    with ApiServer() as server:
        store = server.store
        http = urllib3.PoolManager(maxsize=args.watchers + 2)
        rss0 = _rss_mib()
        t = time.perf_counter()
        for i in range(n):
            store.create_stored("pods", _pod(i))
        seed = time.perf_counter() - t
        print(
            f"seed          {n} pods in {seed:.2f}s ({n / seed:,.0f} pods/s), "
            f"max RSS +{_rss_mib() - rss0:,.0f} MiB"
        )

        objs = store.list("pods", "default")
        t = time.perf_counter()
        baseline_body = json.dumps({"items": objs}).encode()
        baseline = time.perf_counter() - t
        t = time.perf_counter()
        resp = http.request("GET", f"{server.url}/api/v1/namespaces/default/pods")
        full = time.perf_counter() - t
        assert resp.status == 200
        print(
            f"full list     {full * 1000:,.0f} ms for {len(resp.data) / 2**20:,.1f} MiB; "
            f"baseline json.dumps {baseline * 1000:,.0f} ms "
            f"({len(baseline_body) / 2**20:,.1f} MiB); ratio {full / baseline:.2f}"
        )

        t = time.perf_counter()
        pages, token = 0, ""
        while True:
            url = f"{server.url}/api/v1/namespaces/default/pods?limit=500"
            data = http.request("GET", url + (f"&continue={token}" if token else "")).data
            # Only the list's metadata is decoded: the figure is the server's, not json.loads'.
            head = json.loads(data[: data.index(b',"items":[')] + b"}")
            pages += 1
            token = head["metadata"].get("continue", "")
            if not token:
                break
        paged = time.perf_counter() - t
        assert pages == -(-n // 500)
        print(
            f"paged list    {pages} pages of 500 in {paged * 1000:,.0f} ms; "
            f"ratio to full list {paged / full:.2f}"
        )

        store.create("namespaces", {"metadata": {"name": "small"}})
        for i in range(10):
            store.create("pods", _pod(i, "small"))
        t = time.perf_counter()
        reps = 200
        for _ in range(reps):
            http.request("GET", f"{server.url}/api/v1/namespaces/small/pods")
        small = (time.perf_counter() - t) / reps
        print(f"ns list       10 of {n + 10} pods in {small * 1000:.2f} ms per request")

        rv = store.resource_version
        done = threading.Barrier(args.watchers + 1)
        counts = [0] * args.watchers

        def watch(k: int) -> None:
            r = http.request(
                "GET",
                f"{server.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}",
                preload_content=False,
            )
            buf = b""
            for chunk in r.stream(65536):
                buf += chunk
                lines = buf.split(b"\n")
                buf = lines.pop()
                counts[k] += len(lines)
                if counts[k] >= args.events:
                    break
            r.release_conn()
            done.wait()

        threads = [
            threading.Thread(target=watch, args=(k,), daemon=True) for k in range(args.watchers)
        ]
        for th in threads:
            th.start()
        store.wait_for_watchers("pods", args.watchers)
        t = time.perf_counter()
        for i in range(args.events):
            store.patch(
                "pods", "default", f"pod-{i % n:06d}", {"metadata": {"labels": {"gen": str(i)}}}
            )
        done.wait(timeout=300)
        fan = time.perf_counter() - t
        print(
            f"watch fan-out {args.events} events x {args.watchers} watchers in {fan:.2f}s "
            f"({args.events * args.watchers / fan:,.0f} delivered events/s)"
        )
        server.faults.drop_watches()

        conn = urllib3.HTTPConnectionPool("127.0.0.1", server.port, maxsize=1)
        t = time.perf_counter()
        for _ in range(args.creates):
            conn.request("GET", "/version")
        floor = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(args.creates):
            body = json.dumps({"metadata": {"name": f"new-{i}"}, "spec": SPEC})
            r = conn.request(
                "POST",
                "/api/v1/namespaces/default/pods",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            assert r.status == 201, r.data
        creates = time.perf_counter() - t
        print(
            f"create        {args.creates} pods in {creates:.2f}s "
            f"({args.creates / creates:,.0f}/s); GET /version floor "
            f"{args.creates / floor:,.0f}/s; ratio {creates / floor:.2f}"
        )
        http.clear()
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
