"""KubeVirt VM pods under --keep-vm-ip end to end (kube-ovn pod.go
handleAddPod, handleDeletePod): the
port and the IP CR are named after the VM, survive the re-creation of the VM's launcher pod, and
are released when the VM is deleted; also across a controller restart while the VM has no pod.

Without --keep-vm-ip a launcher pod is an ordinary pod: its network goes with it."""

from __future__ import annotations

import pytest

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION, MAC_ADDRESS_ANNOTATION
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import get_or_none, running, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    delete_pod,
    gone,
    lsp,
    pod,
    quiet,
    settled,
    start_graceful,
    virtual_machine,
)

pytestmark = pytest.mark.e2e

SUBNET = "ovn-default"
VM_ANNOTATION = "ovn.kubernetes.io/virtualmachine"
KEEP = "--keep-vm-ip=true"


def assert_vm_network(ctl: Controller, cluster: Cluster, vm: str, ip: str, mac: str) -> None:
    port = lsp(cluster, f"{vm}.{NS}")
    assert port.addresses == (f"{mac.lower()} {ip}",)
    cr = cluster.server.store.get("ips", None, f"{vm}.{NS}")
    assert cr["spec"]["podName"] == vm and cr["spec"]["podType"] == "VirtualMachine"
    assert cr["spec"]["ipAddress"] == ip
    assert ctl.ipam.get_ip_owner(ip, SUBNET) == f"{NS}/{vm}"


def test_vm_keeps_its_address_across_launcher_pods_until_deleted(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, KEEP)
    store = cluster.server.store
    owner = virtual_machine(cluster, "vm1")
    store.create("pods", pod("virt-launcher-vm1-aaaaa", owner=owner))
    first = allocated(cluster, "virt-launcher-vm1-aaaaa")
    ip, mac = first[IP_ADDRESS_ANNOTATION], first[MAC_ADDRESS_ANNOTATION]
    assert first[VM_ANNOTATION] == "vm1"
    assert_vm_network(ctl, cluster, "vm1", ip, mac)
    assert cluster.nb.get_port(f"virt-launcher-vm1-aaaaa.{NS}") is None
    settled(cluster, KEEP)

    # the VM restarts: its launcher pod goes and a new one (another name) comes
    delete_pod(cluster, "virt-launcher-vm1-aaaaa")
    quiet(ctl)
    assert_vm_network(ctl, cluster, "vm1", ip, mac)
    settled(cluster, KEEP)  # the VM's kept port and IP CR are not orphans
    store.create("pods", pod("other"))
    store.create("pods", pod("virt-launcher-vm1-bbbbb", owner=owner))
    second = allocated(cluster, "virt-launcher-vm1-bbbbb")
    assert (second[IP_ADDRESS_ANNOTATION], second[MAC_ADDRESS_ANNOTATION]) == (ip, mac)
    assert allocated(cluster, "other")[IP_ADDRESS_ANNOTATION] != ip
    assert_vm_network(ctl, cluster, "vm1", ip, mac)
    settled(cluster, KEEP)

    # the VM is deleted: its pod's termination releases everything
    store.delete("virtualmachines", NS, "vm1")
    gone(cluster, "virtualmachines", "vm1", NS)
    delete_pod(cluster, "virt-launcher-vm1-bbbbb")
    wait_for(lambda: cluster.nb.get_port(f"vm1.{NS}") is None, message="VM port deleted")
    gone(cluster, "ips", f"vm1.{NS}")
    wait_for(lambda: ctl.ipam.get_pod_address(f"{NS}/vm1") == [], message="VM address released")
    assert not ctl.ipam.get_ip_owner(ip, SUBNET)
    settled(cluster, KEEP)


