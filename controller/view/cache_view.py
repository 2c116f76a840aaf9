"""`CacheView`: typed reads over the informer caches (the one place that parses cached objects).

The reconcilers read cluster state through this view instead of their own `get_by_key` /
`from_dict` pairs, so every kind is looked up and parsed by one rule:

* `namespace`, `node`, `vlan`, `vpc`, `subnet`: the model of the cached object, None when it is
  not cached; a malformed object raises `MalformedObjectError` (the message of `from_dict`).
  Subnets, namespaces, nodes, VLANs and VPCs are parsed once per resourceVersion
  (`ParseCache`): every pod add and every inspection pass reads them.
* `subnets()`: the well-formed subnets, sorted by name ("the first subnet of a provider" must not
  depend on cache order); a malformed one is left out (`parsed_subnet` tells why).
* `statefulset`, `virtual_machine`, `nads_of`, `owner_of`: from the informer when one is given,
  else one GET through `KubeApi` (the owner informers are optional); API errors propagate.
  `from_api=True` GETs even when an informer runs (what a lagging cache says is confirmed).
* `vpcs()`, `well_formed_nodes()`: the models of every cached object of the kind, a malformed
  one left out (logged by its own handler); `node_names_with_internal_ip` finds the nodes
  reporting an address (the node informer's `NODE_IP_INDEX` when it carries it).
* Subnets, namespaces and SecurityGroups as their controllers format, diff and write them back:
  `CachedObject`s (`subnet_object`, `subnet_objects`, `namespace_object`, `namespace_names`,
  `security_group`, `security_groups`, `has_security_group`; `security_groups_cached` says
  whether a SecurityGroup informer runs at all).
* Pods and IP CRs stay raw (`pod_raw`, `pods_raw`, `ip_cr_raw`, `ip_crs_raw`): handlers need
  the object itself (Events, the delete map, IP CR diffs); `pod_model` parses a pod object once per
  resourceVersion (the informer callbacks and the handlers read the same versions), other
  passes use `Pod.from_dict` or a pass-scoped `ParseCache`; `all_pod_models_kept` lifts the
  bound for the start-up, which reads every pod in three passes.

A kind whose indexer is not given reads as empty; without `kube`, an owner or NAD no informer
holds cannot be read (ResourceNotReadyError). No method writes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol, TypeVar

from controller import pod_logic as pl
from controller.cache import Indexer
from controller.cache.keys import raw_field
from controller.core.constants import (
    DEFAULT_VPC,
    EXTERNAL_GATEWAY_CONFIG,
    EXTERNAL_GATEWAY_CONFIG_NAMESPACE,
    IP_ADDRESS_ANNOTATION,
)
from controller.core.errors import MalformedObjectError, ResourceNotReadyError
from controller.core.model import (
    Namespace,
    NetworkAttachmentDefinition,
    Node,
    Pod,
    StatefulSet,
    Subnet,
    VirtualMachine,
    Vlan,
    Vpc,
)
from controller.kube.api import KubeObject
from controller.view.objects import CachedObject
from controller.view.parse_cache import ParseCache, ParsedSubnet, parse_subnet

# The pod informer's index of the pods that may wait for a network: a subnet or NAD that
# appears re-checks those, not every pod of the cluster (nearly all hold their networks).
MAY_WAIT_INDEX = "may-wait-for-network"
_MAY_WAIT = "yes"


def may_wait_index(obj: object) -> list[str]:
    """The index function of `MAY_WAIT_INDEX`."""
    return [_MAY_WAIT] if isinstance(obj, Mapping) and pl.may_wait_for_network(obj) else []


NODE_INDEX = "routing.node"
IP_INDEX = "routing.ip"


def node_index(obj: object) -> list[str]:
    """The index function of `NODE_INDEX`: a pod's `spec.nodeName`."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return [node] if isinstance(node, str) and node else []


