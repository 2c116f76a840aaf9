"""The pod controller's owner checks end to end: a running StatefulSet or VM pod keeps its network
when the owner is missing from a lagging owner cache, because the check confirms with the API."""

from __future__ import annotations

import pytest

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    lsp,
    pod,
    quiet,
    start_graceful,
    statefulset,
    virtual_machine,
)

pytestmark = pytest.mark.e2e


def _lag_owner_cache(ctl: Controller, informer: str, key: str) -> None:
    """The owner informer has not seen the object (a lagging or not yet synced cache)."""
    indexer = ctl.informers[informer].get_indexer()
    wait_for(lambda: indexer.get_by_key(key), message=f"{key} cached")
    indexer.delete(indexer.get_by_key(key))


def _touch_and_settle(cluster: Cluster, ctl: Controller, name: str) -> None:
    """An ordinary update of a running pod, seen by the controller's pod informer."""
    store = cluster.server.store
    new = store.patch("pods", NS, name, {"metadata": {"labels": {"touched": "yes"}}})
    rv = new["metadata"]["resourceVersion"]
    pods = ctl.informers["pods"].get_indexer()
    wait_for(
        lambda: (
            (pods.get_by_key(f"{NS}/{name}") or {}).get("metadata", {}).get("resourceVersion") == rv
        ),
        message="pod update cached",
    )
    quiet(ctl)


@pytest.mark.emulator_only(
    "a hand-made StatefulSet (no pod template) and the emulator's fault injection; the real-plane "
    "side is tests/controlplane/test_uid_precondition_and_owner_get.py"
)
def test_running_statefulset_pod_keeps_network_when_owner_cache_lags(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller)
    owner = statefulset(cluster, "web", 2)
    cluster.server.store.create("pods", pod("web-0", owner=owner))
    ip = allocated(cluster, "web-0")[IP_ADDRESS_ANNOTATION]
    lsp(cluster, f"web-0.{NS}")
    _lag_owner_cache(ctl, "statefulsets", f"{NS}/web")
    _touch_and_settle(cluster, ctl, "web-0")
    assert ctl.ipam.get_ip_owner(ip, "ovn-default") == f"{NS}/web-0"
    assert cluster.nb.get_port(f"web-0.{NS}") is not None


def test_running_vm_pod_keeps_network_when_owner_cache_lags(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, "--keep-vm-ip=true")
    owner = virtual_machine(cluster, "vm1")
    cluster.server.store.create("pods", pod("virt-launcher-vm1-x", owner=owner))
    ip = allocated(cluster, "virt-launcher-vm1-x")[IP_ADDRESS_ANNOTATION]
    lsp(cluster, f"vm1.{NS}")
    _lag_owner_cache(ctl, "vms", f"{NS}/vm1")
    _touch_and_settle(cluster, ctl, "virt-launcher-vm1-x")
    assert ctl.ipam.get_ip_owner(ip, "ovn-default") == f"{NS}/vm1"
    assert cluster.nb.get_port(f"vm1.{NS}") is not None
    assert cluster.server.store.get("ips", None, f"vm1.{NS}")
