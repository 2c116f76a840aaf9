"""SecurityGroupGc over the fake NB: rows of deleted SecurityGroups go after two passes."""

from __future__ import annotations

from controller.controllers.gc.security_groups import SecurityGroupGc
from controller.core.security_group import plan_security_group
from controller.ovn.api import PortSpec
from controller.testing.fake_nb import FakeNbClient

LS = "ovn-default"


def setup() -> tuple[FakeNbClient, set[str]]:
    nb = FakeNbClient()
    nb.ensure_logical_router("ovn-cluster")
    nb.ensure_logical_switch(LS, "ovn-cluster", "10.16.0.0/16", "10.16.0.1", {})
    nb.create_sg_port_group("kubeovn_deny_all")
    for sg in ("alive", "gone", "named"):
        nb.apply_security_group(sg, plan_security_group(sg, {"allowSameGroupTraffic": True}).acls)
    nb.create_port(
        PortSpec(
            "p.ns",
            LS,
            "00:00:00:00:00:01",
            ("10.16.0.2",),
            pod_name="p",
            pod_namespace="ns",
            port_security=True,
            security_groups=("named",),
        )
    )
    nb.sync_sg_ports("named")
    return nb, {"alive"}


def test_two_passes_then_delete_or_clear() -> None:
    nb, existing = setup()
    counted: list[tuple[str, int]] = []
    gc = SecurityGroupGc(nb, existing.__contains__, lambda r, n: counted.append((r, n)))
    ports = nb.list_ports()
    assert gc.sweep(ports) == []  # first sighting only marks
    assert gc.sweep(ports) == ["delete gone", "clear-acls named"]
    rows = {r.sg: r for r in nb.list_security_groups()}
    assert "gone" not in rows
    assert rows["named"].acls == () and rows["named"].ports == ("p.ns",)
    assert rows["named"].address_sets["ovn.sg.named.associated.v4"] == ("10.16.0.2",)
    assert len(rows["alive"].acls) == 4
    assert "kubeovn_deny_all" in rows and len(rows["kubeovn_deny_all"].acls) == 2
    assert counted == [("security_group", 1), ("security_group_acls", 1)]
    assert gc.sweep(nb.list_ports()) == []  # nothing left to do


def test_a_group_back_before_the_second_pass_is_kept() -> None:
    nb, existing = setup()
    gc = SecurityGroupGc(nb, existing.__contains__)
    gc.sweep(nb.list_ports())
    existing.add("gone")
    assert gc.sweep(nb.list_ports()) == ["clear-acls named"]
    assert "gone" in {r.sg for r in nb.list_security_groups()}


def test_a_group_seen_once_then_kept_resets_its_mark() -> None:
    nb, existing = setup()
    gc = SecurityGroupGc(nb, existing.__contains__)
    gc.sweep(nb.list_ports())
    existing.add("gone")
    gc.sweep(nb.list_ports())
    existing.discard("gone")
    assert "delete gone" not in gc.sweep(nb.list_ports())  # a fresh first sighting
    assert "delete gone" in gc.sweep(nb.list_ports())
