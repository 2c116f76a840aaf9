"""Port security and security groups end to end (kube-ovn v1.8.18
pod.go handleAddPod and handleUpdatePodSecurity, security_group.go).

The real controller, the API server emulator and a real NB ovsdb-server; NB rows are read back
with ovn-nbctl (tests/e2e/nbrows.py), independently of the controller's own client.
"""

from __future__ import annotations

import subprocess
from functools import partial
from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    PORT_SECURITY_ANNOTATION,
)
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import annotations_of, annotations_once, audit_clean, pod, running, wait_for
from tests.e2e.nbrows import nb_row, nb_rows
from tests.e2e.workloads import allocated

pytestmark = pytest.mark.e2e

NS = "default"
SG_ANNOTATION = "ovn.kubernetes.io/security_groups"
DENY_ALL_PG = "ovn.sg.kubeovn_deny_all"


def pg_ports(cluster: Cluster, pg: str) -> set[str]:
    row = nb_row(cluster.nb_server.remote, "Port_Group", pg)
    return set(row["ports"]) if row is not None else set()


def _has_port(cluster: Cluster, pg: str, port: str) -> bool:
    return port in pg_ports(cluster, pg)


def _only_port(cluster: Cluster, pg: str, port: str) -> bool:
    return pg_ports(cluster, pg) == {port}


def address_set(cluster: Cluster, name: str) -> set[str]:
    row = nb_row(cluster.nb_server.remote, "Address_Set", name)
    assert row is not None, f"address set {name} missing"
    return set(row["addresses"])


def lsp(cluster: Cluster, name: str) -> dict[str, Any]:
    row = nb_row(cluster.nb_server.remote, "Logical_Switch_Port", name)
    assert row is not None, f"LSP {name} missing"
    return row


def test_deny_all_port_group_exists_at_startup(ctl: Controller, cluster: Cluster) -> None:
    remote = cluster.nb_server.remote
    pg = nb_row(remote, "Port_Group", DENY_ALL_PG)
    assert pg is not None
    assert pg["external_ids"]["sg"] == "kubeovn_deny_all"
    assert pg["external_ids"]["type"] == "security_group"
    acls = {
        (a["direction"], a["match"], a["action"], a["priority"])
        for a in nb_rows(remote, "ACL")
        if a["_uuid"] in set(pg["acls"])
    }
    assert acls == {
        ("to-lport", f"outport == @{DENY_ALL_PG} && ip", "drop", 2003),
        ("from-lport", f"inport == @{DENY_ALL_PG} && ip", "drop", 2003),
    }


def test_port_security_and_several_groups(ctl: Controller, cluster: Cluster) -> None:
    store = cluster.server.store
    store.create(
        "pods",
        pod(
            "guarded",
            annotations={PORT_SECURITY_ANNOTATION: "true", SG_ANNOTATION: "web-a,db-b"},
        ),
    )
    store.create("pods", pod("locked", annotations={PORT_SECURITY_ANNOTATION: "true"}))
    store.create("pods", pod("plain", annotations={SG_ANNOTATION: "web-a"}))
    ann = allocated(cluster, "guarded")
    ip, mac = ann[IP_ADDRESS_ANNOTATION], ann[MAC_ADDRESS_ANNOTATION].lower()
    port = f"guarded.{NS}"
    row = lsp(cluster, port)
    assert row["port_security"] == [f"{mac} {ip}"]
    ids = row["external_ids"]
    assert ids["security_groups"] == "web-a,db-b"
    assert ids["associated_sg_web-a"] == "true" and ids["associated_sg_db-b"] == "true"
    # every listed group is honoured, not only the first; "-" becomes "." in NB names
    for sg in ("web.a", "db.b"):
        wait_for(partial(_has_port, cluster, f"ovn.sg.{sg}", port), message=f"PG {sg}")
        assert address_set(cluster, f"ovn.sg.{sg}.associated.v4") == {ip}
        assert address_set(cluster, f"ovn.sg.{sg}.associated.v6") == set()
    wait_for(lambda: port in pg_ports(cluster, DENY_ALL_PG), message="port in deny-all PG")

    # port security alone: the column, no group anywhere
    allocated(cluster, "locked")
    locked = lsp(cluster, f"locked.{NS}")
    assert len(locked["port_security"]) == 1 and len(locked["port_security"][0].split()) == 2
    assert "security_groups" not in locked["external_ids"]
    # a group without port security is ignored (kube-ovn #2343: both annotations are needed)
    allocated(cluster, "plain")
    plain = lsp(cluster, f"plain.{NS}")
    assert plain["port_security"] == []
    assert not any(k.startswith("associated_sg_") for k in plain["external_ids"])
    deny = pg_ports(cluster, DENY_ALL_PG)
    assert f"locked.{NS}" not in deny and f"plain.{NS}" not in deny
    assert pg_ports(cluster, "ovn.sg.web.a") == {port}
    audit_clean(cluster.argv())


