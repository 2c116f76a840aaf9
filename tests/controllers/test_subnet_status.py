"""Subnet status conditions written by the subnet controller (kube-ovn v1.8.18 patchSubnetStatus,
reconcileGateway): state asserted on the fake API's stored Subnet, the informer cache fed from it.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.cache import DeletedFinalStateUnknown, Indexer
from controller.config import parse_args
from controller.controllers.subnet import SubnetController, SubnetQueues
from controller.controllers.subnet_status import SubnetConditions
from controller.core.errors import PermanentError, ResourceNotReadyError
from controller.ipam import IPAM
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.testing.builders import node, subnet
from controller.testing.clock import FakeClock
from controller.testing.fake_kube import FakeEventRecorder, FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from controller.view import CachedObject
from tests.controllers.helpers import RecordingCluster

CONFIG = parse_args(["--ovn-nb-addr=tcp:127.0.0.1:6641", "--leader-elect=false"], {})
START = datetime(2026, 1, 1, tzinfo=UTC)


def ready_node(name: str, *, ready: bool = True, join: str = "100.64.0.2") -> dict[str, Any]:
    raw = node(name, "172.18.0.2", annotations={"ovn.kubernetes.io/ip_address": join})
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return raw


class World:
    def __init__(self, *subnets: dict[str, Any]) -> None:
        self.kube = FakeKubeApi()
        self.nb = FakeNbClient()
        self.nb.ensure_logical_router("ovn-cluster")
        self.subnets = Indexer()
        self.nodes = Indexer()
        self.now = START
        self.leader = True
        self.recorder = FakeEventRecorder()
        clock = FakeClock()
        self.queues = SubnetQueues(
            *(RateLimitingQueue[str](default_controller_rate_limiter(), clock=clock) for _ in "ads")
        )
        self.conditions = SubnetConditions(
            kube=self.kube,
            nb=self.nb,
            nodes=self.nodes,
            subnets=self.subnets,
            node_switch="join",
            wall_clock=lambda: self.now,
        )
        self.cluster = RecordingCluster()
        self.ctl = SubnetController(
            config=CONFIG,
            subnets=self.subnets,
            vpcs=Indexer(),
            kube=self.kube,
            cluster=self.cluster,
            nb=self.nb,
            ipam=IPAM(),
            recorder=self.recorder,
            queues=self.queues,
            is_leader=lambda: self.leader,
            nodes=self.nodes,
            conditions=self.conditions,
        )
        for s in subnets:
            self.kube.create_subnet(s)
        self.sync()

    def sync(self) -> None:
        for obj in self.kube.subnets.values():
            self.subnets.update(obj)

    def add(self, name: str) -> None:
        with contextlib.suppress(PermanentError):
            self.ctl.handle_add_subnet(name)
        self.status(name)

    def status(self, name: str) -> None:
        while len(self.queues.status):
            key, _ = self.queues.status.get()
            assert key is not None
            self.ctl.handle_update_subnet_status(key)
            self.queues.status.done(key)
            self.sync()

    def conditions_of(self, name: str) -> dict[str, tuple[str, str]]:
        conds = (self.kube.subnets[name].get("status") or {}).get("conditions") or []
        return {c["type"]: (c["status"], c["reason"]) for c in conds}


def test_a_subnet_with_its_switch_in_place_is_validated_and_ready() -> None:
    # kube-ovn's CNI daemon routes a subnet on the node only once it is Ready
    w = World(subnet("s1", "10.1.0.0/24"))
    w.add("s1")
    assert w.conditions_of("s1") == {
        "Validated": ("True", "ResetLogicalSwitchAclSuccess"),
        "Ready": ("True", "ResetLogicalSwitchAclSuccess"),
        "Error": ("Unknown", "Init"),
    }
    status = w.kube.subnets["s1"]["status"]
    assert status["v4availableIPs"] == 253  # the usage counters are still written


def test_an_invalid_spec_is_error_not_validated_not_ready_and_one_warning() -> None:
    # the Warning Event and the conditions both say why
    w = World(subnet("bad", "10.1.0.0/33"))
    w.add("bad")
    assert w.conditions_of("bad") == {
        "Error": ("True", "ValidateLogicalSwitchFailed"),
        "Validated": ("False", "ValidateLogicalSwitchFailed"),
        "Ready": ("False", "ValidateLogicalSwitchFailed"),
    }
    conds = w.kube.subnets["bad"]["status"]["conditions"]
    assert all("10.1.0.0/33" in c["message"] for c in conds)
    [event] = w.recorder.events
    assert (event.type, event.reason) == ("Warning", "ValidateLogicalSwitchFailed")


def test_no_status_write_when_nothing_changed() -> None:
    w = World(subnet("s1", "10.1.0.0/24"))
    w.add("s1")
    writes = w.kube.calls.count("update_subnet_status s1")
    w.now = START + timedelta(minutes=5)
    w.ctl.resync_status()
    w.queues.status.add("s1")
    w.status("s1")
    assert writes >= 1 and w.kube.calls.count("update_subnet_status s1") == writes


def test_an_ipam_only_subnet_gets_no_conditions() -> None:
    w = World(subnet("mac", "10.2.0.0/24", provider="macvlan.default"))
    w.add("mac")
    assert w.conditions_of("mac") == {}


def test_a_centralized_subnet_follows_its_gateway_nodes_readiness() -> None:
    # a node's readiness change re-queues the subnet; no ready gateway is NoReadyGateway
    w = World(subnet("c1", "10.3.0.0/24", gatewayType="centralized", gatewayNode="n1,n2"))
    handler = w.conditions.node_event_handler(w.ctl.enqueue_status, lambda: w.leader)
    down = ready_node("n1", ready=False)
    w.nodes.add(down)
    handler.on_add(down, False)
    w.add("c1")
    assert w.conditions_of("c1") == {
        "Validated": ("True", "NoReadyGateway"),
        "Ready": ("False", "NoReadyGateway"),
        "Error": ("Unknown", "Init"),
    }
    first = {c["type"]: c for c in w.kube.subnets["c1"]["status"]["conditions"]}

    w.now = START + timedelta(minutes=1)
    up = ready_node("n1")
    w.nodes.update(up)
    handler.on_update(down, up)
    assert w.queues.status.pending() or len(w.queues.status)
    w.queues.status.add("c1")  # the delayed add is due on the fake clock; take it now
    w.status("c1")
    assert w.conditions_of("c1")["Ready"] == ("True", "ResetLogicalSwitchAclSuccess")
    after = {c["type"]: c for c in w.kube.subnets["c1"]["status"]["conditions"]}
    assert after["Ready"]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert after["Validated"]["lastTransitionTime"] == first["Validated"]["lastTransitionTime"]

    # a node the subnet does not list changes nothing; losing the join address does
    other = ready_node("n9", ready=False)
    handler.on_add(other, False)
    assert w.conditions.subnets_listing("n9") == []
    no_join = ready_node("n1", join="")
    w.nodes.update(no_join)
    handler.on_update(up, no_join)
    w.queues.status.add("c1")
    w.status("c1")
    assert w.conditions_of("c1")["Ready"] == ("False", "NoReadyGateway")


def test_a_node_update_that_keeps_readiness_and_join_address_queues_nothing() -> None:
    w = World(subnet("c1", "10.3.0.0/24", gatewayType="centralized", gatewayNode="n1"))
    queued: list[str] = []
    handler = w.conditions.node_event_handler(queued.append, lambda: w.leader)
    old = ready_node("n1")
    new = ready_node("n1")
    new["metadata"]["labels"] = {"x": "y"}
    handler.on_update(old, new)
    assert queued == []
    handler.on_update(old, ready_node("n1", ready=False))
    assert queued == ["c1"]


def test_the_written_spec_fills_the_printer_columns_kube_ovn_always_serialises() -> None:
    # kubectl's PRIVATE, NAT and DEFAULT columns read spec.private/natOutgoing/default
    w = World(subnet("s1", "10.1.0.0/24"))
    w.add("s1")
    spec = w.cluster.replaced[-1]["spec"]
    assert (spec["private"], spec["natOutgoing"], spec["default"]) == (False, False, False)
    assert spec["gatewayNode"] == ""


def test_conditions_wait_for_the_switch_and_a_new_subnet_queues_its_status() -> None:
    w = World(subnet("s1", "10.1.0.0/24"))
    with pytest.raises(ResourceNotReadyError):  # the status queue retries it with backoff
        w.conditions.reconcile(CachedObject.of(w.kube.subnets["s1"]))
    assert w.conditions_of("s1") == {}
    queued: list[str] = []
    handler = w.conditions.subnet_event_handler(queued.append, lambda: w.leader)
    raw = w.kube.subnets["s1"]
    handler.on_add(raw, False)
    handler.on_update(raw, {**raw, "status": {"v4usingIPs": 1}})  # a status write: nothing
    handler.on_update(raw, {**raw, "spec": {**raw["spec"], "gatewayType": "centralized"}})
    assert queued == ["s1", "s1"]


def test_a_follower_queues_no_conditions() -> None:
    w = World(subnet("c1", "10.3.0.0/24", gatewayType="centralized", gatewayNode="n1"))
    w.leader = False
    queued: list[str] = []
    subnets = w.conditions.subnet_event_handler(queued.append, lambda: w.leader)
    nodes = w.conditions.node_event_handler(queued.append, lambda: w.leader)
    subnets.on_add(w.kube.subnets["c1"], False)
    nodes.on_add(ready_node("n1"), False)
    nodes.on_delete(DeletedFinalStateUnknown("n1", None))
    assert queued == []
    w.leader = True
    nodes.on_delete(DeletedFinalStateUnknown("n1", None))  # a tombstone names its node
    assert queued == ["c1"]


def test_usage_counters_are_written_while_the_conditions_wait_for_the_switch() -> None:
    # a custom VPC without a router yet: IPAM knows the subnet, its switch does not exist
    w = World(subnet("v1", "10.5.0.0/24", vpc="vpc-without-router"))
    with pytest.raises(ResourceNotReadyError):
        w.ctl.handle_add_subnet("v1")
    w.sync()
    with pytest.raises(ResourceNotReadyError):
        w.ctl.handle_update_subnet_status("v1")
    status = w.kube.subnets["v1"]["status"]
    assert status["v4availableIPs"] == 253 and "conditions" not in status
