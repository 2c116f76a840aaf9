"""init_ipam after a controller died in the middle of an add (found by tests/faults): the IP CR
of an alive pod whose annotations were never written keeps its address reserved for that pod,
so no other pod draws it before the pod's own add runs again (and keeps it)."""

from __future__ import annotations

from typing import Any

from controller.cache import Indexer
from controller.config import parse_args
from controller.controllers.bootstrap import init_ipam
from controller.ipam import IPAM
from controller.testing import builders
from controller.testing.fake_kube import FakeKubeApi
from controller.view import CacheView
from tests.controllers.helpers import restored_pod

CONFIG = parse_args(["--ovn-nb-addr=tcp:127.0.0.1:6641", "--leader-elect=false"], {})
SUBNET = "ovn-default"


def indexer(*objs: dict[str, Any]) -> Indexer:
    idx = Indexer()
    for obj in objs:
        idx.add(obj)
    return idx


def ip_cr(pod: str, ip: str, mac: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pod}.ns"},
        "spec": {
            "podName": pod,
            "namespace": "ns",
            "subnet": SUBNET,
            "ipAddress": ip,
            "macAddress": mac,
            "podType": "",
        },
    }


def allocated(ip: str, mac: str) -> dict[str, str]:
    return builders.allocated(ip, mac, SUBNET, cidr="10.16.0.0/16")


def rebuild(ips: Indexer, pods: Indexer) -> IPAM:
    ipam = IPAM()
    subnets = [{"metadata": {"name": SUBNET}, "spec": {"cidrBlock": "10.16.0.0/16"}}]
    init_ipam(
        config=CONFIG,
        ipam=ipam,
        kube=FakeKubeApi(),
        view=CacheView(ips=ips, pods=pods),
        bootstrapped=subnets,
    )
    return ipam


def test_the_ip_cr_of_an_unannotated_alive_pod_keeps_its_address() -> None:
    ipam = rebuild(
        indexer(ip_cr("half", "10.16.0.3", "00:00:00:00:00:03")),
        indexer(restored_pod("half")),
    )
    assert ipam.get_ip_owner("10.16.0.3", SUBNET) == "ns/half"
    # the pod's add draws again: it keeps what its interrupted add had written
    assert ipam.get_random_address("ns/other", SUBNET)[0] != "10.16.0.3"
    assert ipam.get_random_address("ns/half", SUBNET) == (
        "10.16.0.3",
        "",
        "00:00:00:00:00:03",
    )


def test_leftover_ip_crs_of_gone_dead_or_annotated_pods_reserve_nothing() -> None:
    ipam = rebuild(
        indexer(
            ip_cr("gone", "10.16.0.4", "00:00:00:00:00:04"),
            ip_cr("done", "10.16.0.5", "00:00:00:00:00:05"),
            ip_cr("moved", "10.16.0.6", "00:00:00:00:00:06"),  # stale: annotations say .7
            ip_cr("late", "10.16.0.8", "00:00:00:00:00:08"),  # .8 is someone else's now
        ),
        indexer(
            restored_pod("done", phase="Succeeded", restart="Never"),
            restored_pod("moved", allocated("10.16.0.7", "00:00:00:00:00:07")),
            restored_pod("late"),
            restored_pod("owner", allocated("10.16.0.8", "00:00:00:00:00:09")),
        ),
    )
    for ip in ("10.16.0.4", "10.16.0.5", "10.16.0.6"):
        assert ipam.get_ip_owner(ip, SUBNET) is None, ip
    assert ipam.get_ip_owner("10.16.0.7", SUBNET) == "ns/moved"
    assert ipam.get_ip_owner("10.16.0.8", SUBNET) == "ns/owner"  # annotations win
    assert ipam.get_pod_address("ns/late") == []
