"""LeaderGated: informer callbacks that run only while leading, over typed objects."""

from __future__ import annotations

import logging

import pytest

from controller.cache import DeletedFinalStateUnknown
from controller.kube.api import KubeObject
from controller.runtime.leader_gated import LeaderGated


class Calls:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def added(self, obj: KubeObject, initial: bool) -> None:
        self.seen.append(("add", (obj["metadata"]["name"], initial)))

    def updated(self, old: KubeObject, new: KubeObject) -> None:
        self.seen.append(("update", (old["metadata"]["name"], new["metadata"]["name"])))

    def deleted(self, obj: KubeObject) -> None:
        self.seen.append(("delete", obj["metadata"]))


def _obj(name: str) -> KubeObject:
    return {"metadata": {"name": name}}


def test_callbacks_run_only_while_leading() -> None:
    leading = False
    calls = Calls()
    handler = LeaderGated(
        lambda: leading, added=calls.added, updated=calls.updated, deleted=calls.deleted
    )
    handler.on_add(_obj("a"), True)
    handler.on_update(_obj("a"), _obj("b"))
    handler.on_delete(_obj("a"))
    assert calls.seen == []
    leading = True
    handler.on_add(_obj("a"), True)
    handler.on_update(_obj("a"), _obj("b"))
    handler.on_delete(_obj("a"))
    assert calls.seen == [
        ("add", ("a", True)),
        ("update", ("a", "b")),
        ("delete", {"name": "a"}),
    ]


def test_objects_that_are_not_mappings_are_dropped_and_missing_callbacks_skipped() -> None:
    calls = Calls()
    handler = LeaderGated(lambda: True, added=calls.added)
    handler.on_add("not an object", False)
    handler.on_update(_obj("a"), None)
    handler.on_delete(_obj("a"))
    assert calls.seen == []


def test_a_tombstone_gives_its_last_state_or_a_stand_in_named_by_its_key() -> None:
    calls = Calls()
    handler = LeaderGated(lambda: True, deleted=calls.deleted)
    handler.on_delete(DeletedFinalStateUnknown("s1", {"metadata": {"name": "s1", "uid": "u"}}))
    handler.on_delete(DeletedFinalStateUnknown("s2", None))
    handler.on_delete(DeletedFinalStateUnknown("ns/p", None))
    assert calls.seen == [
        ("delete", {"name": "s1", "uid": "u"}),
        ("delete", {"name": "s2"}),
        ("delete", {"name": "p", "namespace": "ns"}),
    ]


def test_errors_propagate_unless_logged_by_name(caplog: pytest.LogCaptureFixture) -> None:
    def boom(obj: KubeObject, initial: bool) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        LeaderGated(lambda: True, added=boom).on_add(_obj("a"), False)
    with caplog.at_level(logging.ERROR):
        LeaderGated(lambda: True, added=boom, errors_logged_as="x handler").on_add(_obj("a"))
    assert [r.getMessage() for r in caplog.records] == ["x handler failed"]
