"""The security-group controller's update handler: what queues a group again."""

from __future__ import annotations

from controller.controllers.security_group import SecurityGroupController, SecurityGroupQueues
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.testing.fake_kube import FakeEventRecorder, FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from tests.controllers.helpers import indexer


def test_a_security_group_replaced_unseen_with_the_same_spec_is_synced_again() -> None:
    queues = SecurityGroupQueues(
        *(RateLimitingQueue[str](default_controller_rate_limiter()) for _ in "ud")
    )
    old = {"metadata": {"name": "sg1", "uid": "u-1"}, "spec": {"ingressRules": []}}
    ctl = SecurityGroupController(
        sgs=indexer(old),
        kube=FakeKubeApi(),
        nb=FakeNbClient(),
        recorder=FakeEventRecorder(),
        queues=queues,
        is_leader=lambda: True,
    )
    ctl.event_handler().on_update(old, {**old, "status": {"portGroup": "ovn.sg.sg1"}})
    assert len(queues.update) == 0
    ctl.event_handler().on_update(old, {**old, "metadata": {"name": "sg1", "uid": "u-2"}})
    assert len(queues.update) == 1 and queues.update.get()[0] == "sg1"
    for q in queues.all():
        q.shut_down()
