from __future__ import annotations

from typing import Any

import pytest

from controller.cache import (
    NAMESPACE_INDEX,
    Indexer,
    IndexerConflictError,
    UnknownIndexError,
    meta_namespace_index_func,
)
from tests.cache.fakes import make_pod


def _node_index(obj: Any) -> list[str]:
    return [obj["spec"]["nodeName"]] if obj["spec"].get("nodeName") else []


def _pod(name: str, ns: str = "default", node: str = "", rv: str = "1") -> dict[str, Any]:
    pod = make_pod(name, ns)
    pod["spec"]["nodeName"] = node
    pod["metadata"]["resourceVersion"] = rv
    return pod


@pytest.fixture
def indexer() -> Indexer:
    return Indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func, "node": _node_index})


def test_add_get_update_delete(indexer: Indexer) -> None:
    indexer.add(_pod("a", node="n1", rv="5"))
    stored = indexer.get_by_key("default/a")
    assert stored is not None and stored["spec"]["nodeName"] == "n1"
    assert indexer.resource_version == "5"
    indexer.update(_pod("a", node="n2", rv="6"))
    assert indexer.index_keys("node", "n1") == []
    assert indexer.index_keys("node", "n2") == ["default/a"]
    assert indexer.list_index_func_values("node") == ["n2"]
    indexer.delete(_pod("a", rv="7"))
    assert indexer.get_by_key("default/a") is None
    assert indexer.list_index_func_values("node") == []
    assert indexer.resource_version == "7"


def test_namespace_index_and_by_index(indexer: Indexer) -> None:
    for name, ns in [("a", "x"), ("b", "x"), ("c", "y")]:
        indexer.add(_pod(name, ns))
    assert sorted(o["metadata"]["name"] for o in indexer.by_index(NAMESPACE_INDEX, "x")) == [
        "a",
        "b",
    ]
    assert indexer.index_keys(NAMESPACE_INDEX, "y") == ["y/c"]
    assert indexer.by_index(NAMESPACE_INDEX, "nope") == []
    assert len(indexer.index(NAMESPACE_INDEX, _pod("zzz", "x"))) == 2


def test_replace_swaps_content_and_rebuilds_indices(indexer: Indexer) -> None:
    indexer.add(_pod("old", node="n1"))
    indexer.replace([_pod("a", node="n2"), _pod("b", "other", node="n2")], "99")
    assert sorted(indexer.list_keys()) == ["default/a", "other/b"]
    assert indexer.index_keys("node", "n1") == []
    assert indexer.index_keys("node", "n2") == ["default/a", "other/b"]
    assert indexer.resource_version == "99"


def test_unknown_index_and_conflicting_indexers(indexer: Indexer) -> None:
    with pytest.raises(UnknownIndexError, match="Index with name nope does not exist"):
        indexer.by_index("nope", "x")
    with pytest.raises(IndexerConflictError, match="indexer conflict: node"):
        indexer.add_indexers({"node": _node_index})


def test_add_indexers_indexes_existing_items() -> None:
    indexer = Indexer()
    indexer.add(_pod("a", node="n1"))
    indexer.add_indexers({"node": _node_index})
    assert indexer.index_keys("node", "n1") == ["default/a"]


def test_failing_index_function_leaves_store_unchanged(indexer: Indexer) -> None:
    indexer.add(_pod("a", node="n1"))
    broken = {"metadata": {"name": "a", "namespace": "default"}, "spec": None}
    with pytest.raises((TypeError, AttributeError)):
        indexer.update(broken)
    stored = indexer.get_by_key("default/a")
    assert stored is not None and stored["spec"]["nodeName"] == "n1"
    assert indexer.index_keys("node", "n1") == ["default/a"]
