"""IP CRs kube-ovn wrote are kept as they are at start-up: the controller restores IPAM from them
and does not rewrite them."""

from __future__ import annotations

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import running
from tests.e2e.workloads import (
    NS,
    pod,
    quiet,
)

pytestmark = pytest.mark.e2e


def test_ip_cr_written_by_kube_ovn_is_not_rewritten_at_start(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    ip, mac = "10.16.0.40", "00:00:00:00:00:40"
    store.create(
        "pods",
        {
            **pod("migrated", node_name="node1"),
            "metadata": {
                "name": "migrated",
                "namespace": NS,
                "annotations": {
                    "ovn.kubernetes.io/allocated": "true",
                    "ovn.kubernetes.io/routed": "true",
                    IP_ADDRESS_ANNOTATION: ip,
                    "ovn.kubernetes.io/mac_address": mac,
                    "ovn.kubernetes.io/cidr": "10.16.0.0/16",
                    "ovn.kubernetes.io/gateway": "10.16.0.1",
                    LOGICAL_SWITCH_ANNOTATION: "ovn-default",
                },
            },
        },
    )
    # the CR as kube-ovn v1.8 wrote it: containerID "", null lists; plus a foreign label
    cr = store.create(
        "ips",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "IP",
            "metadata": {
                "name": "migrated.default",
                "labels": {"ovn.kubernetes.io/subnet": "ovn-default", "ovn-default": "", "x": "y"},
            },
            "spec": {
                "podName": "migrated",
                "namespace": NS,
                "subnet": "ovn-default",
                "attachSubnets": None,
                "nodeName": "node1",
                "ipAddress": ip,
                "v4IpAddress": ip,
                "v6IpAddress": "",
                "attachIps": None,
                "macAddress": mac,
                "attachMacs": None,
                "containerID": "",
                "podType": "",
            },
        },
    )
    ctl = running(start_controller())
    quiet(ctl)
    now = store.get("ips", None, "migrated.default")
    assert now["metadata"]["resourceVersion"] == cr["metadata"]["resourceVersion"]
    assert now["metadata"]["labels"]["x"] == "y"
