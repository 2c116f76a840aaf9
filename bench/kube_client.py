"""Kubernetes adapter cost: our raw-JSON KubeClient beside the generated `kubernetes` API classes.

Usage: python bench/kube_client.py [--quick] [--requests N] [--repeat R]

Both sides talk to the same in-process API server emulator over real HTTP with one shared
ApiClient (same urllib3 pool), in the same run, best of R repeats:

* patch: N annotation merge patches of one pod: `KubeClient.patch_pod_annotations` versus
  `CoreV1Api.patch_namespaced_pod` (pydantic argument validation + V1Pod deserialisation);
* get: N GETs of a StatefulSet: `KubeClient.get_statefulset` versus
  `AppsV1Api.read_namespaced_stateful_set`;
* patch, refreshing token: the patch with a credential refresh hook, as in a pod
  (`load_incluster_config`), on our direct path versus the `call_api` path that runs the hook
  before every request.

The emulator's own cost is in both figures, so the ratio understates the client-side saving;
the figure to watch is the per-request client overhead difference (µs/request).
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

import harness
from kubernetes import client as k8s

from controller.apiclient import request
from controller.kube.client import KubeClient
from controller.sandbox.apiserver.server import ApiServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 50 requests, 1 repeat")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    n, repeat = (50, 1) if args.quick else (args.requests, args.repeat)

    with ApiServer() as server:
        server.store.create(
            "pods",
            {
                "metadata": {"name": "p1", "namespace": "default", "labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        )
        server.store.create(
            "statefulsets",
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "replicas": 3,
                    "serviceName": "web",
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                    },
                },
            },
        )
        api_client = server.api_client()
        ours = KubeClient(api_client)
        core = k8s.CoreV1Api(api_client)
        apps = k8s.AppsV1Api(api_client)

        def ours_patch(count: int) -> None:
            for i in range(count):
                ours.patch_pod_annotations("default", "p1", {"bench": str(i)})

        def generated_patch(count: int) -> None:
            for i in range(count):
                core.patch_namespaced_pod(
                    "p1",
                    "default",
                    {"metadata": {"annotations": {"bench": f"g{i}"}}},
                    _content_type="application/merge-patch+json",
                )

        def ours_get(count: int) -> None:
            for _ in range(count):
                ours.get_statefulset("default", "web")

        def generated_get(count: int) -> None:
            for _ in range(count):
                apps.read_namespaced_stateful_set("web", "default")

        # In a pod the client's token refreshes (load_incluster_config installs a hook run on
        # every request by the generated path); ours re-asks it once a second on its own path.
        hooked_client = server.api_client()

        def refresh(cfg: Any) -> None:
            cfg.host = server.url  # as the in-cluster loader's hook re-applies its settings

        hooked_client.configuration.refresh_api_key_hook = refresh
        hooked = KubeClient(hooked_client)

        def hooked_patch(count: int) -> None:
            for i in range(count):
                hooked.patch_pod_annotations("default", "p1", {"bench": f"h{i}"})

        def hooked_generic_patch(count: int) -> None:
            direct = request._direct
            request._direct = lambda api: None  # type: ignore[assignment]
            try:
                hooked_patch(count)
            finally:
                request._direct = direct

        print(f"{n} requests per scenario, best of {repeat}")
        for name, mine, theirs, label in (
            ("patch pod annotations", ours_patch, generated_patch, "generated"),
            ("get statefulset", ours_get, generated_get, "generated"),
            ("patch, refreshing token", hooked_patch, hooked_generic_patch, "call_api path"),
        ):
            mine(5)
            theirs(5)  # warm up pools and pydantic's lazy model build
            t_ours = harness.best_of(functools.partial(mine, n), repeat)
            t_theirs = harness.best_of(functools.partial(theirs, n), repeat)
            print(
                f"{name:24s} KubeClient {n / t_ours:8.0f} req/s ({t_ours / n * 1e6:6.0f} µs)  "
                f"{label} {n / t_theirs:8.0f} req/s ({t_theirs / n * 1e6:6.0f} µs)  "
                f"ratio {t_theirs / t_ours:4.2f}x"
            )
        hooked_client.close()
        api_client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
