"""Event correlation (create vs patch) and the recorder's non-blocking, bounded behaviour."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from controller.apiclient.errors import ForbiddenError, NotFoundError, ServerError
from controller.kube.api import KubeObject, ObjectRef
from controller.kube.events import MAX_MESSAGE_LEN, BackgroundEventRecorder, EventCorrelator
from controller.testing.clock import FakeClock
from controller.testing.fake_kube import FakeEventRecorder, FakeKubeApi
from tests.kube.helpers import pod

POD = pod("p1", namespace="ns1")
POD["metadata"]["uid"] = "uid-1"
WALL = datetime.datetime(2026, 11, 30, 5, 0, 0, tzinfo=datetime.UTC)


def _events(fake: FakeKubeApi) -> list[KubeObject]:
    return sorted(fake.events.values(), key=lambda e: e["metadata"]["name"])


# --- correlator --------------------------------------------------------------------------------


def test_repeat_within_window_patches_the_same_event() -> None:
    clock = FakeClock()
    corr = EventCorrelator(window=60, clock=clock, wall_clock=lambda: WALL)
    ref = ObjectRef.from_object(POD)

    first = corr.observe(ref, "Warning", "AcquireAddressFailed", "NoAvailableAddress")
    clock.step(59)
    second = corr.observe(ref, "Warning", "AcquireAddressFailed", "NoAvailableAddress")

    assert first.action == "create" and first.count == 1
    assert first.body["involvedObject"] == {
        "kind": "Pod",
        "name": "p1",
        "namespace": "ns1",
        "uid": "uid-1",
        "apiVersion": "v1",
    }
    assert first.body["source"] == {"component": "ovn-controller"}
    assert first.body["firstTimestamp"] == "2026-11-30T05:00:00Z"
    assert second.action == "patch"
    assert (second.namespace, second.name, second.count) == ("ns1", first.name, 2)
    assert second.body["count"] == 2


def test_window_expiry_and_different_messages_create_new_events() -> None:
    clock = FakeClock()
    corr = EventCorrelator(window=60, clock=clock, wall_clock=lambda: WALL)
    ref = ObjectRef.from_object(POD)

    a = corr.observe(ref, "Warning", "R", "m1")
    b = corr.observe(ref, "Warning", "R", "m2")
    clock.step(61)
    c = corr.observe(ref, "Warning", "R", "m1")

    assert [a.action, b.action, c.action] == ["create", "create", "create"]
    assert len({a.name, b.name, c.name}) == 3


def test_lru_bound_forgets_oldest() -> None:
    corr = EventCorrelator(max_entries=2, clock=FakeClock(), wall_clock=lambda: WALL)
    ref = ObjectRef.from_object(POD)
    corr.observe(ref, "Warning", "R", "1")
    corr.observe(ref, "Warning", "R", "2")
    corr.observe(ref, "Warning", "R", "3")  # evicts "1"

    assert corr.observe(ref, "Warning", "R", "3").action == "patch"
    assert corr.observe(ref, "Warning", "R", "1").action == "create"


def test_bad_arguments_are_rejected_up_front() -> None:
    rec = FakeEventRecorder()
    with pytest.raises(ValueError, match="Normal or Warning"):
        rec.event(POD, "Error", "R", "m")
    with pytest.raises(ValueError, match="reason"):
        rec.event(POD, "Warning", "", "m")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        rec.event({"metadata": {}}, "Warning", "R", "m")


def test_long_messages_are_truncated() -> None:
    rec = FakeEventRecorder()
    rec.event(POD, "Warning", "CreateOVNPortFailed", "x" * 5000)
    assert len(rec.events[0].message) == MAX_MESSAGE_LEN
    assert rec.events[0].message.endswith("...")


# --- fake recorder -----------------------------------------------------------------------------


def test_fake_recorder_aggregates_like_kubectl_get_events() -> None:
    rec = FakeEventRecorder()
    for _ in range(3):
        rec.event(POD, "Warning", "AcquireAddressFailed", "NoAvailableAddress")
    rec.event(POD, "Warning", "CreateOVNPortFailed", "boom")

    assert [(e.reason, e.count) for e in rec.events] == [
        ("AcquireAddressFailed", 3),
        ("CreateOVNPortFailed", 1),
    ]
    assert rec.events[0].ref.name == "p1"
    assert rec.reasons() == ["AcquireAddressFailed", "CreateOVNPortFailed"]


# --- background recorder -----------------------------------------------------------------------


def test_background_recorder_writes_and_aggregates_through_the_sink() -> None:
    fake = FakeKubeApi()
    with BackgroundEventRecorder(fake, wall_clock=lambda: WALL, host="node1") as rec:
        for _ in range(3):
            rec.event(POD, "Warning", "AcquireAddressFailed", "NoAvailableAddress")
        rec.event(POD, "Normal", "Allocated", "10.16.0.5")
        assert rec.flush(5.0)

    events = _events(fake)
    assert [(e["reason"], e["count"]) for e in events] == [
        ("AcquireAddressFailed", 3),
        ("Allocated", 1),
    ]
    assert events[0]["source"] == {"component": "ovn-controller", "host": "node1"}
    assert events[0]["involvedObject"]["uid"] == "uid-1"
    assert rec.written == 4 and rec.dropped == 0


class BlockingSink:
    """A sink whose writes hang until released: a stand-in for a stuck API server."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.inner = FakeKubeApi()

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> KubeObject:
        self.entered.set()
        self.release.wait(10)
        return self.inner.create_event(namespace, body)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> KubeObject:
        self.release.wait(10)
        return self.inner.patch_event(namespace, name, patch)