def test_changing_the_groups_reassociates_and_delete_cleans(
    ctl: Controller, cluster: Cluster
) -> None:
    store = cluster.server.store
    store.create(
        "pods",
        pod("mover", annotations={PORT_SECURITY_ANNOTATION: "true", SG_ANNOTATION: "sg-a"}),
    )
    store.create(
        "pods",
        pod("stayer", annotations={PORT_SECURITY_ANNOTATION: "true", SG_ANNOTATION: "sg-a"}),
    )
    ip = allocated(cluster, "mover")[IP_ADDRESS_ANNOTATION]
    other_ip = allocated(cluster, "stayer")[IP_ADDRESS_ANNOTATION]
    port = f"mover.{NS}"
    wait_for(lambda: pg_ports(cluster, "ovn.sg.sg.a") == {port, f"stayer.{NS}"}, message="sg-a")
    assert address_set(cluster, "ovn.sg.sg.a.associated.v4") == {ip, other_ip}

    store.patch("pods", NS, "mover", {"metadata": {"annotations": {SG_ANNOTATION: "sg-b,sg-c"}}})
    wait_for(
        lambda: lsp(cluster, port)["external_ids"].get("associated_sg_sg-a") == "false",
        message="sg-a dissociated",
    )
    ids = lsp(cluster, port)["external_ids"]
    assert ids["security_groups"] == "sg-b,sg-c"
    assert ids["associated_sg_sg-b"] == "true" and ids["associated_sg_sg-c"] == "true"
    wait_for(lambda: pg_ports(cluster, "ovn.sg.sg.a") == {f"stayer.{NS}"}, message="sg-a left")
    assert address_set(cluster, "ovn.sg.sg.a.associated.v4") == {other_ip}
    for sg in ("sg.b", "sg.c"):
        wait_for(partial(_only_port, cluster, f"ovn.sg.{sg}", port), message=sg)
        assert address_set(cluster, f"ovn.sg.{sg}.associated.v4") == {ip}
    assert {port, f"stayer.{NS}"} <= pg_ports(cluster, DENY_ALL_PG)

    # clearing the groups keeps port security but leaves every group and the deny-all PG
    store.patch("pods", NS, "stayer", {"metadata": {"annotations": {SG_ANNOTATION: ""}}})
    wait_for(lambda: pg_ports(cluster, "ovn.sg.sg.a") == set(), message="sg-a emptied")
    assert address_set(cluster, "ovn.sg.sg.a.associated.v4") == set()
    wait_for(lambda: f"stayer.{NS}" not in pg_ports(cluster, DENY_ALL_PG), message="deny-all")
    assert lsp(cluster, f"stayer.{NS}")["port_security"] == [
        f"{annotations_of(cluster.server, 'pods', NS, 'stayer')[MAC_ADDRESS_ANNOTATION].lower()}"
        f" {other_ip}"
    ]

    store.delete("pods", NS, "mover")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.sg.b") == set(), message="sg-b emptied")
    wait_for(
        lambda: address_set(cluster, "ovn.sg.sg.c.associated.v4") == set(),
        message="sg-c address set emptied",
    )
    assert port not in pg_ports(cluster, DENY_ALL_PG)
    audit_clean(cluster.argv())


def test_turning_port_security_on_and_off_later(ctl: Controller, cluster: Cluster) -> None:
    # kube-ovn #1143/#2343: v1.8 never changes port_security after creation; here the security
    # queue re-applies it, so the groups take effect once both annotations are set
    store = cluster.server.store
    store.create("pods", pod("late", annotations={SG_ANNOTATION: "late-sg"}))
    ann = allocated(cluster, "late")
    ip, mac = ann[IP_ADDRESS_ANNOTATION], ann[MAC_ADDRESS_ANNOTATION].lower()
    port = f"late.{NS}"
    assert lsp(cluster, port)["port_security"] == []

    store.patch(
        "pods", NS, "late", {"metadata": {"annotations": {PORT_SECURITY_ANNOTATION: "true"}}}
    )
    wait_for(lambda: lsp(cluster, port)["port_security"] == [f"{mac} {ip}"], message="enabled")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.late.sg") == {port}, message="in late-sg")
    assert address_set(cluster, "ovn.sg.late.sg.associated.v4") == {ip}
    assert lsp(cluster, port)["external_ids"]["associated_sg_late-sg"] == "true"
    wait_for(lambda: port in pg_ports(cluster, DENY_ALL_PG), message="in deny-all")

    store.patch(
        "pods", NS, "late", {"metadata": {"annotations": {PORT_SECURITY_ANNOTATION: "false"}}}
    )
    wait_for(lambda: lsp(cluster, port)["port_security"] == [], message="disabled")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.late.sg") == set(), message="left late-sg")
    assert address_set(cluster, "ovn.sg.late.sg.associated.v4") == set()
    wait_for(lambda: port not in pg_ports(cluster, DENY_ALL_PG), message="left deny-all")
    audit_clean(cluster.argv())


