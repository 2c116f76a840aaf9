"""The object store in-process, without HTTP: versions, history window, watchers, selectors."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.selectors import (
    Selector,
    build_selector,
    parse_field_selector,
    parse_label_selector,
)
from controller.sandbox.apiserver.store import ObjectStore

NS = "default"


def _cm(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": NS, "labels": labels}}


def test_one_global_version_across_resources() -> None:
    store = ObjectStore(create_default_namespaces=False)
    store.create("namespaces", {"metadata": {"name": NS}})
    a = store.create("configmaps", _cm("a"))
    s = store.create("subnets", {"metadata": {"name": "s"}})
    assert [int(o["metadata"]["resourceVersion"]) for o in (a, s)] == [2, 3]
    assert store.resource_version == 3


def test_returned_objects_are_copies() -> None:
    store = ObjectStore()
    created = store.create("configmaps", _cm("a"))
    created["metadata"]["labels"]["mutated"] = "yes"
    assert store.get("configmaps", NS, "a")["metadata"]["labels"] == {}


def test_slow_watcher_behind_the_window_gets_410() -> None:
    store = ObjectStore(history_window=3)
    watcher = store.watch("configmaps", Selector(), str(store.resource_version))
    for i in range(5):
        store.create("configmaps", _cm(f"c{i}"))
    batch = watcher.next(0)
    assert batch.error is not None and batch.error.code == 410
    assert batch.events == []


def test_idle_watcher_survives_writes_to_other_resources() -> None:
    store = ObjectStore(history_window=3)
    watcher = store.watch("subnets", Selector(), str(store.resource_version))
    for i in range(10):
        store.create("configmaps", _cm(f"c{i}"))
    assert watcher.next(0).error is None
    store.create("subnets", {"metadata": {"name": "s"}})
    batch = watcher.next(0)
    assert [kind for kind, _ in batch.events] == ["ADDED"]
    assert batch.progress_rv == store.resource_version


def test_watch_start_older_than_the_window_is_410() -> None:
    store = ObjectStore(history_window=2)
    rv = store.resource_version
    for i in range(3):
        store.create("configmaps", _cm(f"c{i}"))
    with pytest.raises(ApiError) as err:
        store.watch("configmaps", Selector(), str(rv))
    assert err.value.code == 410


def test_watch_next_times_out_with_progress() -> None:
    store = ObjectStore()
    watcher = store.watch("pods", Selector(), "0")
    assert watcher.initial == []
    batch = watcher.next(0.01)
    assert batch.events == [] and batch.error is None and not batch.dropped
    assert batch.progress_rv == store.resource_version


def test_exact_list_rolls_back_to_the_old_state() -> None:
    store = ObjectStore()
    store.create("configmaps", _cm("a", v="1"))
    store.create("configmaps", _cm("b"))
    at = store.resource_version
    store.patch("configmaps", NS, "a", {"metadata": {"labels": {"v": "2"}}})
    store.delete("configmaps", NS, "b")
    store.create("configmaps", _cm("c"))
    old = store.list_page(
        "configmaps", Selector(NS), resource_version=str(at), resource_version_match="Exact"
    )
    assert [(s.obj["metadata"]["name"], s.obj["metadata"]["labels"]) for s in old.items] == [
        ("a", {"v": "1"}),
        ("b", {}),
    ]
    now = store.list("configmaps", NS)
    assert [(o["metadata"]["name"], o["metadata"]["labels"]) for o in now] == [
        ("a", {"v": "2"}),
        ("c", {}),
    ]


def test_namespaced_objects_need_a_namespace() -> None:
    store = ObjectStore()
    with pytest.raises(ApiError) as err:
        store.create("configmaps", {"metadata": {"name": "a"}})
    assert err.value.code == 400
    with pytest.raises(KeyError):
        store.create("widgets", {"metadata": {"name": "a"}})


def test_cluster_scoped_objects_drop_a_namespace() -> None:
    store = ObjectStore()
    created = store.create("subnets", {"metadata": {"name": "s", "namespace": "x"}})
    assert "namespace" not in created["metadata"]


def test_bad_bodies_are_refused_with_clear_errors() -> None:
    store = ObjectStore()
    cases: list[tuple[dict[str, Any], int]] = [
        ({"metadata": {"name": "a", "labels": {"k": 1}}}, 422),
        ({"metadata": {"name": "a", "finalizers": "x"}}, 422),
        ({"kind": "Pod", "metadata": {"name": "a"}}, 400),
        ({"apiVersion": "v2", "metadata": {"name": "a"}}, 400),
        ({"metadata": "a"}, 400),
    ]
    for body, code in cases:
        with pytest.raises(ApiError) as err:
            store.create("configmaps", body, NS)
        assert err.value.code == code, body


@pytest.mark.parametrize("text", ["a in (b", "a)", "a,,b", "=x", "a>x", "in in (x)!"])
def test_malformed_label_selectors(text: str) -> None:
    with pytest.raises(ValueError, match="unable to parse"):
        parse_label_selector(text)


def test_label_selector_numeric_comparisons() -> None:
    sel = build_selector(None, "size>3,size<10", None, ())
    assert sel.matches({"metadata": {"labels": {"size": "5"}}})
    assert not sel.matches({"metadata": {"labels": {"size": "11"}}})
    assert not sel.matches({"metadata": {"labels": {"size": "big"}}})
    assert not sel.matches({"metadata": {}})


def test_field_selector_refuses_unknown_labels_and_bad_syntax() -> None:
    with pytest.raises(ValueError, match="not supported"):
        parse_field_selector("spec.x=1", ("metadata.name",))
    with pytest.raises(ValueError, match="invalid selector"):
        parse_field_selector("metadata.name", ("metadata.name",))
    sel = build_selector(None, None, "spec.hostNetwork=true", ("spec.hostNetwork",))
    assert sel.matches({"metadata": {}, "spec": {"hostNetwork": True}})
    assert not sel.matches({"metadata": {}, "spec": {}})


def test_load_manifests_creates_namespaces_first() -> None:
    store = ObjectStore()
    count = store.load(
        [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}},
            None,
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}],
            },
        ]
    )
    assert count == 2
    assert store.get("configmaps", "x", "c")["metadata"]["namespace"] == "x"
    with pytest.raises(ApiError) as err:
        store.load([{"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}}])
    assert err.value.code == 400


def test_wait_for_wakes_on_writes_and_times_out() -> None:
    store = ObjectStore()
    store.create("configmaps", _cm("a"))
    writer = threading.Thread(
        target=lambda: store.patch(
            "configmaps", NS, "a", {"metadata": {"labels": {"ready": "yes"}}}
        )
    )
    writer.start()
    got = store.wait_for(
        "configmaps",
        NS,
        "a",
        lambda o: o is not None and o["metadata"]["labels"].get("ready") == "yes",
        timeout=10,
    )
    writer.join()
    assert got is not None and got["metadata"]["labels"] == {"ready": "yes"}
    assert store.wait_for("configmaps", NS, "missing", lambda o: o is None, timeout=0) is None
    with pytest.raises(TimeoutError, match="condition not met"):
        store.wait_for("configmaps", NS, "a", lambda o: o is None, timeout=0.05)
