"""Packets on a multus attachment served by kube-ovn: a NAD of type kube-ovn on a subnet of
provider `<nad>.<ns>.ovn` gives each pod a second interface `net1`, wired from the
provider-prefixed annotations, on which the pods reach each other and the subnet's gateway;
an IPAM-only attachment gets no interface from kube-ovn's CNI."""

from __future__ import annotations

import json
from collections.abc import Mapping

from controller.core.constants import ATTACHMENT_NETWORK_ANNOTATION
from tests.dataplane.helpers import Net

NAD = "attnet"
PROVIDER = f"{NAD}.default.ovn"
CONF = {
    "cniVersion": "0.3.1",
    "type": "kube-ovn",
    "server_socket": "/run/x.sock",
    "provider": PROVIDER,
}


def _nad(net: Net, name: str, config: Mapping[str, object]) -> None:
    net.cluster.server.store.create(
        "network-attachment-definitions",
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"config": json.dumps(config)},
        },
    )


def test_pods_reach_each_other_on_an_ovn_attachment(net: Net) -> None:
    _nad(net, NAD, CONF)
    net.subnet("att-sub", "172.30.0.0/24", provider=PROVIDER)
    attach = {ATTACHMENT_NETWORK_ANNOTATION: f"default/{NAD}"}
    a = net.create("att-a", annotations=attach)
    b = net.create("att-b", annotations=attach)
    assert [p.ifname for p in a.plans] == ["eth0", "net1"]
    net1_a, net1_b = a.plans[1], b.plans[1]
    assert net1_a.port == f"att-a.default.{PROVIDER}"
    assert net1_a.addresses[0].endswith("/24") and not net1_a.default_route
    ip_b = net1_b.ips
    net.reaches(a.netns, ip_b)
    net.reaches(b.netns, net1_a.ips)
    net.reaches(a.netns, "172.30.0.1")
    # the default network still works beside it, and no one holds .250
    net.reaches(a.netns, b.ip())
    net.silent(a.netns, "172.30.0.250")
