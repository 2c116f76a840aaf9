"""inspect_pod: what the periodic inspection re-queues (kube-ovn v1.8.18 pod.go inspectPod):
terminating pods are skipped, only pods with the `ovn` network are re-routed."""

from __future__ import annotations

from controller import pod_logic as pl
from controller.core.model import PodNet, ProviderType
from controller.testing.builders import NOW
from controller.testing.models import pod, subnet

DEFAULT = subnet("ovn-default", "10.16.0.0/16")
OTHER = subnet("other", "10.18.0.0/24")


def test_inspect_pod_skips_terminating_pods() -> None:
    net = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
    annotations = {"ovn.kubernetes.io/allocated": "true"}
    live = pod("p", annotations=annotations, node_name="n1")
    assert pl.inspect_pod(live, [net], lambda _: False, NOW, keep_vm_ip=False).lost_providers
    terminating = pod("p", annotations=annotations, node_name="n1", deletion_timestamp=NOW)
    assert pl.inspect_pod(terminating, [net], lambda _: False, NOW, keep_vm_ip=False) == (
        pl.InspectResult()
    )


def test_inspect_pod_reroutes_only_pods_with_the_ovn_network() -> None:
    # handleUpdatePod only routes the `ovn` network (and refuses a pod without it): a pod whose
    # default network is replaced by an attachment must not be re-queued for routes every pass
    att = PodNet(ProviderType.ORIGINAL, "net1.ns.ovn", OTHER, True)
    override = pod("p", annotations={"net1.ns.ovn.kubernetes.io/allocated": "true"}, node_name="n1")
    assert pl.inspect_pod(override, [att], lambda _: True, NOW, keep_vm_ip=False) == (
        pl.InspectResult()
    )
    ovn = PodNet(ProviderType.ORIGINAL, "ovn", DEFAULT, True)
    both = pod(
        "p",
        annotations={
            "net1.ns.ovn.kubernetes.io/allocated": "true",
            "ovn.kubernetes.io/allocated": "true",
        },
        node_name="n1",
    )
    result = pl.inspect_pod(both, [att, ovn], lambda _: True, NOW, keep_vm_ip=False)
    assert result.needs_update
