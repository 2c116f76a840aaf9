"""The real adapter against the API server emulator: what the contract suite cannot express."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.apiclient.errors import (
    AlreadyExistsError,
    ServerError,
    TooManyRequestsError,
)
from controller.kube.client import IP, IPS, PODS, KubeClient
from controller.kube.events import BackgroundEventRecorder
from controller.sandbox.apiserver.server import ApiServer
from tests.kube.helpers import ip_cr, pod

Observed = list[tuple[str, str, str, float]]


@pytest.fixture
def observed() -> Observed:
    return []


@pytest.fixture
def kube(emulator: ApiServer, observed: Observed) -> Iterator[KubeClient]:
    api_client = emulator.api_client()
    try:
        yield KubeClient(api_client, on_request=lambda *a: observed.append(a), list_page_size=2)
    finally:
        api_client.close()


def test_every_request_is_observed_with_its_code(
    emulator: ApiServer, kube: KubeClient, observed: Observed
) -> None:
    emulator.store.create("pods", pod("p1"))
    kube.patch_pod_annotations("default", "p1", {"a": "1"})
    assert kube.get_ip("missing") is None

    assert [(v, u, c) for v, u, c, _ in observed] == [
        ("PATCH", PODS, "200"),
        ("GET", IP, "404"),
    ]
    assert all(seconds >= 0 for *_, seconds in observed)


def test_server_errors_surface_as_typed_errors(emulator: ApiServer, kube: KubeClient) -> None:
    emulator.store.create("pods", pod("p1"))
    emulator.faults.fail_next(1, 500, resource="pods")
    with pytest.raises(ServerError) as info:
        kube.patch_pod_annotations("default", "p1", {"a": "1"})
    assert info.value.status == 500 and "injected" in info.value.message

    emulator.faults.fail_next(1, 429, resource="ips")
    with pytest.raises(TooManyRequestsError):
        kube.list_ips()


def test_create_or_update_ip_converges_after_losing_a_create_race(
    emulator: ApiServer, kube: KubeClient, observed: Observed
) -> None:
    # Another writer created the IP; our first GET did not see it (stale read): the POST then
    # answers AlreadyExists, and the adapter must update the existing object instead.
    emulator.store.create("ips", ip_cr("p1.default", ip="10.16.0.9"))
    emulator.faults.fail_next(1, 404, resource="ips", verb="get")

    result = kube.create_or_update_ip(ip_cr("p1.default", ip="10.16.0.5"))

    assert result["spec"]["ipAddress"] == "10.16.0.5"
    stored = emulator.store.get("ips", None, "p1.default")
    assert stored["spec"]["ipAddress"] == "10.16.0.5"
    assert [(v, c) for v, _, c, _ in observed] == [
        ("GET", "404"),
        ("POST", "409"),
        ("GET", "200"),
        ("PUT", "200"),
    ]


def test_create_race_with_a_vanishing_object_reraises(
    emulator: ApiServer, kube: KubeClient
) -> None:
    emulator.faults.fail_next(1, 409, resource="ips", verb="create", reason="AlreadyExists")
    with pytest.raises(AlreadyExistsError):
        kube.create_or_update_ip(ip_cr("p1.default"))


def test_list_ips_follows_continue_tokens(
    emulator: ApiServer, kube: KubeClient, observed: Observed
) -> None:
    for i in range(5):
        emulator.store.create("ips", ip_cr(f"p{i}.default", ip=f"10.16.0.{10 + i}"))

    names = sorted(ip["metadata"]["name"] for ip in kube.list_ips())

    assert names == [f"p{i}.default" for i in range(5)]
    assert [(v, u) for v, u, _, _ in observed] == [("GET", IPS)] * 3


def test_background_recorder_over_the_real_adapter(emulator: ApiServer, kube: KubeClient) -> None:
    p = emulator.store.create("pods", pod("p1", namespace="ns1"))
    with BackgroundEventRecorder(kube) as recorder:
        for _ in range(3):
            recorder.event(p, "Warning", "AcquireAddressFailed", "NoAvailableAddress")
        assert recorder.flush(5.0)

    (event,) = emulator.store.list("events", "ns1")
    assert event["count"] == 3
    assert event["reason"] == "AcquireAddressFailed"
    assert event["involvedObject"]["uid"] == p["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "Pod"


def test_create_or_update_ip_likely_absent_posts_without_a_get(
    emulator: ApiServer, kube: KubeClient, observed: Observed
) -> None:
    # The pod handler passes likely_absent when its IP cache has no such CR: a new pod's IP
    # then costs one request instead of two.
    result = kube.create_or_update_ip(ip_cr("p1.default", ip="10.16.0.5"), likely_absent=True)

    assert result["spec"]["ipAddress"] == "10.16.0.5"
    assert emulator.store.get("ips", None, "p1.default")["spec"]["ipAddress"] == "10.16.0.5"
    assert [(v, c) for v, _, c, _ in observed] == [("POST", "201")]


def test_create_or_update_ip_likely_absent_but_present_still_converges(
    emulator: ApiServer, kube: KubeClient, observed: Observed
) -> None:
    emulator.store.create("ips", ip_cr("p1.default", ip="10.16.0.9"))

    result = kube.create_or_update_ip(ip_cr("p1.default", ip="10.16.0.5"), likely_absent=True)

    assert result["spec"]["ipAddress"] == "10.16.0.5"
    assert emulator.store.get("ips", None, "p1.default")["spec"]["ipAddress"] == "10.16.0.5"
    assert [(v, c) for v, _, c, _ in observed] == [("POST", "409"), ("GET", "200"), ("PUT", "200")]
