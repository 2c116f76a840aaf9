"""Concurrent clients: optimistic concurrency through 409s loses no update."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client

from controller.sandbox.apiserver.server import ApiServer

NS = "default"


def test_read_modify_write_with_conflicts_loses_no_increment(server: ApiServer) -> None:
    with server.api_client() as api:
        client.CoreV1Api(api).create_namespaced_config_map(
            NS, {"metadata": {"name": "counter"}, "data": {"n": "0"}}
        )
    conflicts: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with server.api_client() as own:
                core = client.CoreV1Api(own)
                for _ in range(15):
                    while True:
                        cm = core.read_namespaced_config_map("counter", NS)
                        cm.data["n"] = str(int(cm.data["n"]) + 1)
                        try:
                            core.replace_namespaced_config_map("counter", NS, cm)
                            break
                        except client.ApiException as exc:
                            if exc.status != 409:
                                raise
                            conflicts.append(1)
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    final: Any = server.store.get("configmaps", NS, "counter")
    assert final["data"]["n"] == "60"
    updates = [r for r in server.request_log if r.verb == "update"]
    assert len([r for r in updates if r.code == 200]) == 60
    assert len([r for r in updates if r.code == 409]) == len(conflicts)
