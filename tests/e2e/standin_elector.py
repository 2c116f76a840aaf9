"""A stand-in for another kube-ovn-controller generation, run as its own process by the two-lock
test: it campaigns on ONE lock only, as kube-ovn does (v1.8: ConfigMap `ovn-config`; v1.12+:
Lease `kube-ovn-controller`), and while it leads it "allocates": every retry period it bumps a
counter in ConfigMap `standin-writes` (annotation `writes`) through the API server, so the test
can see whether it ever wrote while the real controller led.

    python -m tests.e2e.standin_elector KUBECONFIG configmap|lease IDENTITY [--release]

SIGTERM ends it; with --release the lock is handed back first (kube-ovn v1.12's
ReleaseOnCancel), without it the lock is left to expire (kube-ovn v1.8).
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from controller.apiclient.errors import KubeApiError
from controller.apiclient.request import read_object, send
from controller.kube.client import load_api_client
from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    ResourceLock,
)
from controller.runtime.locks import KUBE_OVN_V18_LOCK, ConfigMapLock, LeaseLock

NAMESPACE = "kube-system"
WRITES = "standin-writes"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5


def _json(api: Any, method: str, path: str, body: Any = None) -> dict[str, Any]:
    return read_object(send(api, method, path, body=body, timeout=5))


def _bump(api: Any, count: int) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    try:
        cm = _json(api, "GET", f"{path}/{WRITES}")
    except KubeApiError as err:
        if err.status != 404:
            raise
        body = {"metadata": {"name": WRITES, "annotations": {"writes": str(count)}}}
        _json(api, "POST", path, body={"apiVersion": "v1", "kind": "ConfigMap", **body})
        return
    cm["metadata"].setdefault("annotations", {})["writes"] = str(count)
    _json(api, "PUT", f"{path}/{WRITES}", body=cm)


def main(argv: list[str]) -> int:
    kubeconfig, kind, identity = argv[:3]
    release = "--release" in argv
    api = load_api_client(kubeconfig)
    lock: ResourceLock
    if kind == "configmap":
        lock = ConfigMapLock(api, NAMESPACE, KUBE_OVN_V18_LOCK, identity)
    else:
        lock = LeaseLock(api, NAMESPACE, "kube-ovn-controller", identity)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    writes = [0]
    elector: LeaderElector

    def lead(lost: threading.Event) -> None:
        print("leading", flush=True)
        while not lost.wait(RETRY_PERIOD):
            if elector.is_leader():
                writes[0] += 1
                _bump(api, writes[0])

    elector = LeaderElector(
        LeaderElectionConfig(
            lock=lock,
            callbacks=LeaderCallbacks(lead, lambda: None),
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
            release_on_cancel=release,
        )
    )
    print("campaigning", flush=True)
    elector.run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
