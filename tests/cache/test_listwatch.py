from __future__ import annotations

import json

import pytest

from controller.apiclient.errors import status_error as _status_error
from controller.cache.listwatch import RawWatcher, resource_path


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (("", "v1", "pods", None), "/api/v1/pods"),
        (("", "v1", "pods", "kube-system"), "/api/v1/namespaces/kube-system/pods"),
        (("apps", "v1", "statefulsets", "ns"), "/apis/apps/v1/namespaces/ns/statefulsets"),
        (("kubeovn.io", "v1", "subnets", None), "/apis/kubeovn.io/v1/subnets"),
    ],
)
def test_resource_paths(args: tuple[str, str, str, str | None], path: str) -> None:
    assert resource_path(*args) == path


def test_status_bodies_become_status_errors() -> None:
    body = json.dumps({"kind": "Status", "code": 410, "reason": "Expired", "message": "old"})
    err = _status_error(410, body.encode())
    assert (err.code, err.reason, err.message) == (410, "Expired", "old")
    assert _status_error(502, b"<html>bad gateway</html>").code == 502


class FakeResponse:
    """Hands out the given byte chunks from read1(), then EOF (or an error)."""

    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks = list(chunks)
        self.error = error
        self.closed = 0

    def read1(self, amt: int) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        if self.error is not None:
            raise self.error
        return b""

    def shutdown(self) -> None:
        self.chunks.clear()

    def close(self) -> None:
        self.closed += 1

    def release_conn(self) -> None:
        pass


def _ev(etype: str, name: str) -> bytes:
    return json.dumps({"type": etype, "object": {"metadata": {"name": name}}}).encode() + b"\n"


def test_events_split_across_chunks_blank_and_bad_lines() -> None:
    data = _ev("ADDED", "a") + b"\n" + b"not json\n" + b'{"type": "ADDED"}\n' + _ev("DELETED", "b")
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    events = list(RawWatcher(FakeResponse(chunks), "test"))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("DELETED", "b"),
    ]


def test_a_broken_stream_ends_iteration_like_a_close() -> None:
    import urllib3

    resp = FakeResponse([_ev("ADDED", "a")], urllib3.exceptions.ProtocolError("reset"))
    events = list(RawWatcher(resp, "test"))
    assert len(events) == 1 and resp.closed >= 1


def test_last_line_without_newline_is_delivered() -> None:
    events = list(RawWatcher(FakeResponse([_ev("ADDED", "a").rstrip(b"\n")]), "test"))
    assert [e.type for e in events] == ["ADDED"]


def test_stop_ends_iteration() -> None:
    resp = FakeResponse([_ev("ADDED", "a"), _ev("ADDED", "b")])
    watcher = RawWatcher(resp, "test")
    it = iter(watcher)
    next(it)
    watcher.stop()
    assert list(it) == []
