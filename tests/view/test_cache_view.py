"""The read view over the informer caches: each object parsed once per resourceVersion, parsed
again under a new one, malformed objects refused with the model's own error, owners read from
the informer or else with one GET."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.cache import Indexer
from controller.core.errors import MalformedObjectError, ResourceNotReadyError
from controller.core.model import Namespace, Node, Pod, Subnet
from controller.core.subnet_spec import format_subnet_spec
from controller.kube.api import KubeObject
from controller.testing import builders
from controller.view import (
    NODE_IP_INDEX,
    CacheView,
    OwnerLookup,
    ParseCache,
    node_ip_index,
    parse_subnet,
)


class _Gets:
    """The view's GET fallback, counting what was asked."""

    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]] | None = None) -> None:
        self.objects = objects or {}
        self.calls: list[tuple[str, str, str]] = []

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append((kind, namespace, name))
        return self.objects.get((kind, namespace, name))

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("sts", namespace, name)

    def get_virtual_machine(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("vm", namespace, name)

    def get_network_attachment_definition(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("nad", namespace, name)


def _counting(parse: Callable[[Any], Any]) -> tuple[Callable[[Any], Any], list[Any]]:
    seen: list[Any] = []

    def wrapped(raw: Any) -> Any:
        seen.append(raw)
        return parse(raw)

    return wrapped, seen


def _subnet(name: str, version: str | None, cidr: Any = "10.1.0.0/24", **spec: Any) -> dict:
    defaults: dict[str, Any] = {"gateway": "10.1.0.1", "excludeIps": ["10.1.0.1"]}
    return builders.subnet(name, cidr, resource_version=version, **{**defaults, **spec})


def _node(name: str, version: str, ip: Any = "172.18.0.2") -> dict[str, Any]:
    return builders.node(name, ip, resource_version=version)


# --- ParseCache ----------------------------------------------------------------------------------


def test_one_resource_version_is_parsed_once() -> None:
    parse, seen = _counting(Node.from_dict)
    cache = ParseCache(parse)
    raw = _node("n1", "5")
    first = cache.get(raw)
    assert cache.get(raw) is first
    assert cache.get(dict(raw)) is first  # an equal copy of the same version
    assert len(seen) == 1
    assert first == Node.from_dict(raw)


def test_a_new_resource_version_is_parsed_again() -> None:
    parse, seen = _counting(Node.from_dict)
    cache = ParseCache(parse)
    assert cache.get(_node("n1", "5")).internal_ips == ("172.18.0.2",)
    assert cache.get(_node("n1", "6", ip="172.18.0.9")).internal_ips == ("172.18.0.9",)
    assert len(seen) == 2


def test_objects_of_the_same_name_in_two_namespaces_are_kept_apart() -> None:
    cache = ParseCache(Pod.from_dict)
    a = {"metadata": {"namespace": "a", "name": "p", "resourceVersion": "1"}}
    b = {"metadata": {"namespace": "b", "name": "p", "resourceVersion": "1"}}
    assert cache.get(a).namespace == "a"
    assert cache.get(b).namespace == "b"


def test_an_object_without_a_resource_version_is_parsed_every_time() -> None:
    parse, seen = _counting(Namespace.from_dict)
    cache = ParseCache(parse)
    raw = {"metadata": {"name": "ns1"}}
    cache.get(raw)
    cache.get(raw)
    assert len(seen) == 2
    assert len(cache) == 0


def test_a_malformed_object_raises_the_models_error_on_every_read_and_is_parsed_once() -> None:
    raw = _node("n1", "5", ip=7)
    with pytest.raises(MalformedObjectError) as direct:
        Node.from_dict(raw)
    parse, seen = _counting(Node.from_dict)
    cache = ParseCache(parse)
    for _ in range(3):
        with pytest.raises(MalformedObjectError) as cached:
            cache.get(raw)
        assert str(cached.value) == str(direct.value)
    assert len(seen) == 1


def test_a_full_cache_drops_its_older_half() -> None:
    parsed: list[str] = []

    def parse(raw: KubeObject) -> Node:
        parsed.append(raw["metadata"]["name"])
        return Node.from_dict(raw)

    cache = ParseCache(parse, max_entries=4)
    for name in "abcd":
        cache.get(_node(name, "1"))
    assert len(cache) == 4
    cache.get(_node("e", "1"))  # a and b go
    assert len(cache) == 3
    for name in "cde":
        cache.get(_node(name, "1"))
    assert parsed == ["a", "b", "c", "d", "e"]
    cache.get(_node("a", "1"))
    assert parsed[-1] == "a"


def test_resize_lifts_the_bound_and_restores_it_dropping_the_oldest() -> None:
    parse, seen = _counting(Node.from_dict)
    cache = ParseCache(parse, max_entries=2)
    cache.resize(None)
    for name in "abcde":
        cache.get(_node(name, "1"))
    assert len(cache) == 5
    cache.resize(2)
    assert len(cache) == 2
    for name in "de":  # the newest stay parsed
        cache.get(_node(name, "1"))
    assert len(seen) == 5
    cache.get(_node("a", "1"))
    assert len(seen) == 6


def test_all_pod_models_kept_for_one_pass_then_bounded_again() -> None:
    from controller.view import cache_view

    parse, seen = _counting(Pod.from_dict)
    view = CacheView(kube=_Gets(), pods=Indexer())
    view._parsed_pods = ParseCache(parse, max_entries=cache_view.POD_PARSE_ENTRIES)
    n = cache_view.POD_PARSE_ENTRIES + 10
    pods = [
        {"metadata": {"namespace": "ns", "name": f"p{i}", "resourceVersion": "1"}} for i in range(n)
    ]
    with view.all_pod_models_kept() as models:
        for raw in pods:  # the informer adds
            view.pod_model(raw)
        for raw in pods:  # the IPAM rebuild, then the gc
            models.get(raw)
        assert len(seen) == n
    assert len(models) == cache_view.POD_PARSE_ENTRIES
    view.pod_model(pods[-1])
    assert len(seen) == n


def test_parse_subnet_tells_a_model_error_from_a_refused_spec() -> None:
    wrong_type = parse_subnet(_subnet("s", "1", cidr=["10.1.0.0/24"]))
    assert wrong_type.subnet is None
    with pytest.raises(MalformedObjectError) as direct:
        Subnet.from_dict(_subnet("s", "1", cidr=["10.1.0.0/24"]))
    assert wrong_type.parse_error == str(direct.value)
    refused = parse_subnet(_subnet("s", "1", cidr="not-a-cidr"))
    assert refused.subnet is not None and not refused.parse_error
    assert refused.spec_error
    good = parse_subnet(_subnet("s", "1"))
    assert good.subnet is not None and not good.parse_error and not good.spec_error


# --- CacheView -----------------------------------------------------------------------------------


def _view(gets: _Gets | None = None, **indexers: Indexer | None) -> CacheView:
    return CacheView(kube=gets or _Gets(), **indexers)


def test_subnets_are_the_well_formed_ones_by_name_and_parsed_once_per_version() -> None:
    subnets = Indexer()
    subnets.add(_subnet("zeta", "1"))
    subnets.add(_subnet("alpha", "1"))
    subnets.add(_subnet("typo", "1", cidr=["10.9.0.0/24"]))
    view = _view(subnets=subnets)
    first = view.subnets()
    assert [s.name for s in first] == ["alpha", "zeta"]
    assert view.subnets()[0] is first[0]  # the same version answers from the cache
    assert view.subnet_map()["zeta"] is first[1]
    raw = _subnet("alpha", "2", cidr="10.2.0.0/24", gateway="10.2.0.1")
    subnets.update(raw)
    # the model of the spec the subnet controller formats (the gateway among the excludes)
    formatted = {**raw, "spec": format_subnet_spec("alpha", raw["spec"])}
    assert view.subnet("alpha") == Subnet.from_dict(formatted)
    assert view.subnet("alpha") != Subnet.from_dict(raw)


def test_a_malformed_subnet_raises_the_models_error() -> None:
    subnets = Indexer()
    raw = _subnet("typo", "1", cidr=["10.9.0.0/24"])
    subnets.add(raw)
    view = _view(subnets=subnets)
    with pytest.raises(MalformedObjectError) as direct:
        Subnet.from_dict(raw)
    for _ in range(2):
        with pytest.raises(MalformedObjectError) as cached:
            view.subnet("typo")
        assert str(cached.value) == str(direct.value)
    assert view.subnet("absent") is None
    parsed = view.parsed_subnet("typo")
    assert parsed is not None and parsed.parse_error == str(direct.value)


def test_namespaces_and_nodes_are_parsed_once_per_version() -> None:
    namespaces, nodes = Indexer(), Indexer()
    namespaces.add({"metadata": {"name": "ns1", "resourceVersion": "3", "annotations": {}}})
    nodes.add(_node("n1", "4"))
    view = _view(namespaces=namespaces, nodes=nodes)
    ns = view.namespace("ns1")
    assert ns is not None and ns.has_annotations
    assert view.namespace("ns1") is ns
    assert view.namespace("absent") is None
    node = view.node("n1")
    assert view.nodes() == [node]
    assert view.nodes()[0] is node
    nodes.update(_node("n1", "5", ip=["x"]))
    with pytest.raises(MalformedObjectError):
        view.node("n1")
    assert view.node_names() == frozenset({"n1"})  # a malformed node still counts by name
    assert view.has_node("n1") and not view.has_node("") and not view.has_node("n2")


def test_kinds_without_an_indexer_read_as_empty() -> None:
    view = _view()
    assert view.subnets() == [] and view.nodes() == [] and view.pods_raw() == []
    assert view.namespace("ns") is None and view.vlan("v") is None and view.vpc("v") is None
    assert view.external_gw_config() is None and view.virtual_machines() == []


def test_router_of_a_subnet() -> None:
    subnets, vpcs = Indexer(), Indexer()
    subnets.add(_subnet("default-vpc", "1"))
    subnets.add(_subnet("custom", "1", vpc="tenant"))
    view = _view(subnets=subnets, vpcs=vpcs)
    # The default VPC's Vpc object is not cached yet: the cluster router.
    assert view.router_of("default-vpc", "ovn-cluster") == "ovn-cluster"
    with pytest.raises(ResourceNotReadyError, match="vpc tenant of subnet custom not ready"):
        view.router_of("custom", "ovn-cluster")
    with pytest.raises(ResourceNotReadyError, match="subnet absent not found"):
        view.router_of("absent", "ovn-cluster")
    vpcs.add({"metadata": {"name": "tenant"}, "status": {"router": "tenant-router"}})
    assert view.router_of("custom", "ovn-cluster") == "tenant-router"


def _sts_pod(name: str = "web-0") -> Pod:
    return Pod.from_dict(
        {
            "metadata": {
                "namespace": "ns",
                "name": name,
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u"}
                ],
            }
        }
    )


def _sts(replicas: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "web"}, "spec": {"replicas": replicas}}


