from __future__ import annotations

from typing import Any

import pytest

from controller.cache import Indexer, Lister, NotInCacheError, SelectorError
from controller.cache.labels import parse
from controller.cache.listers import SelectorLike
from tests.cache.fakes import make_pod


@pytest.fixture
def lister() -> Lister:
    indexer = Indexer(indexers={"namespace": lambda o: [o["metadata"].get("namespace", "")]})
    indexer.add(make_pod("a", "x", app="web", tier="fe"))
    indexer.add(make_pod("b", "x", app="db"))
    indexer.add(make_pod("c", "y", app="web"))
    indexer.add(make_pod("d", "y"))
    return Lister(indexer, "pod")


def _names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_get_and_not_found(lister: Lister) -> None:
    assert lister.get("a", "x")["metadata"]["labels"]["app"] == "web"
    with pytest.raises(NotInCacheError) as info:
        lister.get("zzz", "x")
    assert str(info.value) == 'pod "zzz" not found'
    assert isinstance(info.value, LookupError)
    assert info.value.code == 404


@pytest.mark.parametrize(
    ("selector", "namespace", "expected"),
    [
        (None, None, ["a", "b", "c", "d"]),
        ("", "x", ["a", "b"]),
        ("app=web", None, ["a", "c"]),
        ({"app": "web"}, "y", ["c"]),
        ("app!=web", None, ["b", "d"]),
        ("app in (web, db),tier", None, ["a"]),
        ("app notin (web)", None, ["b", "d"]),
        ("!app", None, ["d"]),
        ("app", None, ["a", "b", "c"]),
        ("app==db", None, ["b"]),
    ],
)
def test_list_with_selectors(
    lister: Lister, selector: SelectorLike, namespace: str | None, expected: list[str]
) -> None:
    assert _names(lister.list(selector, namespace)) == expected


def test_list_without_namespace_index_scans() -> None:
    indexer = Indexer(indexers={})
    indexer.add(make_pod("a", "x"))
    indexer.add(make_pod("b", "y"))
    assert _names(Lister(indexer, "pod").list(namespace="y")) == ["b"]


@pytest.mark.parametrize("bad", ["app in (web", "=web", "a b", "app in web", "app=(x)"])
def test_bad_selectors_raise(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse(bad)


def test_numeric_comparisons_and_apimachinery_value_sets() -> None:
    sel = parse("size>3,size<10")
    assert sel.matches({"size": "5"})
    assert not sel.matches({"size": "11"})
    assert not sel.matches({"size": "big"})
    assert not sel.matches({})
    # "()" and a trailing comma stand for the empty value, as in apimachinery.
    assert parse("app in ()").matches({"app": ""})
    assert parse("app notin (web,)").matches({"app": "db"})


@pytest.mark.parametrize("bad", ["size>x", "a/b/c", "k" * 64, "app=" + "v" * 64, "app<1.5"])
def test_bad_keys_values_and_bounds_raise(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse(bad)
