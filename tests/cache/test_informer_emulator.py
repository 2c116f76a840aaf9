"""The informer stack against the API server emulator, over real HTTP with the official client.

Backoff and resync run on a FakeClock that the tests step, so a relist happens exactly when the
test allows it and no test sleeps through a real backoff.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.cache import (
    DeletedFinalStateUnknown,
    Lister,
    ListWatch,
    SharedIndexInformer,
    SharedInformerFactory,
    wait_for_cache_sync,
)
from controller.sandbox.apiserver.server import ApiServer
from controller.testing import builders
from controller.testing.wait import wait_for
from tests.cache.fakes import FakeClock, RecordingHandler


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    """A pod with one busybox container; keyword arguments are its labels."""
    return builders.pod(name, namespace, labels=labels)


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval=60.0, history_window=10_000) as srv:
        srv.store.create("namespaces", {"metadata": {"name": "other"}})
        yield srv


@pytest.fixture
def api(server: ApiServer) -> Iterator[Any]:
    client = server.api_client()
    yield client
    client.close()


class Informer:
    def __init__(self, api: Any, plural: str = "pods", group: str = "", **kwargs: Any) -> None:
        self.clock = FakeClock()
        self.informer = SharedIndexInformer(
            ListWatch(api, group=group, version="v1", plural=plural),
            clock=self.clock,
            rng=random.Random(5),
            name=plural,
            **kwargs,
        )
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> Informer:
        self.thread = self.informer.start(self.stop)
        return self

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(10)
            assert not self.thread.is_alive()

    def synced(self, server: ApiServer, resource: str = "pods") -> None:
        """Synced and watching, without moving virtual time (no fault expected)."""
        wait_for(self.informer.has_synced, timeout=10, message="synced")
        wait_for(lambda: server.store.watcher_count(resource) >= 1, message="watching")

    def drive(self, pred: Callable[[], bool], timeout: float = 10.0) -> None:
        """Step virtual time whenever the informer waits on it, until `pred` holds."""

        def reached() -> bool:
            if pred():
                return True
            if self.clock.waiters():
                self.clock.step(1.0)
            return False

        wait_for(reached, timeout, "condition reached", interval=0.002)

    @property
    def reflector(self) -> Any:
        return self.informer.reflector


@pytest.fixture
def informer(api: Any) -> Iterator[Informer]:
    inf = Informer(api)
    yield inf
    inf.close()


def test_initial_sync_of_a_paginated_list(server: ApiServer, informer: Informer) -> None:
    for i in range(1100):
        server.store.create(
            "pods", pod(f"p{i:04d}", "default" if i % 2 else "other", parity=str(i % 2))
        )
    handler = RecordingHandler()
    reg = informer.informer.add_event_handler(handler)
    informer.start().synced(server)
    assert wait_for_cache_sync(reg, timeout=10)
    assert len(informer.informer.indexer) == 1100 and handler.count() == 1100
    assert all(e[0] == "add" and e[3] for e in handler.snapshot())
    lister: Lister = informer.informer.lister("pod")
    assert len(lister.list(namespace="other")) == 550
    assert len(lister.list("parity=1", namespace="default")) == 550
    cached = lister.get("p0001", "default")
    assert cached["kind"] == "Pod" and cached["apiVersion"] == "v1"
    lists = [r for r in server.request_log if r.verb == "list" and r.resource == "pods"]
    # The first list asks for rv "0" in pages of 500; the server (like kube-apiserver, from its
    # watch cache) answers it whole.
    assert len(lists) == 1


def test_events_arrive_in_order(server: ApiServer, informer: Informer) -> None:
    server.store.create("pods", pod("a"))
    handler = RecordingHandler()
    informer.informer.add_event_handler(handler)
    informer.start().synced(server)
    b = server.store.create("pods", pod("b"))
    b["metadata"]["labels"] = {"x": "1"}
    b2 = server.store.update("pods", b)
    server.store.delete("pods", "default", "a")
    wait_for(lambda: handler.count() == 4)
    events = handler.snapshot()
    assert [e[:2] for e in events] == [("add", "a"), ("add", "b"), ("update", "b"), ("delete", "a")]
    assert events[2][3] == b2["metadata"]["resourceVersion"]
    assert informer.informer.indexer.list_keys() == ["default/b"]


def test_dropped_watch_resumes_without_relist(server: ApiServer, informer: Informer) -> None:
    handler = RecordingHandler()
    informer.informer.add_event_handler(handler)
    informer.start().synced(server)
    server.store.create("pods", pod("a"))
    wait_for(lambda: handler.count() == 1)
    a_rv = int(server.store.get("pods", "default", "a")["metadata"]["resourceVersion"])
    [first] = server.store.live_watch_starts("pods")
    assert first < a_rv  # opened at the list's version, before "a"
    assert server.faults.drop_watches("pods") == 1
    # The dropped watcher stays registered until its stream closes, and the reflector counts a
    # watch before sending it: only a live watch opened at "a"'s version proves the re-watch.
    wait_for(
        lambda: server.store.live_watch_starts("pods") == [a_rv],
        message="the re-watch from the last version seen",
    )
    assert informer.reflector.watch_count == 2
    server.store.create("pods", pod("b"))
    wait_for(lambda: handler.count() == 2)
    assert informer.reflector.list_count == 1
    assert [e[:2] for e in handler.snapshot()] == [("add", "a"), ("add", "b")]


def test_gone_relists_and_reports_what_changed_meanwhile(
    server: ApiServer, informer: Informer
) -> None:
    for name in ("keep", "change", "vanish"):
        server.store.create("pods", pod(name))
    handler = RecordingHandler()
    tombstones: list[Any] = []
    informer.informer.add_event_handler(handler)
    informer.informer.add_event_handler(on_delete=tombstones.append)
    informer.start().synced(server)
    wait_for(lambda: handler.count() == 3)
    keep_rv = server.store.get("pods", "default", "keep")["metadata"]["resourceVersion"]
    assert server.faults.expire_watches("pods") == 1
    wait_for(lambda: informer.clock.waiters() == 1, message="relist backoff")
    # While disconnected: one object changes, one vanishes, one appears.
    changed = server.store.get("pods", "default", "change")
    changed["metadata"]["labels"] = {"v": "2"}
    changed = server.store.update("pods", changed)
    server.store.delete("pods", "default", "vanish")
    server.store.create("pods", pod("new"))
    informer.drive(lambda: handler.count() == 7)
    relist = handler.snapshot()[3:]
    assert relist[0] == ("delete", "vanish", "DeletedFinalStateUnknown")
    by_name = {e[1]: e for e in relist[1:]}
    assert by_name["change"][0] == "update"
    assert by_name["change"][3] == changed["metadata"]["resourceVersion"]
    assert by_name["keep"] == ("update", "keep", keep_rv, keep_rv)  # a same-RV sync update
    assert by_name["new"][0] == "add" and by_name["new"][3] is False
    wait_for(lambda: len(tombstones) == 1)
    assert isinstance(tombstones[0], DeletedFinalStateUnknown)
    assert tombstones[0].key == "default/vanish"
    assert informer.reflector.list_count == 2
    assert sorted(informer.informer.indexer.list_keys()) == [
        "default/change",
        "default/keep",
        "default/new",
    ]


def test_bookmarks_advance_the_resource_version(api: Any) -> None:
    with ApiServer(bookmark_interval=0.05) as server:
        client = server.api_client()
        inf = Informer(client)
        try:
            inf.start().synced(server)
            server.store.create("configmaps", {"metadata": {"name": "x", "namespace": "default"}})
            rv = str(server.store.resource_version)
            wait_for(lambda: inf.informer.last_sync_resource_version() == rv)
            # the store follows once the bookmark delta has gone through the FIFO
            wait_for(lambda: inf.informer.indexer.resource_version == rv)
            assert len(inf.informer.indexer) == 0
        finally:
            inf.close()
            client.close()


def test_resync_replays_the_cache(server: ApiServer, api: Any) -> None:
    server.store.create("pods", pod("a"))
    inf = Informer(api, resync_period=30.0)
    try:
        handler = RecordingHandler()
        inf.informer.add_event_handler(handler)
        inf.start().synced(server)
        wait_for(lambda: handler.count() == 1 and inf.clock.waiters() == 1)
        inf.clock.step(30.0)
        wait_for(lambda: handler.count() == 2)
        rv = handler.snapshot()[0][2]
        assert handler.snapshot()[1] == ("update", "a", rv, rv)
    finally:
        inf.close()


def test_server_errors_and_dropped_connections_are_survived(
    server: ApiServer, informer: Informer
) -> None:
    server.store.create("pods", pod("a"))
    server.faults.fail_next(2, 500, verb="list", resource="pods")
    server.faults.drop_connections(2, verb="list", resource="pods")
    server.faults.fail_next(1, 503, verb="watch", resource="pods")
    handler = RecordingHandler()
    informer.informer.add_event_handler(handler)
    informer.start()
    # the failed watch start leads to a relist after a backoff: keep virtual time moving
    informer.drive(
        lambda: informer.informer.has_synced() and server.store.watcher_count("pods") >= 1
    )
    assert server.faults.pending == 0
    server.store.create("pods", pod("b"))
    wait_for(lambda: ("add", "b") in [e[:2] for e in handler.snapshot()])
    assert sorted(informer.informer.indexer.list_keys()) == ["default/a", "default/b"]
    # the relist after the failed watch re-delivered "a" as a same-RV (sync) update
    assert [e[:2] for e in handler.snapshot()] == [("add", "a"), ("update", "a"), ("add", "b")]
    # every failure was followed by a jittered, growing backoff delay
    assert len(informer.clock.waits) >= 3
    assert 0.8 <= informer.clock.waits[0] < 1.6 and 1.6 <= informer.clock.waits[1] < 3.2


def test_custom_resources_cluster_scoped(server: ApiServer, api: Any) -> None:
    server.store.create(
        "subnets", {"metadata": {"name": "s1"}, "spec": {"cidrBlock": "10.16.0.0/16"}}
    )
    inf = Informer(api, plural="subnets", group="kubeovn.io")
    try:
        inf.start().synced(server, "subnets.kubeovn.io")
        subnets = inf.informer.lister("subnet")
        assert subnets.get("s1")["spec"]["cidrBlock"] == "10.16.0.0/16"
        server.store.create("subnets", {"metadata": {"name": "s2"}, "spec": {}})
        wait_for(lambda: len(inf.informer.indexer) == 2)
        assert inf.informer.indexer.get_by_key("s2") is not None
    finally:
        inf.close()


def test_factory_shares_informers(server: ApiServer, api: Any) -> None:
    server.store.create("pods", pod("a"))
    factory = SharedInformerFactory(api)
    pods = factory.informer_for("", "v1", "pods")
    assert factory.informer_for("", "v1", "pods") is pods
    nodes = factory.informer_for("", "v1", "nodes", namespaced=False)
    stop = threading.Event()
    factory.start(stop)
    try:
        assert factory.wait_for_cache_sync(timeout=10) == {
            ("", "v1", "pods"): True,
            ("", "v1", "nodes"): True,
        }
        assert pods.indexer.get_by_key("default/a") is not None and len(nodes.indexer) == 0
    finally:
        factory.shutdown()
    assert pods.is_stopped() and nodes.is_stopped()