def test_an_owner_comes_from_its_informer_when_there_is_one() -> None:
    statefulsets = Indexer()
    statefulsets.add(_sts(3))
    gets = _Gets()
    view = _view(gets, statefulsets=statefulsets)
    owner = view.owner_of(_sts_pod())
    assert owner is not None and owner.name == "web"
    assert gets.calls == []


def test_without_an_informer_an_owner_is_one_get_for_both_keep_checks() -> None:
    gets = _Gets({("sts", "ns", "web"): _sts(3)})
    lookup = OwnerLookup(_view(gets)).of(_sts_pod())
    assert lookup.to_delete() is False  # ordinal 0 < 3 replicas: kept
    lookup.to_delete()
    # The second check reads the pod's namespace from the view (not cached here).
    with pytest.raises(ResourceNotReadyError, match="namespace ns not found"):
        lookup.check_pod_to_del()
    assert gets.calls == [("sts", "ns", "web")]


def test_a_pod_whose_statefulset_is_gone_is_to_delete() -> None:
    assert OwnerLookup(_view(_Gets())).of(_sts_pod()).to_delete() is True


def test_a_controller_gets_the_shared_view_or_one_over_its_indexers() -> None:
    shared = _view()
    assert CacheView.given_or_over(shared, _Gets(), {}) is shared
    nodes = Indexer()
    nodes.add(_node("n1", "1"))
    built = CacheView.given_or_over(None, _Gets(), {"nodes": nodes})
    assert built.node_names() == frozenset({"n1"})
    with pytest.raises(TypeError, match=r"a view or the indexers \(nodes\), not both"):
        CacheView.given_or_over(shared, _Gets(), {"nodes": nodes})


