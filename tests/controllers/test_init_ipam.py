"""init_ipam: IPAM rebuilt at start-up from the IP CRs, the pods' and the nodes' annotations."""

from __future__ import annotations

from controller.controllers.bootstrap import init_ipam
from controller.ipam import IPAM
from controller.testing.builders import allocated, subnet
from controller.testing.fake_kube import FakeKubeApi
from controller.view import CacheView
from tests.controllers.helpers import CONFIG, indexer, restored_pod


def test_init_ipam_restores_pods_sts_crs_and_nodes_and_survives_bad_data() -> None:
    ipam, kube = IPAM(), FakeKubeApi()
    subnets = [subnet("ovn-default", "10.16.0.0/16"), subnet("join", "100.64.0.0/16")]
    ips = indexer(
        {
            "metadata": {"name": "web-0.ns"},
            "spec": {
                "podName": "web-0",
                "namespace": "ns",
                "subnet": "ovn-default",
                "ipAddress": "10.16.0.40",
                "macAddress": "00:00:00:00:00:40",
                "podType": "StatefulSet",
            },
        }
    )
    pods = indexer(
        restored_pod("alive", allocated("10.16.0.5", "00:00:00:00:00:05")),
        restored_pod(
            "done", allocated("10.16.0.6", "00:00:00:00:00:06"), phase="Succeeded", restart="Never"
        ),
        restored_pod("thief", allocated("10.16.0.5", "00:00:00:00:00:07")),  # same address: logged
        {"metadata": {"name": "broken", "namespace": "ns", "annotations": "nope"}},
    )
    nodes = indexer(
        {
            "metadata": {
                "name": "n1",
                "annotations": allocated("100.64.0.2", "00:00:00:00:01:02", "join"),
            }
        }
    )
    report = init_ipam(
        config=CONFIG,
        ipam=ipam,
        kube=kube,
        view=CacheView(ips=ips, pods=pods, nodes=nodes),
        bootstrapped=subnets,
    )
    assert ipam.get_ip_owner("10.16.0.40", "ovn-default") == "ns/web-0"
    assert ipam.get_ip_owner("10.16.0.5", "ovn-default") == "ns/alive"
    assert ipam.get_ip_owner("10.16.0.6", "ovn-default") is None
    assert ipam.get_ip_owner("100.64.0.2", "join") == "node-n1"
    assert ipam.get_ip_owner("10.16.0.1", "ovn-default") is None  # gateway excluded, not held
    assert (report.subnets, report.sts_vm_ips, report.pod_addresses, report.node_addresses) == (
        2,
        1,
        1,
        1,
    )
    assert report.errors == 2  # the thief's conflict and the malformed pod
    assert kube.ips["alive.ns"]["spec"]["ipAddress"] == "10.16.0.5"  # missing CR written back
