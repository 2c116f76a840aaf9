"""Orphan and missing-port repair end to end (kube-ovn gc.go and
inspection.go), the parts
`test_pods.py` / `test_restart.py` leave out: the gc's two-pass guard (an orphan survives the
pass that first sees it), and the inspection re-creating the lost port of a StatefulSet pod and of
a VM under --keep-vm-ip (named after the VM)."""

from __future__ import annotations

from functools import partial

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION
from controller.ovn.api import PortSpec
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import HANDMADE_STS, get_or_none, running, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    lsp,
    pod,
    quiet,
    settled,
    start_graceful,
    statefulset,
    virtual_machine,
)

pytestmark = pytest.mark.e2e

KEEP = "--keep-vm-ip=true"


def test_gc_deletes_an_orphan_only_on_the_second_pass_that_sees_it(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller())  # --gc-interval is 6 min: only the passes run here count
    cluster.server.store.create("pods", pod("live"))
    allocated(cluster, "live")
    cluster.nb.create_port(
        PortSpec(
            name=f"ghost.{NS}",
            switch="ovn-default",
            mac="00:00:00:ab:cd:ef",
            ips=("10.16.0.201",),
            pod_name="ghost",
            pod_namespace=NS,
        )
    )
    cluster.server.store.create(
        "ips",
        {
            "metadata": {"name": f"spook.{NS}"},
            "spec": {
                "podName": "spook",
                "namespace": NS,
                "subnet": "ovn-default",
                "ipAddress": "10.16.0.202",
                "v4IpAddress": "10.16.0.202",
                "macAddress": "00:00:00:ab:cd:ee",
            },
        },
    )
    nb = ctl.nb
    assert nb is not None
    wait_for(lambda: nb.get_port(f"ghost.{NS}"), message="the controller sees the port")
    wait_for(
        lambda: ctl.informers["ips"].get_indexer().get_by_key(f"spook.{NS}"),
        message="the controller sees the IP CR",
    )
    ctl.gc.run_once()  # first sighting: marked only
    assert cluster.nb.get_port(f"ghost.{NS}") is not None
    assert get_or_none(cluster.server, "ips", None, f"spook.{NS}") is not None
    ctl.gc.run_once()  # orphaned in the previous pass as well: deleted
    wait_for(lambda: cluster.nb.get_port(f"ghost.{NS}") is None, message="orphan port deleted")
    assert get_or_none(cluster.server, "ips", None, f"spook.{NS}") is None
    lsp(cluster, f"live.{NS}")
    settled(cluster)


@pytest.mark.emulator_only(HANDMADE_STS)
def test_inspection_recreates_lost_statefulset_and_vm_ports(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, KEEP)  # --inspect-interval=1
    store = cluster.server.store
    store.create("pods", pod("db-0", owner=statefulset(cluster, "db", 1)))
    store.create("pods", pod("virt-launcher-vm1-aaaaa", owner=virtual_machine(cluster, "vm1")))
    sts_ip = allocated(cluster, "db-0")[IP_ADDRESS_ANNOTATION]
    vm_ip = allocated(cluster, "virt-launcher-vm1-aaaaa")[IP_ADDRESS_ANNOTATION]
    quiet(ctl)
    for port, ip in ((f"db-0.{NS}", sts_ip), (f"vm1.{NS}", vm_ip)):
        cluster.nb.delete_port(port)
        found = wait_for(partial(cluster.nb.get_port, port), message=f"{port} re-created")
        assert found.addresses[0].split()[1:] == [ip]
    assert allocated(cluster, "db-0")[IP_ADDRESS_ANNOTATION] == sts_ip
    assert allocated(cluster, "virt-launcher-vm1-aaaaa")[IP_ADDRESS_ANNOTATION] == vm_ip
    settled(cluster, KEEP)
