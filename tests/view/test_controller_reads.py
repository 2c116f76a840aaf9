"""The view's readers for the subnet, namespace, node and security-group controllers, and the
owner sources of `OwnerLookup` (a listed snapshot confirmed by GETs)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.cache import Indexer
from controller.core import keep
from controller.core.errors import ResourceNotReadyError
from controller.core.model import StatefulSet
from controller.view import CachedObject, CacheView, ListedOwners, OwnerLookup


def _indexer(*objs: dict[str, Any]) -> Indexer:
    idx = Indexer()
    for obj in objs:
        idx.add(obj)
    return idx


def test_cached_object_reads_loose_parts_and_keeps_the_object() -> None:
    raw = {
        "metadata": {"name": "s1", "deletionTimestamp": "2026-01-01T00:00:00Z", "annotations": 3},
        "spec": "not an object",
        "status": {"v4usingIPs": 1},
    }
    obj = CachedObject.of(raw)
    assert (obj.name, obj.deleting, dict(obj.spec), dict(obj.annotations)) == ("s1", True, {}, {})
    assert obj.status == {"v4usingIPs": 1} and obj.obj is raw


def test_subnets_vpcs_namespaces_and_security_groups_read_through_the_view() -> None:
    view = CacheView(
        subnets=_indexer({"metadata": {"name": "b"}}, {"metadata": {"name": "a"}}),
        vpcs=_indexer(
            {"metadata": {"name": "v2"}, "status": {"router": "r2"}},
            {"metadata": {"name": "bad"}, "spec": {"namespaces": "x"}},  # malformed: left out
            {"metadata": {"name": "v1"}, "status": {"router": "r1"}},
        ),
        namespaces=_indexer({"metadata": {"name": "ns1"}}),
        security_groups=_indexer({"metadata": {"name": "sg2"}}, {"metadata": {"name": "sg1"}}),
    )
    assert [s.name for s in view.subnet_objects()] == ["a", "b"]
    assert view.subnet_object("a") is not None and view.subnet_object("zz") is None
    assert [(v.name, v.router) for v in view.vpcs()] == [("v1", "r1"), ("v2", "r2")]
    assert view.namespace_names() == ["ns1"]
    assert [g.name for g in view.security_groups()] == ["sg1", "sg2"]
    assert view.security_groups_cached() and view.has_security_group("sg1")
    assert not view.has_security_group("sg3")
    bare = CacheView()
    assert not bare.security_groups_cached() and bare.security_groups() == []


def test_well_formed_nodes_leave_a_malformed_one_out() -> None:
    view = CacheView(
        nodes=_indexer(
            {"metadata": {"name": "n1"}},
            {"metadata": {"name": "n2"}, "status": {"addresses": ["not an object"]}},
        )
    )
    assert [n.name for n in view.well_formed_nodes()] == ["n1"]


def test_a_view_without_kube_cannot_read_an_owner_no_informer_holds() -> None:
    with pytest.raises(ResourceNotReadyError):
        CacheView().statefulset("ns", "web")


class _Api:
    def __init__(self, sts: dict[str, Any] | None) -> None:
        self.sts = sts
        self.gets = 0

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        return self.sts

    def get_virtual_machine(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        return None


def _keeps(lookup: OwnerLookup) -> bool:
    return lookup.keeps(lambda owners: keep.statefulset_keeps(owners, "ns", "web-1"))


def test_listed_owners_confirm_a_release_with_a_get() -> None:
    found = _Api({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 2}})
    assert _keeps(OwnerLookup(ListedOwners([], [], found)))
    assert found.gets == 1
    gone = _Api(None)
    assert not _keeps(OwnerLookup(ListedOwners([], [], gone)))
    # a list that keeps is believed: no GET
    listed = _Api(None)
    assert _keeps(OwnerLookup(ListedOwners([StatefulSet("ns", "web", replicas=2)], [], listed)))
    assert listed.gets == 0
    # no API: the list is final; a kind not listed at all keeps everything
    assert not _keeps(OwnerLookup(ListedOwners([], [])))
    assert _keeps(OwnerLookup(ListedOwners(None, None)))


def test_of_needs_a_cache_view_source() -> None:
    with pytest.raises(TypeError):
        OwnerLookup(ListedOwners([], [])).of(None)  # type: ignore[arg-type]
