from __future__ import annotations

import pytest

from controller.cache import (
    DeletedFinalStateUnknown,
    ExplicitKey,
    KeyFuncError,
    deletion_handling_meta_namespace_key_func,
    meta_namespace_key_func,
    split_meta_namespace_key,
)
from controller.cache.keys import object_name, replaced
from tests.cache.fakes import make_pod


def test_namespaced_and_cluster_scoped_keys() -> None:
    assert meta_namespace_key_func(make_pod("p", "ns1")) == "ns1/p"
    assert meta_namespace_key_func({"metadata": {"name": "node1"}}) == "node1"
    assert meta_namespace_key_func(ExplicitKey("a/b")) == "a/b"


def test_objects_without_metadata_are_rejected() -> None:
    with pytest.raises(KeyFuncError, match="object has no meta"):
        meta_namespace_key_func({"spec": {}})
    with pytest.raises(KeyFuncError):
        meta_namespace_key_func(DeletedFinalStateUnknown("ns/p", None))


def test_deletion_handling_key_func_unwraps_tombstones() -> None:
    tomb = DeletedFinalStateUnknown("ns/p", make_pod("p", "ns"))
    assert deletion_handling_meta_namespace_key_func(tomb) == "ns/p"
    assert deletion_handling_meta_namespace_key_func(make_pod("q", "ns")) == "ns/q"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("ns/name", ("ns", "name")),
        ("name", ("", "name")),
        ("", ("", "")),
        ("/name", ("", "name")),
        ("ns/", ("ns", "")),
    ],
)
def test_split_key(key: str, expected: tuple[str, str]) -> None:
    assert split_meta_namespace_key(key) == expected


def test_split_key_rejects_extra_slashes() -> None:
    with pytest.raises(KeyFuncError, match='unexpected key format: "a/b/c"'):
        split_meta_namespace_key("a/b/c")


@pytest.mark.parametrize(
    ("obj", "name"),
    [
        ({"metadata": {"name": "n1"}}, "n1"),
        ({"metadata": {"name": 7}}, ""),
        ({"metadata": None}, ""),
        ({"spec": {}}, ""),
        (None, ""),
        ("n1", ""),
    ],
)
def test_object_name_is_empty_for_malformed_objects(obj: object, name: str) -> None:
    assert object_name(obj) == name


def test_replaced_only_when_both_incarnations_have_different_uids() -> None:
    def obj(uid: object) -> dict[str, object]:
        return {"metadata": {"name": "n1", "uid": uid}}

    assert replaced(obj("u-1"), obj("u-2"))
    assert not replaced(obj("u-1"), obj("u-1"))
    # without a UID on either side nothing says it is another object: judge it as an edit
    assert not replaced(obj(None), obj("u-2"))
    assert not replaced(obj("u-1"), {"metadata": {"name": "n1"}})
    assert not replaced(None, obj("u-2"))