def test_groups_survive_a_lost_port_and_a_restart(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    first = running(start_controller())
    store.create(
        "pods",
        pod("sturdy", annotations={PORT_SECURITY_ANNOTATION: "true", SG_ANNOTATION: "keep"}),
    )
    ip = allocated(cluster, "sturdy")[IP_ADDRESS_ANNOTATION]
    port = f"sturdy.{NS}"
    wait_for(lambda: port in pg_ports(cluster, DENY_ALL_PG), message="in deny-all")

    # inspection re-creates a lost port (--inspect-interval=1), groups included
    cluster.nb.delete_port(port)
    wait_for(lambda: cluster.nb.get_port(port) is not None, message="port re-created")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.keep") == {port}, message="back in keep")
    wait_for(lambda: port in pg_ports(cluster, DENY_ALL_PG), message="back in deny-all")
    assert address_set(cluster, "ovn.sg.keep.associated.v4") == {ip}

    # a controller starting up puts SG-bearing ports back into the deny-all group
    first.stop()
    result = subprocess.run(
        [
            "ovn-nbctl",
            f"--db={cluster.nb_server.remote}",
            "clear",
            "Port_Group",
            DENY_ALL_PG,
            "ports",
        ],
        capture_output=True,
        timeout=15,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert pg_ports(cluster, DENY_ALL_PG) == set()
    running(
        start_controller(identity="controller-b"),
        "second controller started",
        timeout=30,
    )
    assert port in pg_ports(cluster, DENY_ALL_PG)
    audit_clean(cluster.argv())


def test_attachment_network_security_groups(ctl: Controller, cluster: Cluster) -> None:
    # the per-provider keys of a multus OVN attachment (<nad>.<ns>.ovn.kubernetes.io/...)
    store = cluster.server.store
    provider = f"net1.{NS}.ovn"
    store.create(
        "network-attachment-definitions",
        {
            "metadata": {"name": "net1", "namespace": NS},
            "spec": {"config": '{"cniVersion": "0.3.1", "type": "kube-ovn"}'},
        },
    )
    store.create(
        "subnets",
        {
            "metadata": {"name": "attach"},
            "spec": {"cidrBlock": "10.20.0.0/24", "provider": provider},
        },
    )
    wait_for(lambda: "attach" in cluster.nb.list_logical_switches(), message="switch attach")
    store.create(
        "pods",
        pod(
            "multi",
            annotations={
                "k8s.v1.cni.cncf.io/networks": "net1",
                f"{provider}.kubernetes.io/port_security": "true",
                f"{provider}.kubernetes.io/security_groups": "att-a",
            },
        ),
    )
    ann = wait_for(
        lambda: annotations_once(
            cluster.server, "pods", NS, "multi", f"{provider}.kubernetes.io/allocated", "true"
        ),
        message="attachment allocated",
    )
    ip = ann[f"{provider}.kubernetes.io/ip_address"]
    port = f"multi.{NS}.{provider}"
    wait_for(lambda: pg_ports(cluster, "ovn.sg.att.a") == {port}, message="in att-a")
    assert address_set(cluster, "ovn.sg.att.a.associated.v4") == {ip}
    assert port in pg_ports(cluster, DENY_ALL_PG)
    assert f"multi.{NS}" not in pg_ports(cluster, DENY_ALL_PG)  # the default port asked nothing

    store.patch(
        "pods",
        NS,
        "multi",
        {"metadata": {"annotations": {f"{provider}.kubernetes.io/security_groups": "att-b"}}},
    )
    wait_for(lambda: pg_ports(cluster, "ovn.sg.att.b") == {port}, message="in att-b")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.att.a") == set(), message="left att-a")
    audit_clean(cluster.argv())

    store.delete("pods", NS, "multi")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.att.b") == set(), message="att-b emptied")
    wait_for(
        lambda: address_set(cluster, "ovn.sg.att.b.associated.v4") == set(), message="set emptied"
    )
    assert port not in pg_ports(cluster, DENY_ALL_PG)
    audit_clean(cluster.argv())
