"""The desired routing rows of the default VPC, as a function of the caches, and their diff
against the NB (pure).

The routing reconciler (`controller.controllers.routing`) owns every row with the controller's
`kube-ovn-route` mark on the cluster router, per key:

* a subnet key (`subnet_key(name)`) owns the subnet-wide rows: the priority-31000 allow of each
  CIDR block, a centralized subnet's priority-29000 reroute of each block to its active gateway
  node (`controller.core.gateway.active_gateway`), the orphans no live pod claims (per-pod
  reroutes and NAT rules of its addresses), and kube-ovn v1.8's subnet-wide src-ip routes;
* a node key (`node_key(subnet, node)`) owns the rows of the subnet's pods on that node: for a
  distributed subnet the (subnet, node) address set and its priority-29000 reroute to the node's
  join address, each pod's priority-29250 reroute (north gateway, EIP/SNAT), its NAT rules, and
  the removal of kube-ovn v1.8's src-ip routes of its addresses;
* a node policy key (`node_policy_key(node)`, the key of the empty subnet) owns the node's
  priority-30000 reroute of each of its InternalIPs to its own join address of that family
  (kube-ovn v1.9's form, v1.9.0 `pkg/controller/node.go` l.305-320 handleAddNode), none once
  the node is gone, and the removal of kube-ovn v1.8.18's dst-ip static route to the node
  (v1.8.18 node.go l.254-268) that the reroute replaces.

`desired_*` compute what should exist; `diff_*` compare it with the rows read back and return
the `RoutingChange` that one NB transaction applies (writes and removals together, so traffic
never lacks a reroute while rows are renamed or moved). A row some other live pod still claims
(`Claims`: a KubeVirt VM's address on its migration target, a pod re-created on another node) is
never removed by a key that no longer wants it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from controller.core import router_policy as rp
from controller.core.address import parse_ip, same_family
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    DEFAULT_VPC,
    EIP_ANNOTATION,
    EXTERNAL_GATEWAY_TYPE_DISTRIBUTED,
    GATEWAY_TYPE_CENTRALIZED,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    NAT_TYPE_DNAT_AND_SNAT,
    NAT_TYPE_SNAT,
    NORTH_GATEWAY_ANNOTATION,
    POLICY_SRC_IP,
    SNAT_ANNOTATION,
)
from controller.core.errors import ResourceNotReadyError
from controller.core.gateway import active_gateway, join_ips
from controller.core.model import Node, Pod, Subnet
from controller.core.naming import pod_name_to_port_name
from controller.ovn.api import (
    AddressSetInfo,
    NatChange,
    NatRule,
    RouterPolicy,
    RoutingChange,
    SetChange,
    StaticRoute,
)
from controller.pod_logic.classify import get_name_by_pod, is_pod_alive
from controller.pod_logic.networks import is_ovn_provider
from controller.pod_logic.routing import (
    external_gateway_next_hop,
    src_ip_route_pairs,
    subnet_allow_policies,
)

KEY_SEP = "/"  # neither a Subnet nor a Node name may hold it

PolicyKey = tuple[int, str]
NatKey = tuple[str, str]  # (type, logical_ip)


def subnet_key(subnet: str) -> str:
    return subnet


def node_key(subnet: str, node: str) -> str:
    return f"{subnet}{KEY_SEP}{node}"


def node_policy_key(node: str) -> str:
    """The key of a node's own policies: no subnet's ("" before the separator)."""
    return f"{KEY_SEP}{node}"


def split_key(key: str) -> tuple[str, str]:
    """(subnet, node) of a key; node "" for a subnet key, subnet "" for a node policy key."""
    subnet, _, node = key.partition(KEY_SEP)
    return subnet, node


@dataclass(frozen=True, slots=True)
class RoutingConfig:
    """What the rows depend on besides the caches."""

    router: str
    node_switch: str
    enable_eip_snat: bool = False
    keep_vm_ip: bool = False
    external_gw_config: Mapping[str, str] | None = None


def pod_subnet(pod: Pod) -> str:
    return pod.annotations.get(LOGICAL_SWITCH_ANNOTATION, "")


def pod_ips(pod: Pod) -> tuple[str, ...]:
    value = pod.annotations.get(IP_ADDRESS_ANNOTATION, "")
    return tuple(ip.strip() for ip in value.split(",") if ip.strip())


def pod_keys_of(pod: Pod) -> tuple[str, ...]:
    """The keys whose rows depend on `pod`: its node key and its subnet key (NAT, orphans)."""
    subnet = pod_subnet(pod)
    if not subnet:
        return ()
    keys = [subnet_key(subnet)]
    if pod.node_name:
        keys.append(node_key(subnet, pod.node_name))
    return tuple(keys)


def routable(pod: Pod, now: datetime) -> bool:
    """A pod whose default network gets routing rows: alive, not terminating, allocated, bound,
    with an address. Its `routed` annotation plays no part (a user may have set it)."""
    return (
        pod.deletion_timestamp is None
        and bool(pod.node_name)
        and bool(pod.annotations.get(ALLOCATED_ANNOTATION))
        and bool(pod_ips(pod))
        and all(parse_ip(ip) is not None for ip in pod_ips(pod))
        and is_pod_alive(pod, now)
    )


def routed_subnet(subnet: Subnet | None, cfg: RoutingConfig) -> bool:
    """Overlay OVN subnets of the default VPC are routed on the cluster router (the join subnet
    only gets its allow). An IPAM-only subnet (a provider that is not OVN's, such as a macvlan
    attachment's) has no switch and no row there, and may reuse a routed range: kube-ovn v1.8.18
    pkg/controller/subnet.go handleAddOrUpdateSubnet stops at `!isOvnSubnet` before any
    overlap check or router row."""
    return (
        subnet is not None
        and not subnet.vlan
        and subnet.vpc == DEFAULT_VPC
        and is_ovn_provider(subnet.provider)
    )


@dataclass(slots=True)
class Rows:
    """Routing rows of one key, desired or read back."""

    policies: dict[PolicyKey, RouterPolicy] = field(default_factory=dict)
    # set name -> (entries, external_ids)
    sets: dict[str, tuple[frozenset[str], Mapping[str, str]]] = field(default_factory=dict)
    nats: dict[NatKey, NatChange] = field(default_factory=dict)
    # src-ip static routes (kube-ovn v1.8) to remove once the rows above are in place
    stale_routes: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class PodRows:
    """The rows one pod needs; `complete` is False when something they depend on is missing
    (its node's join address, the external gateway ConfigMap)."""

    policies: tuple[RouterPolicy, ...] = ()
    members: tuple[tuple[str, str, Mapping[str, str]], ...] = ()  # (set, ip, ids)
    nats: tuple[NatChange, ...] = ()
    complete: bool = True


def pod_rows(pod: Pod, subnet: Subnet, node: Node | None, cfg: RoutingConfig) -> PodRows:
    """The rows of a routable pod of `subnet` on `node` (None: the node is not cached).

    The next hops are kube-ovn v1.8 handleUpdatePod's: the node's join address for a
    distributed gateway, the `north_gateway` annotation, the external gateway for EIP/SNAT pods
    (ConfigMap `ovn-external-gw-config`); a centralized subnet's pods need no row of their own.
    dnat_and_snat rules are centralized unless the ConfigMap says `type: distributed`.
    """
    router = cfg.router
    ips = pod_ips(pod)
    eip = pod.annotations.get(EIP_ANNOTATION, "")
    snat = pod.annotations.get(SNAT_ANNOTATION, "")
    north_gateway = pod.annotations.get(NORTH_GATEWAY_ANNOTATION, "")
    complete = True
    policies: list[RouterPolicy] = []
    members: list[tuple[str, str, Mapping[str, str]]] = []
    pairs: list[tuple[str, str]] = []
    pod_ip = ",".join(ips)
    if cfg.enable_eip_snat and (eip or snat):
        try:
            external = external_gateway_next_hop(cfg.external_gw_config)
        except ResourceNotReadyError:
            complete = False
        else:
            pairs = src_ip_route_pairs(pod_ip, external.split(","))
    elif north_gateway:
        pairs = src_ip_route_pairs(pod_ip, north_gateway.split(","))
    elif subnet.gateway_type != GATEWAY_TYPE_CENTRALIZED:
        hops = join_ips(node) if node is not None else []
        complete = bool(hops)
        for ip in ips:
            version = rp.family(ip)
            hop = [h for h in hops if rp.family(h) == version]
            if not hop:
                # NOTE: as kube-ovn, an address is routed only through a node address of its
                # family: a dual-stack pod on an IPv4-only join network leaves by IPv4 alone.
                continue
            name = rp.set_name(subnet.name, pod.node_name, version)
            ids = rp.ids(rp.KIND_GATEWAY, version, subnet=subnet.name, node=pod.node_name)
            policies.append(
                RouterPolicy(
                    router,
                    rp.GATEWAY_PRIORITY,
                    rp.src_set_match(name, version),
                    "reroute",
                    (hop[0],),
                    ids,
                )
            )
            members.append((name, ip, ids))
    for prefix, next_hop in pairs:
        ids = rp.ids(
            rp.KIND_POD, rp.family(prefix), subnet=subnet.name, node=pod.node_name, pod=pod.key
        )
        policies.append(
            RouterPolicy(router, rp.POD_PRIORITY, rp.src_match(prefix), "reroute", (next_hop,), ids)
        )
    nats: list[NatChange] = []
    if cfg.enable_eip_snat:
        port = mac = ""
        if (cfg.external_gw_config or {}).get("type") == EXTERNAL_GATEWAY_TYPE_DISTRIBUTED:
            port = pod_name_to_port_name(get_name_by_pod(pod, cfg.keep_vm_ip), pod.namespace)
            mac = pod.annotations.get(MAC_ADDRESS_ANNOTATION, "")
        for ip in ips:
            # NOTE: kube-ovn pairs every pod address with the one external address, which NB
            # refuses across families; a dual-stack pod gets each family's own (or none).
            dnat_ip, snat_ip = same_family(eip, ip), same_family(snat, ip)
            if dnat_ip:
                nats.append(NatChange(NAT_TYPE_DNAT_AND_SNAT, ip, dnat_ip, mac, port))
            if snat_ip:
                nats.append(NatChange(NAT_TYPE_SNAT, ip, snat_ip))
    return PodRows(tuple(policies), tuple(members), tuple(nats), complete)


@dataclass(frozen=True, slots=True)
class NodeDesired:
    rows: Rows
    routed: frozenset[str]  # keys of the pods whose rows are all there once applied
    ips: frozenset[str]  # every address of the key's routable pods


def desired_node_rows(
    subnet: Subnet | None,
    node_name: str,
    node: Node | None,
    pods: Iterable[Pod],
    cfg: RoutingConfig,
    now: datetime,
) -> NodeDesired:
    """The rows of node key (subnet, node_name): those of every routable pod of the subnet on
    that node. A subnet that is gone, or not routed on the cluster router, wants none."""
    rows = Rows()
    routed: set[str] = set()
    ips: set[str] = set()
    if subnet is None or not routed_subnet(subnet, cfg) or subnet.name == cfg.node_switch:
        return NodeDesired(rows, frozenset(), frozenset())
    for pod in pods:
        if pod.node_name != node_name or pod_subnet(pod) != subnet.name or not routable(pod, now):
            continue
        wanted = pod_rows(pod, subnet, node, cfg)
        for p in wanted.policies:
            rows.policies.setdefault((p.priority, p.match), p)
        for name, ip, ids in wanted.members:
            entries, _ = rows.sets.get(name, (frozenset(), ids))
            rows.sets[name] = (entries | {ip}, ids)
        for n in wanted.nats:
            rows.nats[(n.type, n.logical_ip)] = n
        ips.update(pod_ips(pod))
        if wanted.complete:
            routed.add(pod.key)
            rows.stale_routes.update(pod_ips(pod))
    return NodeDesired(rows, frozenset(routed), frozenset(ips))


@dataclass(frozen=True, slots=True)
class SubnetDesired:
    rows: Rows
    gateway: str  # the active gateway node of a centralized subnet, "" when none or n/a
    centralized: bool


def desired_subnet_rows(
    subnet: Subnet | None, nodes: Mapping[str, Node], cfg: RoutingConfig
) -> SubnetDesired:
    """The subnet-wide rows: its allows, and a centralized subnet's reroute of each block to
    the active gateway's join address of that family (none when no listed node is usable:
    `gateway` "" says so, and the caller keeps what is there rather than cut egress)."""
    rows = Rows()
    if subnet is None or not routed_subnet(subnet, cfg):
        return SubnetDesired(rows, "", False)
    for p in subnet_allow_policies(subnet.name, subnet.cidr_block, cfg.router):
        rows.policies[(p.priority, p.match)] = p
    if subnet.gateway_type != GATEWAY_TYPE_CENTRALIZED or subnet.name == cfg.node_switch:
        return SubnetDesired(rows, "", False)
    gateway = active_gateway(subnet.gateway_node, subnet.activate_gateway, nodes)
    if gateway is None:
        return SubnetDesired(rows, "", True)
    hops = join_ips(gateway)
    for block in (b.strip() for b in subnet.cidr_block.split(",")):
        if not block:
            continue
        version = rp.family(block)
        hop = [h for h in hops if rp.family(h) == version]
        if hop:
            ids = rp.ids(rp.KIND_GATEWAY, version, subnet=subnet.name)
            rows.policies[(rp.GATEWAY_PRIORITY, rp.src_match(block))] = RouterPolicy(
                cfg.router, rp.GATEWAY_PRIORITY, rp.src_match(block), "reroute", (hop[0],), ids
            )
            rows.stale_routes.add(block)
    return SubnetDesired(rows, gateway.name, True)


# --- reading back ------------------------------------------------------------------------------


def owned_by(ids: Mapping[str, str], subnet: str, node: str) -> bool:
    """Does a marked row with `ids` belong to key (subnet, node) (node "": the subnet key)?"""
    return (
        bool(ids.get(rp.ROUTE_KIND_KEY))
        and ids.get(rp.SUBNET_KEY, "") == subnet
        and ids.get(rp.NODE_KEY, "") == node
    )


def actual_rows(
    subnet: str,
    node: str,
    policies: Iterable[RouterPolicy],
    sets: Iterable[AddressSetInfo],
    nats: Iterable[NatRule],
    routes: Iterable[StaticRoute],
    addresses: Iterable[str],
) -> Rows:
    """The rows of key (subnet, node) in the NB: marked policies and sets with its
    external_ids, and the NAT rules and src-ip routes of `addresses` (of a subnet key: every
    address in the subnet's blocks, see `in_blocks`)."""
    rows = Rows()
    for p in policies:
        if owned_by(p.external_ids, subnet, node):
            rows.policies[(p.priority, p.match.strip())] = p
    for a in sets:
        if owned_by(a.external_ids, subnet, node):
            rows.sets[a.name] = (frozenset(a.addresses), a.external_ids)
    wanted = set(addresses)
    for n in nats:
        if n.logical_ip in wanted:
            rows.nats[(n.type, n.logical_ip)] = NatChange(
                n.type, n.logical_ip, n.external_ip, n.external_mac, n.logical_port
            )
    for r in routes:
        if r.policy == POLICY_SRC_IP and r.ip_prefix.split("/", 1)[0] in wanted:
            rows.stale_routes.add(r.ip_prefix.split("/", 1)[0])
        elif r.policy == POLICY_SRC_IP and r.ip_prefix in wanted:
            rows.stale_routes.add(r.ip_prefix)
    return rows


# --- diff --------------------------------------------------------------------------------------

#: ip -> the rows the live pods holding it (outside the key being diffed) want for it.
Claims = Callable[[str], PodRows]


def policy_ip(policy: RouterPolicy) -> str:
    """The address of a per-pod `src == <ip>` policy."""
    return policy.match.split("==", 1)[-1].strip()


def diff_rows(desired: Rows, actual: Rows, claims: Claims | None = None) -> RoutingChange:
    """What turns `actual` into `desired`: every desired row written, every other row of the
    key removed, except a per-pod reroute or NAT rule that `claims` says another live pod
    still wants. kube-ovn v1.8 src-ip routes in `desired.stale_routes` that exist go."""
    write, drop = _diff_policies(desired, actual, claims)
    return RoutingChange(
        policies=write,
        delete_policies=drop,
        sets=_diff_sets(desired, actual),
        nats=_diff_nats(desired, actual, claims),
        delete_src_routes=tuple(sorted(desired.stale_routes & actual.stale_routes)),
    )


def _diff_policies(
    desired: Rows, actual: Rows, claims: Claims | None
) -> tuple[tuple[RouterPolicy, ...], tuple[PolicyKey, ...]]:
    """The policies to write (missing or different) and the keys of those to delete."""
    write: list[RouterPolicy] = []
    for key, p in desired.policies.items():
        have = actual.policies.get(key)
        if (
            have is None
            or have.action != p.action
            or tuple(have.nexthops) != tuple(p.nexthops)
            or any(have.external_ids.get(k) != v for k, v in p.external_ids.items())
        ):
            write.append(p)
    drop: list[PolicyKey] = []
    for key, have in actual.policies.items():
        if key in desired.policies:
            continue
        if have.external_ids.get(rp.ROUTE_KIND_KEY) == rp.KIND_POD and claims is not None:
            wanted = claims(policy_ip(have))
            if any((p.priority, p.match) == key for p in wanted.policies):
                continue
        drop.append(key)
    return tuple(write), tuple(sorted(drop))


def _diff_sets(desired: Rows, actual: Rows) -> tuple[SetChange, ...]:
    """The address sets to create, change (entries or external ids) or delete."""
    sets: list[SetChange] = []
    for name, (entries, ids) in desired.sets.items():
        have_entries, have_ids = actual.sets.get(name, (None, {}))
        add = entries - (have_entries or frozenset())
        remove = (have_entries or frozenset()) - entries
        stale_ids = any(have_ids.get(k) != v for k, v in ids.items())
        if have_entries is None or add or remove or stale_ids:
            sets.append(SetChange(name, tuple(sorted(add)), tuple(sorted(remove)), ids))
    for name in actual.sets:
        if name not in desired.sets:
            sets.append(SetChange(name, delete=True))
    return tuple(sets)


def _diff_nats(desired: Rows, actual: Rows, claims: Claims | None) -> tuple[NatChange, ...]:
    """The NAT rules to write, and those to remove (an empty external address) unless another
    live pod claims them."""
    nats: list[NatChange] = []
    for nat_key, nat in desired.nats.items():
        if actual.nats.get(nat_key) != nat:
            nats.append(nat)
    for nat_key, had in actual.nats.items():
        if nat_key in desired.nats:
            continue
        if claims is not None and any(
            (n.type, n.logical_ip) == nat_key for n in claims(had.logical_ip).nats
        ):
            continue
        nats.append(NatChange(had.type, had.logical_ip, ""))
    return tuple(nats)


def in_blocks(ip: str, cidr_block: str) -> bool:
    """Is `ip` inside one of the subnet's CIDR blocks?"""
    try:
        addr = ipaddress.ip_address(ip.split("/", 1)[0])
    except ValueError:
        return False
    for block in cidr_block.split(","):
        try:
            if addr in ipaddress.ip_network(block.strip(), strict=False):
                return True
        except ValueError:
            continue
    return False