def test_event_never_blocks_and_drops_beyond_the_buffer() -> None:
    sink = BlockingSink()
    drops: list[int] = []
    rec = BackgroundEventRecorder(sink, max_pending=5, on_drop=lambda: drops.append(1))
    rec.start()
    try:
        rec.event(POD, "Warning", "R", "first")
        assert sink.entered.wait(5)  # the writer thread is now stuck inside the sink

        for i in range(20):  # returns at once although nothing can be written
            rec.event(POD, "Warning", "R", f"m{i}")

        assert rec.dropped == 15 and len(drops) == 15
        assert rec.flush(0.05) is False  # still stuck: flush reports the timeout
        sink.release.set()
        assert rec.flush(5.0)
    finally:
        rec.stop()
    assert len(sink.inner.events) == 6  # "first" + the 5 buffered


def test_retryable_failures_are_retried_and_permanent_ones_dropped() -> None:
    fake = FakeKubeApi()
    fake.fail_next("create_event", ServerError(500, "InternalError", "etcd"), times=2)
    with BackgroundEventRecorder(fake, retry_delay=0.0, max_attempts=3) as rec:
        rec.event(POD, "Warning", "R", "retried")
        assert rec.flush(5.0)
        fake.fail_next("create_event", ForbiddenError(403, "Forbidden", "rbac"))
        rec.event(POD, "Warning", "R", "forbidden")
        assert rec.flush(5.0)
        # The failed tuple was forgotten: recording it again creates, not patches.
        rec.event(POD, "Warning", "R", "forbidden")
        assert rec.flush(5.0)

    assert sorted(e["message"] for e in fake.events.values()) == ["forbidden", "retried"]
    assert rec.written == 2 and rec.failed == 1


def test_patch_of_an_expired_event_recreates_it_with_the_running_count() -> None:
    fake = FakeKubeApi()
    with BackgroundEventRecorder(fake) as rec:
        rec.event(POD, "Warning", "R", "m")
        assert rec.flush(5.0)
        fake.events.clear()  # the Event's TTL ran out on the server
        rec.event(POD, "Warning", "R", "m")
        assert rec.flush(5.0)

    (event,) = fake.events.values()
    assert event["count"] == 2 and event["reason"] == "R"


def test_stop_drains_then_refuses_new_events() -> None:
    fake = FakeKubeApi()
    rec = BackgroundEventRecorder(fake)
    rec.start()
    for i in range(10):
        rec.event(POD, "Normal", "R", str(i))
    rec.stop()
    assert len(fake.events) == 10

    rec.event(POD, "Normal", "R", "late")
    assert rec.dropped == 1
    assert len(fake.events) == 10


def test_events_for_not_found_sink_errors_do_not_kill_the_thread() -> None:
    fake = FakeKubeApi()
    fake.fail_next("create_event", NotFoundError(404, "NotFound", 'namespaces "ns1" not found'))
    with BackgroundEventRecorder(fake, retry_delay=0.0) as rec:
        rec.event(POD, "Warning", "R", "lost")
        rec.event(POD, "Warning", "R", "kept")
        assert rec.flush(5.0)
    assert [e["message"] for e in fake.events.values()] == ["kept"]


def test_a_create_that_landed_before_its_response_was_lost_counts_as_written() -> None:
    fake = FakeKubeApi()
    landed: list[str] = []

    class LandsThenTimesOut:
        def create_event(self, namespace: str, body: Mapping[str, Any]) -> KubeObject:
            if not landed:
                landed.append(fake.create_event(namespace, body)["metadata"]["name"])
                raise ServerError(504, "Timeout", "response lost")
            return fake.create_event(namespace, body)

        def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> KubeObject:
            return fake.patch_event(namespace, name, patch)

    with BackgroundEventRecorder(LandsThenTimesOut(), retry_delay=0.0) as rec:
        rec.event(POD, "Warning", "R", "m")
        assert rec.flush(5.0)
    assert rec.written == 1 and rec.failed == 0
    assert list(fake.events) == [f"ns1/{landed[0]}"]


@dataclass(frozen=True)
class ModelPod:
    """Shaped like controller.core.model.Pod: attributes, not a dict."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""


def test_events_accept_model_objects_and_reject_nameless_ones() -> None:
    rec = FakeEventRecorder()
    rec.event(ModelPod("ns1", "p1", uid="uid-1", resource_version="7"), "Warning", "R", "m")

    assert rec.events[0].ref == ObjectRef(
        kind="Pod", name="p1", namespace="ns1", uid="uid-1", resource_version="7"
    )
    with pytest.raises(ValueError, match="no name"):
        rec.event(42, "Warning", "R", "m")  # type: ignore[arg-type]  # not a reference, on purpose
