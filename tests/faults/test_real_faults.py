"""Faults on the real control plane, in the middle of a burst of pod creates and deletes (the
burst of tests/faults/helpers.py, written straight to kube-apiserver as admin):

* kube-apiserver SIGKILLed and restarted;
* etcd restarted under kube-apiserver;
* watch connections dropped and 5xx/429 answers injected by the fault proxy, which sits between
  the controller and kube-apiserver (the controller's kubeconfig points at it);
* answers lost after kube-apiserver applied the request (the proxy forwards it and cuts the
  connection when the answer begins), for IP CR creates and deletes, pod patches and Lease
  renewals: each retry meets the result of the attempt it never heard back from, and the
  leader keeps leading;
* 410 Gone for real: while the proxy refuses the controller's connections (ECONNREFUSED: its
  reflectors keep their position and re-watch without relisting), pods change, etcd is
  compacted and kube-apiserver restarted, so the watches come back with a resourceVersion that
  neither etcd nor the new watch cache has, answered 410 (the reflectors then relist).

The verdict is the suite's: the consistency audit (read directly, not through the proxy) settled
twice in a row, every pod the burst left alive allocated with an address of its own, and the
controller's IPAM holding exactly those. The controller runs as the chart's ServiceAccount.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.app import Controller
from controller.sandbox.apiserver.kubeconfig import write_kubeconfig
from controller.sandbox.cluster.faultproxy import FaultProxy
from tests.e2e.conftest import Cluster, launch_controller, open_real_cluster
from tests.e2e.helpers import NODE, pod, running
from tests.faults.conftest import FAULT_FLAGS
from tests.faults.helpers import (
    Auditor,
    assert_burst_converged,
    assert_ipam_released,
    run_burst,
    wait_lease_renewed,
    wait_settled,
)
from tests.fixtures.realbed import RealBed

pytestmark = [pytest.mark.e2e, pytest.mark.realcp, pytest.mark.timeout(180)]

NS = "default"
SETTLE = 60.0
# kube-apiserver is down for seconds and, once back, denies every request (403) until its RBAC
# caches sync: with the suite's 2 s renew deadline the controller would (rightly) give up its
# lease and exit. These are the usual production timings instead.
OUTAGE_LEASE_FLAGS = (
    "--leader-elect-lease-duration=15",
    "--leader-elect-renew-deadline=10",
    "--leader-elect-retry-period=2",
)


@dataclasses.dataclass
class Bed:
    cluster: Cluster  # the controller's view: its kubeconfig goes through the proxy
    direct: Cluster  # the audit's: straight to kube-apiserver
    proxy: FaultProxy
    plane: Any
    ctl: Controller
    auditor: Auditor
    username: str


@pytest.fixture
def bed(real_bed: RealBed, tmp_path: Path) -> Iterator[Bed]:
    plane = real_bed.plane
    pki = plane.pki
    upstream = plane.url.removeprefix("https://").rsplit(":", 1)
    with (
        open_real_cluster(real_bed) as direct,
        FaultProxy(
            upstream[0],
            int(upstream[1]),
            certfile=pki.server_cert,
            keyfile=pki.server_key,
            upstream_ca=pki.ca_cert,
        ) as proxy,
    ):
        namespace, name = real_bed.service_account
        kubeconfig = write_kubeconfig(
            tmp_path / "proxied.kubeconfig",
            proxy.url,
            token=plane.service_account_token(namespace, name),
            certificate_authority=pki.ca_cert,
        )
        cluster = dataclasses.replace(direct, kubeconfig=kubeconfig)
        ctl = running(launch_controller(cluster, *FAULT_FLAGS, *OUTAGE_LEASE_FLAGS))
        auditor = Auditor(direct)
        try:
            yield Bed(
                cluster, direct, proxy, plane, ctl, auditor,
                f"system:serviceaccount:{namespace}:{name}",
            )  # fmt: skip
        finally:
            ctl.stop()
            auditor.close()
            proxy.clear()
            plane.apiserver.wait_ready()


def _verdict(b: Bed, burst: Any) -> None:
    wait_settled(b.auditor, timeout=SETTLE)
    assert_burst_converged(b.direct.server.store, burst)
    assert_ipam_released(b.ctl.ipam.get_pod_address, burst)


def test_apiserver_sigkilled_and_restarted_mid_burst(bed: Bed) -> None:
    def outage() -> None:
        bed.plane.apiserver.kill()
        bed.plane.apiserver.start()  # waits for /readyz

    burst = run_burst(bed.direct.server.store, fault=outage, timeout=90)
    _verdict(bed, burst)


def test_etcd_restarted_mid_burst(bed: Bed) -> None:
    def outage() -> None:
        bed.plane.etcd.restart(kill=True)
        bed.plane.apiserver.wait_ready()

    burst = run_burst(bed.direct.server.store, fault=outage, timeout=90)
    _verdict(bed, burst)


def test_watches_dropped_and_5xx_429_injected_by_the_proxy_mid_burst(bed: Bed) -> None:
    proxy = bed.proxy

    def errors() -> None:
        proxy.fail_next(10, 500, method="PATCH", path=r"/pods/")
        proxy.fail_next(6, 429, method="POST", path=r"/ips$")
        proxy.fail_next(6, 503, method="PUT", path=r"/ips/")
        proxy.fail_next(4, 500, method="GET", watch=True)
        assert proxy.drop_watches() >= 1

    burst = run_burst(bed.direct.server.store, fault=errors, timeout=90)
    _verdict(bed, burst)
    served = {r.injected for r in proxy.injected()}
    assert {500, 429} <= served, f"injected answers served: {sorted(served, key=str)}"


def test_answers_lost_after_the_server_applied_them_mid_burst(bed: Bed) -> None:
    proxy = bed.proxy

    def lose() -> None:
        proxy.lose_answers(6, method="POST", path=r"/ips$")
        proxy.lose_answers(8, method="PATCH", path=r"/pods/")
        proxy.lose_answers(4, method="DELETE", path=r"/ips/")
        # renewals that landed though the leader never heard back: it must keep leading
        proxy.lose_answers(3, method="PUT", path=r"/leases/")

    burst = run_burst(bed.direct.server.store, fault=lose, timeout=90)
    _verdict(bed, burst)
    lost = {
        (r.method, kind)
        for r in proxy.lost_answers()
        for kind in ("ips", "pods", "leases")
        if f"/{kind}" in r.path
    }
    assert {("POST", "ips"), ("PATCH", "pods"), ("DELETE", "ips"), ("PUT", "leases")} <= lost
    assert bed.ctl.is_leader()
    wait_lease_renewed(bed.direct.server.store, "controller-a")


def test_410_gone_from_compaction_after_an_apiserver_restart(
    bed: Bed, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controller.cache.reflector")
    store = bed.direct.server.store
    plane = bed.plane
    gap = [f"gap-{i}" for i in range(4)]

    def outage() -> None:
        bed.proxy.pause()
        bed.proxy.drop_all()
        # changes the controller cannot see, then history gone in etcd and in the watch cache
        for name in gap:
            store.create("pods", pod(name, NS, node_name=NODE))
        store.delete("pods", NS, gap[0])
        plane.apiserver.kill()
        plane.compact_etcd()
        plane.apiserver.start()
        bed.proxy.resume()

    burst = run_burst(store, fault=outage, timeout=90)
    burst.alive.update(gap[1:])
    burst.deleted.add(gap[0])
    _verdict(bed, burst)
    audited = [
        e
        for e in plane.audit_events()
        if e.get("user", {}).get("username") == bed.username
        and e.get("verb") == "watch"
        and (e.get("responseStatus") or {}).get("code") == 410
    ]
    # a 410 also comes as an ERROR event inside a 200 watch answer: the reflector logs it
    relisted = [
        r.getMessage()
        for r in caplog.records
        if r.name == "controller.cache.reflector" and "will relist" in r.getMessage()
    ]
    assert audited or relisted, "the controller's watches never got a 410 Gone"
