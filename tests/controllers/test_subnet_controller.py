"""The subnet controller's add and update handlers over in-memory fakes: a malformed Subnet is one
Warning Event, not a retry loop; a Subnet replaced unseen is handled again."""

from __future__ import annotations

import logging

import pytest

from controller.controllers.subnet import SubnetController, SubnetQueues
from controller.ipam import IPAM
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.runtime.worker import process_next_work_item
from controller.testing.builders import subnet
from controller.testing.clock import FakeClock
from controller.testing.fake_kube import FakeEventRecorder, FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from tests.controllers.helpers import CONFIG, RecordingCluster, indexer


def test_malformed_subnet_is_one_warning_event_not_a_retry_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    queues = SubnetQueues(
        *(RateLimitingQueue[str](default_controller_rate_limiter(), clock=clock) for _ in "ads")
    )
    bad = {
        "metadata": {"name": "bad", "uid": "u-1", "resourceVersion": "7"},
        "spec": {"cidrBlock": "10.1.0.0/33"},
    }
    subnets, nb, cluster = indexer(bad), FakeNbClient(), RecordingCluster()
    recorder = FakeEventRecorder()
    nb.ensure_logical_router("ovn-cluster")
    ctl = SubnetController(
        config=CONFIG,
        subnets=subnets,
        vpcs=indexer(),
        kube=FakeKubeApi(),
        cluster=cluster,
        nb=nb,
        ipam=IPAM(),
        recorder=recorder,
        queues=queues,
        is_leader=lambda: True,
    )
    handled: list[str] = []

    def handler(name: str) -> None:
        handled.append(name)
        ctl.handle_add_subnet(name)

    def process() -> None:
        assert process_next_work_item(queues.add, handler, name="AddSubnet", clock=clock)

    ctl.event_handler().on_add(bad)
    with caplog.at_level(logging.INFO):
        process()
        clock.step(3600.0)  # far beyond any backoff: a retried key would be back by now
    assert (len(queues.add), queues.add.pending(), queues.add.num_requeues("bad")) == (0, 0, 0)
    assert handled == ["bad"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    [event] = recorder.events
    assert (event.ref.kind, event.ref.api_version, event.ref.name, event.ref.uid) == (
        "Subnet",
        "kubeovn.io/v1",
        "bad",
        "u-1",
    )
    assert (event.type, event.reason) == ("Warning", "ValidateLogicalSwitchFailed")
    assert "10.1.0.0/33" in event.message
    assert "bad" not in nb.list_logical_switches() and cluster.replaced == []

    # the fix is an update of the Subnet, which queues it again like any spec change
    fixed = {**bad, "metadata": {**bad["metadata"], "resourceVersion": "8"}}
    fixed["spec"] = {"cidrBlock": "10.1.0.0/24"}
    subnets.update(fixed)
    ctl.event_handler().on_update(bad, fixed)
    process()
    assert "bad" in nb.list_logical_switches()
    assert cluster.replaced[0]["spec"]["gateway"] == "10.1.0.1"
    assert len(recorder.events) == 1
    for q in queues.all():
        q.shut_down()


def test_a_subnet_replaced_unseen_with_the_same_spec_is_handled_again() -> None:
    # A relist shows a Subnet deleted and re-created under its name as one update; the
    # successor's status is empty, so it must be handled even though its spec did not change.
    clock = FakeClock()
    queues = SubnetQueues(
        *(RateLimitingQueue[str](default_controller_rate_limiter(), clock=clock) for _ in "ads")
    )
    old = subnet("s1", "10.1.0.0/24", available=253)
    old["metadata"].update(uid="u-1", resourceVersion="7")
    ctl = SubnetController(
        config=CONFIG,
        subnets=indexer(old),
        vpcs=indexer(),
        kube=FakeKubeApi(),
        cluster=RecordingCluster(),
        nb=FakeNbClient(),
        ipam=IPAM(),
        recorder=FakeEventRecorder(),
        queues=queues,
        is_leader=lambda: True,
    )
    status_only = {**old, "metadata": {**old["metadata"], "resourceVersion": "8"}, "status": {}}
    ctl.event_handler().on_update(old, status_only)
    assert len(queues.add) == 0  # a status write of the same object: nothing to do
    successor = {**old, "metadata": {**old["metadata"], "uid": "u-2", "resourceVersion": "9"}}
    successor["status"] = {}
    ctl.event_handler().on_update(old, successor)
    assert len(queues.add) == 1 and queues.add.get()[0] == "s1"
    for q in queues.all():
        q.shut_down()