def test_pods_that_may_wait_for_a_network_follow_their_updates_through_the_index() -> None:
    from controller.core.constants import ALLOCATED_ANNOTATION
    from controller.view import MAY_WAIT_INDEX, may_wait_index

    def pod(name: str, allocated: bool, version: str) -> dict[str, Any]:
        annotations = {ALLOCATED_ANNOTATION: "true"} if allocated else {}
        meta = {"namespace": "ns", "name": name, "resourceVersion": version}
        return {"metadata": {**meta, "annotations": annotations}}

    indexed = Indexer(indexers={MAY_WAIT_INDEX: may_wait_index})
    plain = Indexer()
    views = [CacheView(kube=_Gets(), pods=i) for i in (indexed, plain)]

    def waiting() -> list[list[str]]:
        return [[r["metadata"]["name"] for r in v.pods_raw_may_wait()] for v in views]

    for store in (indexed, plain):
        for name in ("c", "a", "b"):
            store.add(pod(name, allocated=name == "b", version="1"))
    assert waiting() == [["a", "c"], ["a", "c"]]
    for store in (indexed, plain):
        store.update(pod("a", allocated=True, version="2"))
        store.update(pod("b", allocated=False, version="2"))
        store.delete(pod("c", allocated=False, version="1"))
    assert waiting() == [["b"], ["b"]]


@pytest.mark.parametrize("indexed", [True, False], ids=["index", "scan"])
def test_the_nodes_reporting_an_internal_ip_follow_the_cache(indexed: bool) -> None:
    """By name, a malformed node left out; with the node informer's index as without it."""
    nodes = Indexer(indexers={NODE_IP_INDEX: node_ip_index} if indexed else None)
    view = CacheView(nodes=nodes)
    nodes.add(builders.node("b", "172.18.0.1", resource_version="1"))
    nodes.add(builders.node("a", "172.18.0.1", "172.18.0.2", resource_version="1"))
    nodes.add({"metadata": {"name": "bad", "resourceVersion": "1"}, "status": {"addresses": 7}})
    assert view.node_names_with_internal_ip("172.18.0.1") == ["a", "b"]
    assert view.node_names_with_internal_ip("172.18.0.2") == ["a"]
    nodes.update(builders.node("a", "172.18.0.3", resource_version="2"))
    assert view.node_names_with_internal_ip("172.18.0.1") == ["b"]
    assert view.node_names_with_internal_ip("172.18.0.3") == ["a"]
    nodes.delete(builders.node("b", "172.18.0.1", resource_version="3"))
    assert view.node_names_with_internal_ip("172.18.0.1") == []