def ip_index(obj: object) -> list[str]:
    """The index function of `IP_INDEX`: the addresses of a pod's default network."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(IP_ADDRESS_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(value, str):
        return []
    return [ip.strip() for ip in value.split(",") if ip.strip()]


NODE_IP_INDEX = "routing.node-internal-ip"


def node_ip_index(obj: object) -> list[str]:
    """The index function of `NODE_IP_INDEX` (node informer): a node's InternalIPs as
    `Node.from_dict` reads them; none for a malformed node (it routes as absent)."""
    try:
        return list(Node.from_dict(obj).internal_ips)
    except MalformedObjectError:
        return []


# pod versions kept parsed: a burst's versions live from their informer event to their handler
POD_PARSE_ENTRIES = 8192


class OwnerGets(Protocol):
    """The `KubeApi` GETs the view falls back to when an owner informer is not running."""

    def get_statefulset(self, namespace: str, name: str) -> KubeObject | None: ...

    def get_virtual_machine(self, namespace: str, name: str) -> KubeObject | None: ...

    def get_network_attachment_definition(self, namespace: str, name: str) -> KubeObject | None: ...


class CacheView:
    """Typed, read-only access to the informer caches (see the module docstring)."""

    def __init__(
        self,
        *,
        kube: OwnerGets | None = None,
        pods: Indexer | None = None,
        namespaces: Indexer | None = None,
        subnets: Indexer | None = None,
        nodes: Indexer | None = None,
        ips: Indexer | None = None,
        vlans: Indexer | None = None,
        vpcs: Indexer | None = None,
        configmaps: Indexer | None = None,
        statefulsets: Indexer | None = None,
        nads: Indexer | None = None,
        vms: Indexer | None = None,
        security_groups: Indexer | None = None,
    ) -> None:
        self._kube: OwnerGets = kube if kube is not None else _NoOwnerGets()
        self._pods = pods if pods is not None else Indexer()
        self._namespaces = namespaces if namespaces is not None else Indexer()
        self._subnets = subnets if subnets is not None else Indexer()
        self._nodes = nodes if nodes is not None else Indexer()
        self._ips = ips if ips is not None else Indexer()
        self._vlans = vlans if vlans is not None else Indexer()
        self._vpcs = vpcs if vpcs is not None else Indexer()
        self._configmaps = configmaps if configmaps is not None else Indexer()
        self._statefulsets = statefulsets
        self._nads = nads
        self._vms = vms
        self._sgs = security_groups
        self.parsed_subnets: ParseCache[ParsedSubnet] = ParseCache(parse_subnet)
        self._parsed_namespaces: ParseCache[Namespace] = ParseCache(Namespace.from_dict)
        self._parsed_nodes: ParseCache[Node] = ParseCache(Node.from_dict)
        self._parsed_vlans: ParseCache[Vlan] = ParseCache(Vlan.from_dict)
        self._parsed_vpcs: ParseCache[Vpc] = ParseCache(Vpc.from_dict)
        # every pod version is read by its informer event (twice for an update: old and new)
        # and by its handler; a burst of new pods must not evict versions still queued
        self._parsed_pods: ParseCache[Pod] = ParseCache(Pod.from_dict, POD_PARSE_ENTRIES)

    @classmethod
    def given_or_over(
        cls, view: CacheView | None, kube: OwnerGets, caches: Mapping[str, Indexer | None]
    ) -> CacheView:
        """`view`, or a new view over `caches` (indexers by kind, as `__init__` takes them),
        for a controller that may be handed a shared view; a TypeError when given both."""
        if view is None:
            return cls(kube=kube, **caches)
        if caches:
            raise TypeError(f"a view or the indexers ({', '.join(sorted(caches))}), not both")
        return view

    # --- pods (raw) ------------------------------------------------------------------------------

    def pod_raw(self, key: str) -> KubeObject | None:
        raw: KubeObject | None = self._pods.get_by_key(key)
        return raw

    def pods_raw(self) -> list[KubeObject]:
        return self._pods.list()

    def pods_raw_on_node(self, node: str) -> list[KubeObject]:
        """The cached pods bound to `node` (through `NODE_INDEX` when the informer has it)."""
        if NODE_INDEX in self._pods.get_indexers():
            return self._pods.by_index(NODE_INDEX, node)
        return [raw for raw in self._pods.list() if node in node_index(raw)]

    def pods_raw_with_ip(self, ip: str) -> list[KubeObject]:
        """The cached pods whose default network holds `ip` (through `IP_INDEX` when the
        informer has it)."""
        if IP_INDEX in self._pods.get_indexers():
            return self._pods.by_index(IP_INDEX, ip)
        return [raw for raw in self._pods.list() if ip in ip_index(raw)]

    def pods_raw_may_wait(self) -> list[KubeObject]:
        """The cached pods that may wait for a network (`pod_logic.may_wait_for_network`), in
        key order: through the pod informer's index when it has `MAY_WAIT_INDEX`, else by
        filtering every pod."""
        if MAY_WAIT_INDEX in self._pods.get_indexers():
            found = self._pods.by_index(MAY_WAIT_INDEX, _MAY_WAIT)
        else:
            found = [raw for raw in self._pods.list() if pl.may_wait_for_network(raw)]
        return sorted(found, key=self._pods.key_func)

    def pod_model(self, raw: KubeObject) -> Pod:
        """The model of a pod object (a cached one, an informer event's old or new object),
        parsed once per resourceVersion; MalformedObjectError for a malformed pod."""
        return self._parsed_pods.get(raw)

    @contextmanager
    def all_pod_models_kept(self) -> Iterator[ParseCache[Pod]]:
        """The pod parse cache, unbounded until the block ends (then bounded again, the oldest
        versions dropped): for the start-up, whose informer callbacks, IPAM rebuild and
        garbage collection each read every pod, so each version is parsed once in all."""
        self._parsed_pods.resize(None)
        try:
            yield self._parsed_pods
        finally:
            self._parsed_pods.resize(POD_PARSE_ENTRIES)

    # --- namespaces, nodes, VLANs, VPCs, config --------------------------------------------------

    def namespace(self, name: str) -> Namespace | None:
        raw = self._namespaces.get_by_key(name)
        return None if raw is None else self._parsed_namespaces.get(raw)

    def namespace_object(self, name: str) -> CachedObject | None:
        raw = self._namespaces.get_by_key(name)
        return None if raw is None else CachedObject.of(raw)

    def namespace_names(self) -> list[str]:
        """The names of the cached namespaces."""
        return list(self._namespaces.list_keys())

    def node(self, name: str) -> Node | None:
        raw = self._nodes.get_by_key(name) if name else None
        return None if raw is None else self._parsed_nodes.get(raw)

    def nodes(self) -> list[Node]:
        """Every cached node (MalformedObjectError on a malformed one)."""
        return [self._parsed_nodes.get(raw) for raw in self._nodes.list()]

    def well_formed_nodes(self) -> list[Node]:
        """Every cached node that parses (a malformed one is left out)."""
        return _well_formed(self._parsed_nodes.get, self._nodes.list())

    def node_names(self) -> frozenset[str]:
        """The names of the cached nodes, read from their metadata (a malformed node counts)."""
        return frozenset(
            str(raw_field(raw, "metadata").get("name") or "") for raw in self._nodes.list()
        )

    def node_names_with_internal_ip(self, ip: str) -> list[str]:
        """The cached well-formed nodes reporting InternalIP `ip`, by name: through the node
        informer's `NODE_IP_INDEX` when it has it (read with the store, never stale), else by
        reading every node."""
        if NODE_IP_INDEX in self._nodes.get_indexers():
            return self._nodes.index_keys(NODE_IP_INDEX, ip)
        return sorted(n.name for n in self.well_formed_nodes() if ip in n.internal_ips)

    def has_node(self, name: str) -> bool:
        return bool(name) and self._nodes.get_by_key(name) is not None

    def vlan(self, name: str) -> Vlan | None:
        raw = self._vlans.get_by_key(name)
        return None if raw is None else self._parsed_vlans.get(raw)

    def vpc(self, name: str) -> Vpc | None:
        raw = self._vpcs.get_by_key(name)
        return None if raw is None else self._parsed_vpcs.get(raw)

    def vpcs(self) -> list[Vpc]:
        """The well-formed cached VPCs, sorted by name (a malformed one is left out)."""
        return sorted(_well_formed(self._parsed_vpcs.get, self._vpcs.list()), key=lambda v: v.name)

    def external_gw_config(self) -> Mapping[str, str] | None:
        """The data of the external gateway ConfigMap (None when it does not exist)."""
        raw = self._configmaps.get_by_key(
            f"{EXTERNAL_GATEWAY_CONFIG_NAMESPACE}/{EXTERNAL_GATEWAY_CONFIG}"
        )
        if raw is None:
            return None
        data = raw.get("data") or {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, Mapping) else {}

    def ip_cr_cached(self, name: str) -> bool:
        return self._ips.get_by_key(name) is not None

    def ip_cr_owner(self, name: str) -> tuple[str, str] | None:
        """(spec.namespace, spec.podName) of the cached IP CR `name`; None when not cached.
        A node's CR has no namespace; fields of the wrong type read as ""."""
        raw = self._ips.get_by_key(name)
        if raw is None:
            return None
        spec = raw.get("spec") if isinstance(raw, Mapping) else None
        if not isinstance(spec, Mapping):
            return ("", "")
        namespace, pod_name = spec.get("namespace"), spec.get("podName")
        return (
            namespace if isinstance(namespace, str) else "",
            pod_name if isinstance(pod_name, str) else "",
        )

    def ip_cr_raw(self, name: str) -> KubeObject | None:
        """The cached IP CR `name`, as the informer holds it."""
        raw: KubeObject | None = self._ips.get_by_key(name)
        return raw

    def ip_crs_raw(self) -> list[KubeObject]:
        """The cached kubeovn.io IP CRs, as the informer holds them."""
        return self._ips.list()

    # --- subnets ------------------------------------------------------------------------------

    def parsed_subnet(self, name: str) -> ParsedSubnet | None:
        """Both checks of the cached subnet `name`; None when it is not cached."""
        raw = self._subnets.get_by_key(name) if name else None
        return None if raw is None else self.parsed_subnets.get(raw)

    def subnet(self, name: str) -> Subnet | None:
        """The cached subnet `name` (None if absent); MalformedObjectError as `from_dict`."""
        parsed = self.parsed_subnet(name)
        if parsed is None:
            return None
        if parsed.subnet is None:
            raise MalformedObjectError(parsed.parse_error)
        return parsed.subnet

    def subnets(self) -> list[Subnet]:
        """The well-formed cached subnets, sorted by name (a malformed one is left out)."""
        out = []
        for raw in self._subnets.list():
            subnet = self.parsed_subnets.get(raw).subnet
            if subnet is not None:
                out.append(subnet)
        return sorted(out, key=lambda s: s.name)

    def subnet_object(self, name: str) -> CachedObject | None:
        """The cached subnet `name` as its controller formats and writes it (None: absent)."""
        raw = self._subnets.get_by_key(name) if name else None
        return None if raw is None else CachedObject.of(raw)

    def subnet_objects(self) -> list[CachedObject]:
        """Every cached subnet (malformed ones too), sorted by name."""
        return sorted((CachedObject.of(raw) for raw in self._subnets.list()), key=_name)

    def subnet_map(self) -> dict[str, Subnet]:
        return {s.name: s for s in self.subnets()}

    def router_of(self, subnet_name: str, cluster_router: str) -> str:
        """The logical router of a subnet's VPC (kube-ovn: vpc.status.router); a default-VPC
        subnet whose Vpc is not cached (or has no router yet) uses `cluster_router`."""
        subnet = self.subnet(subnet_name)
        if subnet is None:
            raise ResourceNotReadyError(f"subnet {subnet_name} not found")
        vpc = self.vpc(subnet.vpc)
        router = vpc.router if vpc is not None else ""
        if router:
            return router
        if subnet.vpc == DEFAULT_VPC:
            return cluster_router
        raise ResourceNotReadyError(f"vpc {subnet.vpc} of subnet {subnet_name} not ready")

    # --- security groups ------------------------------------------------------------------------

    def security_groups_cached(self) -> bool:
        """Does a SecurityGroup informer run (without one, every group reads as absent)?"""
        return self._sgs is not None

    def security_group(self, name: str) -> CachedObject | None:
        raw = self._sgs.get_by_key(name) if self._sgs is not None else None
        return None if raw is None else CachedObject.of(raw)

    def has_security_group(self, name: str) -> bool:
        return self._sgs is not None and self._sgs.get_by_key(name) is not None

    def security_groups(self) -> list[CachedObject]:
        """Every cached SecurityGroup, sorted by name."""
        raws = self._sgs.list() if self._sgs is not None else []
        return sorted((CachedObject.of(raw) for raw in raws), key=_name)

    # --- owners and attachments (informer, else one GET) -----------------------------------------

    def statefulset(
        self, namespace: str, name: str, *, from_api: bool = False
    ) -> StatefulSet | None:
        indexer = None if from_api else self._statefulsets
        raw = _cached_or_get(indexer, self._kube.get_statefulset, namespace, name)
        return None if raw is None else StatefulSet.from_dict(raw)

    def virtual_machine(
        self, namespace: str, name: str, *, from_api: bool = False
    ) -> VirtualMachine | None:
        indexer = None if from_api else self._vms
        raw = _cached_or_get(indexer, self._kube.get_virtual_machine, namespace, name)
        return None if raw is None else VirtualMachine.from_dict(raw)

    def virtual_machines(self) -> list[VirtualMachine]:
        """The well-formed VMs of the VM informer (none without one); malformed ones left out."""
        raws = self._vms.list() if self._vms is not None else []
        return _well_formed(VirtualMachine.from_dict, raws)

    def owner_of(self, pod: Pod, *, from_api: bool = False) -> StatefulSet | VirtualMachine | None:
        """The pod's StatefulSet or VirtualMachine (None when NotFound); API errors propagate.
        `from_api`: one GET even when an owner informer runs (to confirm what the cache says)."""
        sts_name = pl.is_statefulset_pod(pod)
        if sts_name is not None:
            return self.statefulset(pod.namespace, sts_name, from_api=from_api)
        vm_name = pl.is_vm_pod(pod)
        if vm_name is not None:
            return self.virtual_machine(pod.namespace, vm_name, from_api=from_api)
        return None

    def owners_cached(self) -> bool:
        """Does a StatefulSet or VirtualMachine informer run (owners read without a GET)?"""
        return self._statefulsets is not None or self._vms is not None

    def owner_cached(self, pod: Pod) -> bool:
        """Is the pod's owner read from an informer (not a GET) by `owner_of`?"""
        if pl.is_statefulset_pod(pod) is not None:
            return self._statefulsets is not None
        return pl.is_vm_pod(pod) is not None and self._vms is not None

    def nads_of(self, pod: Pod) -> dict[tuple[str, str], NetworkAttachmentDefinition]:
        """The NADs the pod's attachment annotation names that exist."""
        found: dict[tuple[str, str], NetworkAttachmentDefinition] = {}
        for element in pl.pod_attachment_requests(pod):
            ref = (element.namespace, element.name)
            if ref in found:
                continue
            raw = _cached_or_get(self._nads, self._kube.get_network_attachment_definition, *ref)
            if raw is not None:
                found[ref] = NetworkAttachmentDefinition.from_dict(raw)
        return found


_M = TypeVar("_M")


def _well_formed(parse: Callable[[KubeObject], _M], raws: list[KubeObject]) -> list[_M]:
    """The models of `raws` that parse (a malformed object is left out)."""
    out = []
    for raw in raws:
        try:
            out.append(parse(raw))
        except MalformedObjectError:
            continue
    return out


class _NoOwnerGets:
    """The GETs of a view built without `kube` (a controller that reads no owners)."""

    def _refuse(self, namespace: str, name: str) -> KubeObject | None:
        raise ResourceNotReadyError(f"{namespace}/{name}: this view reads no owners")

    get_statefulset = get_virtual_machine = get_network_attachment_definition = _refuse


def _name(obj: CachedObject) -> str:
    return obj.name


def _cached_or_get(
    indexer: Indexer | None,
    get: Callable[[str, str], KubeObject | None],
    namespace: str,
    name: str,
) -> KubeObject | None:
    """The object from its informer when one runs, else one GET (None: NotFound)."""
    if indexer is not None:
        raw: KubeObject | None = indexer.get_by_key(f"{namespace}/{name}")
        return raw
    return get(namespace, name)
