"""SubnetIpamTracker: IPAM follows Subnets when another controller owns them."""

from __future__ import annotations

from typing import Any

from controller.cache import DeletedFinalStateUnknown
from controller.controllers.subnet_ipam import SubnetIpamTracker
from controller.ipam import IPAM


def _subnet(name: str, cidr: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"cidrBlock": cidr, **spec}}


def test_ipam_follows_subnets_without_subnet_controller_unit() -> None:
    ipam = IPAM()
    registered: list[str] = []
    tracker = SubnetIpamTracker(ipam, lambda: True, registered.append).event_handler()
    old = _subnet("s1", "10.1.0.0/24")
    tracker.on_add(old, False)
    # the gateway (first address, formatted in) is never handed out
    assert ipam.get_random_address("a", "s1")[0] == "10.1.0.2"
    new = _subnet("s1", "10.1.0.0/24", excludeIps=["10.1.0.2..10.1.0.9"])
    tracker.on_update(old, new)
    assert ipam.get_random_address("b", "s1")[0] == "10.1.0.10"
    tracker.on_update(new, {**new, "status": {"v4usingIPs": 2}})  # status only: no re-register
    assert registered == ["s1", "s1"]
    tracker.on_delete(DeletedFinalStateUnknown("s1", None))
    assert not ipam.has_subnet("s1")


def test_subnet_ipam_tracker_skips_malformed_and_followers() -> None:
    ipam = IPAM()
    leader = False
    tracker = SubnetIpamTracker(ipam, lambda: leader).event_handler()
    tracker.on_add(_subnet("s1", "10.1.0.0/24"), False)
    assert not ipam.has_subnet("s1")
    leader = True
    tracker.on_add(_subnet("bad", "10.1.0/24"), False)
    tracker.on_add({"metadata": {"name": "typed"}, "spec": {"cidrBlock": 7}}, False)
    tracker.on_add("not an object", False)
    assert ipam.subnet_names() == []
    gone = _subnet("s2", "10.2.0.0/24")
    tracker.on_add(gone, False)
    tracker.on_update(gone, {**gone, "metadata": {"name": "s2", "deletionTimestamp": "x"}})
    assert not ipam.has_subnet("s2")
