"""init_ipam: an allocated pod whose IP CR names another subnet than its annotations (the CR
is stale: the annotations win) holds one address after the rebuild, not two."""

from __future__ import annotations

from typing import Any

from controller.cache import Indexer
from controller.config import parse_args
from controller.controllers.bootstrap import init_ipam
from controller.ipam import IPAM
from controller.testing.fake_kube import FakeKubeApi
from controller.view import CacheView

CONFIG = parse_args(["--ovn-nb-addr=tcp:127.0.0.1:6641", "--leader-elect=false"], {})


def _indexer(*objs: dict[str, Any]) -> Indexer:
    idx = Indexer()
    for obj in objs:
        idx.add(obj)
    return idx


def test_rebuild_holds_one_address_when_ip_cr_names_another_subnet() -> None:
    annotations = {
        "ovn.kubernetes.io/allocated": "true",
        "ovn.kubernetes.io/ip_address": "10.16.0.7",
        "ovn.kubernetes.io/mac_address": "00:00:00:00:00:07",
        "ovn.kubernetes.io/logical_switch": "ovn-default",
    }
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {},
        "status": {"phase": "Running"},
    }
    stale_cr = {
        "metadata": {"name": "p.ns"},
        "spec": {
            "podName": "p",
            "namespace": "ns",
            "subnet": "other",
            "ipAddress": "10.17.0.9",
            "macAddress": "00:00:00:00:00:09",
            "podType": "",
            "provider": "ovn",
        },
    }
    ipam = IPAM()
    kube = FakeKubeApi()
    init_ipam(
        config=CONFIG,
        ipam=ipam,
        kube=kube,
        view=CacheView(ips=_indexer(stale_cr), pods=_indexer(pod)),
        bootstrapped=[
            {"metadata": {"name": "ovn-default"}, "spec": {"cidrBlock": "10.16.0.0/16"}},
            {"metadata": {"name": "other"}, "spec": {"cidrBlock": "10.17.0.0/16"}},
        ],
    )
    held = ipam.get_pod_address("ns/p")
    assert [(a.subnet, a.ip) for a in held] == [("ovn-default", "10.16.0.7")]
    assert ipam.get_ip_owner("10.17.0.9", "other") is None
    # the CR is rewritten to what the annotations say
    assert kube.ips["p.ns"]["spec"]["subnet"] == "ovn-default"