@pytest.mark.parametrize("stopped", ["deleted", "failed"])
def test_vm_address_survives_a_restart_while_the_vm_has_no_live_pod(
    cluster: Cluster, start_controller: StartController, stopped: str
) -> None:
    # "failed": kube-ovn #2709, a VM pod (restartPolicy Never) that failed is not alive, so
    # rebuilding IPAM from live pods alone forgets the VM's address
    first = start_graceful(cluster, start_controller, KEEP)
    store = cluster.server.store
    owner = virtual_machine(cluster, "vm2")
    launcher = pod("virt-launcher-vm2-aaaaa", owner=owner)
    launcher["spec"]["restartPolicy"] = "Never"
    store.create("pods", launcher)
    ann = allocated(cluster, "virt-launcher-vm2-aaaaa")
    ip, mac = ann[IP_ADDRESS_ANNOTATION], ann[MAC_ADDRESS_ANNOTATION]
    first.stop()
    assert first.wait(15) == 0

    # the VM stops while no controller runs
    if stopped == "deleted":
        delete_pod(cluster, "virt-launcher-vm2-aaaaa")
    else:
        store.patch("pods", NS, "virt-launcher-vm2-aaaaa", {"status": {"phase": "Failed"}})
    second = running(start_controller(KEEP, identity="controller-b"), "second controller started")
    store.create("pods", pod("squatter"))  # would take vm2's address if InitIPAM forgot it
    assert allocated(cluster, "squatter")[IP_ADDRESS_ANNOTATION] != ip
    assert_vm_network(second, cluster, "vm2", ip, mac)
    store.create("pods", pod("virt-launcher-vm2-bbbbb", owner=owner))
    assert allocated(cluster, "virt-launcher-vm2-bbbbb")[IP_ADDRESS_ANNOTATION] == ip
    settled(cluster, KEEP)


def test_without_keep_vm_ip_a_launcher_pod_is_an_ordinary_pod(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller)
    store = cluster.server.store
    owner = virtual_machine(cluster, "vm3")
    store.create("pods", pod("virt-launcher-vm3-aaaaa", owner=owner))
    ann = allocated(cluster, "virt-launcher-vm3-aaaaa")
    assert VM_ANNOTATION not in ann
    lsp(cluster, f"virt-launcher-vm3-aaaaa.{NS}")
    assert get_or_none(cluster.server, "ips", None, f"vm3.{NS}") is None
    delete_pod(cluster, "virt-launcher-vm3-aaaaa")
    wait_for(
        lambda: cluster.nb.get_port(f"virt-launcher-vm3-aaaaa.{NS}") is None,
        message="launcher port deleted",
    )
    gone(cluster, "ips", f"virt-launcher-vm3-aaaaa.{NS}")
    quiet(ctl)
    assert not ctl.ipam.get_ip_owner(ann[IP_ADDRESS_ANNOTATION], SUBNET)
    settled(cluster)


def test_gc_releases_a_stopped_vms_address_once_the_vm_is_deleted(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = start_graceful(cluster, start_controller, KEEP, "--gc-interval=0.3")
    store = cluster.server.store
    owner = virtual_machine(cluster, "vm4")
    store.create("pods", pod("virt-launcher-vm4-aaaaa", owner=owner))
    ann = allocated(cluster, "virt-launcher-vm4-aaaaa")
    ip, mac = ann[IP_ADDRESS_ANNOTATION], ann[MAC_ADDRESS_ANNOTATION]
    delete_pod(cluster, "virt-launcher-vm4-aaaaa")  # the VM is stopped: no pod, network kept
    quiet(ctl)
    assert_vm_network(ctl, cluster, "vm4", ip, mac)
    store.delete("virtualmachines", NS, "vm4")  # no pod event will follow: the gc cleans up
    wait_for(lambda: cluster.nb.get_port(f"vm4.{NS}") is None, message="VM port collected")
    gone(cluster, "ips", f"vm4.{NS}")
    wait_for(lambda: not ctl.ipam.get_ip_owner(ip, SUBNET), message="VM address released")
    settled(cluster, KEEP)
