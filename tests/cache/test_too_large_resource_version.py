"""The reflector reads "too large resource version" from the Status causes, as client-go does.

A LIST at a resourceVersion the server has not reached yet is answered 504 Timeout with a
`details.causes` entry of type `ResourceVersionTooLarge` (servers 1.17.0-1.18.5: only the cause
message "Too large resource version"). The reflector must then retry at once with
`resourceVersion=""` (the latest), not relist at the same version after a backoff. client-go
(`isTooLargeResourceVersionError`) trusts the cause type whatever the status, and the cause
message or the top-level message only on a Timeout.
"""

from __future__ import annotations

import builtins
import json
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controller.apiclient.errors import KubeApiError, StatusError, error_from_response
from controller.cache import ListOptions, ListWatch, Reflector
from controller.cache.errors import is_too_large_resource_version
from controller.cache.listwatch import ListResult, Watcher, WatchOptions
from controller.sandbox.apiserver.server import ApiServer
from controller.testing import builders
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock, FakeListerWatcher, make_pod
from tests.cache.test_reflector import RecordingStore

# A generic top-level message: only the causes say why the request failed.
GENERIC = "Timeout: request did not complete within the allotted timeout"
TYPE_CAUSE = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
MESSAGE_CAUSE = {"message": "Too large resource version"}


def status(code: int, reason: str, message: str, *causes: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if causes:
        body["details"] = {"causes": list(causes), "retryAfterSeconds": 1}
    return body


def answered(body: dict[str, Any]) -> KubeApiError:
    """The error the one request path raises for this Status answer."""
    return error_from_response(int(body["code"]), json.dumps(body).encode())


@pytest.mark.parametrize(
    ("body", "too_large"),
    [
        (status(504, "Timeout", GENERIC, TYPE_CAUSE), True),
        (status(504, "Timeout", GENERIC, MESSAGE_CAUSE), True),
        # the cause type alone decides, whatever the status
        (status(500, "InternalError", "etcd says no", TYPE_CAUSE), True),
        # the top-level message of servers before 1.17
        (status(504, "Timeout", "Too large resource version: 9, current: 5"), True),
        (status(504, "Timeout", GENERIC), False),
        # the cause message counts only on a Timeout
        (status(500, "InternalError", GENERIC, MESSAGE_CAUSE), False),
        (status(504, "Timeout", GENERIC, {"reason": "FieldValueInvalid", "message": "x"}), False),
    ],
    ids=[
        "cause-type",
        "timeout-cause-message",
        "cause-type-any-status",
        "timeout-top-message",
        "plain-timeout",
        "cause-message-not-timeout",
        "other-cause",
    ],
)
def test_too_large_resource_version_is_read_from_status_causes(
    body: dict[str, Any], too_large: bool
) -> None:
    assert is_too_large_resource_version(answered(body)) is too_large
    # the same Status arriving as a watch ERROR event's object
    assert is_too_large_resource_version(StatusError.from_status(body)) is too_large


def test_status_causes_survive_malformed_details() -> None:
    for details in ("nope", {"causes": "nope"}, {"causes": ["nope", {"reason": 7}]}):
        body = status(504, "Timeout", GENERIC)
        body["details"] = details
        err = answered(body)
        assert err.status == 504 and not is_too_large_resource_version(err)


def test_relist_at_too_large_rv_falls_back_to_latest_at_once() -> None:
    lw = FakeListerWatcher()
    lw.create(make_pod("a"))
    clock = FakeClock()
    stop = threading.Event()
    reflector = Reflector(lw, RecordingStore(), clock=clock, rng=random.Random(3))
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: lw.open_watches() == 1, message="watching")
        rv = reflector.last_sync_resource_version()
        lw.list_errors.append(answered(status(504, "Timeout", GENERIC, TYPE_CAUSE)))
        lw.send_error(410, "Expired", "too old resource version")
        wait_for(lambda: clock.waiters() == 1, message="backoff after the 410")
        clock.step(clock.waits[-1])
        wait_for(lambda: len(lw.watch_calls) == 2 and lw.open_watches() == 1, message="rewatch")
        assert [(c.resource_version, c.limit) for c in lw.list_calls] == [
            ("0", 500),
            (rv, 0),
            ("", 0),
        ]
        assert len(clock.waits) == 1  # no second backoff: the fallback list ran at once
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


class RecordingListWatch:
    """A real `ListWatch` that also records every ListOptions it was asked for."""

    def __init__(self, inner: ListWatch) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.list_calls: list[ListOptions] = []

    def list(self, options: ListOptions) -> ListResult:
        with self.lock:
            self.list_calls.append(options)
        return self.inner.list(options)

    def watch(self, options: WatchOptions) -> Watcher:
        return self.inner.watch(options)

    def list_rvs(self) -> builtins.list[str]:  # `list` here is the method above
        with self.lock:
            return [c.resource_version for c in self.list_calls]


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval=60.0) as srv:
        yield srv


def test_emulator_too_large_status_cause_relists_at_latest(server: ApiServer) -> None:
    api = server.api_client()
    clock = FakeClock()
    stop = threading.Event()
    lw = RecordingListWatch(ListWatch(api, group="", version="v1", plural="pods"))
    store = RecordingStore()
    reflector = Reflector(lw, store, clock=clock, rng=random.Random(3), name="pods")
    thread = threading.Thread(target=reflector.run, args=(stop,), daemon=True)
    server.store.create("pods", builders.pod("a", "default"))
    thread.start()
    try:
        wait_for(lambda: server.store.watcher_count("pods") == 1, message="watching")
        rv = reflector.last_sync_resource_version()
        server.faults.fail_next(
            1,
            504,
            verb="list",
            resource="pods",
            message=GENERIC,
            details={"causes": [TYPE_CAUSE], "retryAfterSeconds": 1},
        )
        assert server.faults.expire_watches("pods") == 1
        wait_for(lambda: clock.waiters() == 1, message="backoff after the 410")
        clock.step(clock.waits[-1])
        wait_for(lambda: len(lw.list_calls) >= 3, message="relists")
        wait_for(lambda: server.store.watcher_count("pods") == 1, message="watching again")
        assert lw.list_rvs() == ["0", rv, ""]
        assert len(clock.waits) == 1
        assert store.ops("replace")[-1][0] == ["a"]
    finally:
        stop.set()
        thread.join(10)
        api.close()
    assert not thread.is_alive()
