"""Start-up steps run once this replica leads, after the caches synced and before any worker.

In kube-ovn's order (`Controller.Run`, kube-ovn v1.8.18 pkg/controller/controller.go):

1. `init_default_vpc`: the Vpc `ovn-cluster` is created when absent and its status set
   (defaultLogicalSwitch, router, standby, default).
2. `init_ovn`: the cluster router exists; the join and default Subnet CRs are created when absent
   (join: `--node-switch*`, excludeIps = gateway; default: `--default-*`, default=true,
   natOutgoing, distributed gateway, excluded IPs from the flag); their logical switches exist,
   attached to the cluster router. Returns the two Subnet objects, so the IPAM rebuild does not
   depend on the informer having seen a just-created CR. It ends with
   `init_deny_all_security_group` (kube-ovn initDenyAllSecurityGroup, run here rather than
   after IPAM: it only needs NB): the port group `ovn.sg.kubeovn_deny_all` with its two
   priority-2003 drop ACLs, holding every port that has security groups.
3. `init_ipam`: IPAM rebuilt from the Subnets (formatted: gateway excluded), the IP CRs of
   StatefulSet / VirtualMachine pods (their pods may not exist right now), the annotations of
   every alive (or StatefulSet) non-hostNetwork pod, per network with `allocated=true` (missing
   or stale IP CRs of those pods are written back), the IP CRs of alive pods not annotated for
   that subnet (an add interrupted after its IP CR write; not in v1.8), and the annotations of
   allocated nodes.
   Logs "take X seconds to initialize IPAM". Every error is logged and skipped, never fatal.

The start-up garbage collection that follows (pods deleted while no controller ran) is
`controller.controllers.gc.GarbageCollector.run_startup_gc`, run by `controller.app` right after
`init_ipam`.

Every function reads the informer caches through the `CacheView` and writes through the ports
(`KubeApi`, `ClusterApi`, `NbClient`); nothing here knows a concrete adapter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.apiclient.errors import AlreadyExistsError, KubeApiError
from controller.cache.keys import raw_field
from controller.config import Config
from controller.core import annotations as ann
from controller.core import keep
from controller.core.address import check_protocol
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    DEFAULT_VPC,
    DENY_ALL_SECURITY_GROUP,
    GATEWAY_TYPE_DISTRIBUTED,
    IP_ADDRESS_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    NETWORK_TYPE_VLAN,
    OVN_PROVIDER,
    annotation_key,
)
from controller.core.errors import MalformedObjectError
from controller.core.model import Pod
from controller.core.naming import node_port_name, pod_key
from controller.core.subnet_spec import format_subnet_spec
from controller.ipam import IPAM, IPAMError
from controller.kube.api import KubeApi, KubeObject, desired_ip, ip_update
from controller.kube.cluster import ClusterApi
from controller.ovn.api import NbClient
from controller.pod_logic import (
    build_ip_cr,
    get_name_by_pod,
    get_pod_key,
    get_pod_type,
    is_pod_alive,
)
from controller.view import CachedObject, CacheView

LOG = logging.getLogger(__name__)


# --- 1. default VPC -------------------------------------------------------------------------------


def init_default_vpc(config: Config, cluster: ClusterApi) -> None:
    """kube-ovn InitDefaultVpc: Vpc `ovn-cluster` exists with its status filled in."""
    vpc = cluster.get_vpc(DEFAULT_VPC)
    if vpc is None:
        try:
            vpc = cluster.create_vpc({"metadata": {"name": DEFAULT_VPC}, "spec": {}})
            LOG.info("created default vpc %s", DEFAULT_VPC)
        except AlreadyExistsError:
            vpc = cluster.get_vpc(DEFAULT_VPC)
            if vpc is None:
                raise
    status = {
        **(vpc.get("status") or {}),
        "defaultLogicalSwitch": config.default_logical_switch,
        "router": config.cluster_router,
        "standby": True,
        "default": True,
    }
    if vpc.get("status") != status:
        cluster.replace_vpc_status(vpc, status)


# --- 2. router, join and default subnets ----------------------------------------------------------


def join_subnet_body(config: Config) -> KubeObject:
    return {
        "metadata": {"name": config.node_switch},
        "spec": {
            "vpc": DEFAULT_VPC,
            "default": False,
            "provider": OVN_PROVIDER,
            "cidrBlock": config.node_switch_cidr,
            "gateway": config.node_switch_gateway,
            "excludeIps": config.node_switch_gateway.split(","),
            "protocol": check_protocol(config.node_switch_cidr),
            "disableInterConnection": True,
        },
    }


def default_subnet_body(config: Config) -> KubeObject:
    spec: dict[str, Any] = {
        "vpc": DEFAULT_VPC,
        "default": True,
        "provider": OVN_PROVIDER,
        "cidrBlock": config.default_cidr,
        "gateway": config.default_gateway,
        "gatewayType": GATEWAY_TYPE_DISTRIBUTED,
        "excludeIps": list(config.default_exclude_ips),
        "natOutgoing": True,
        "protocol": check_protocol(config.default_cidr),
    }
    if config.network_type == NETWORK_TYPE_VLAN:
        spec["vlan"] = config.default_vlan_name
    return {"metadata": {"name": config.default_logical_switch}, "spec": spec}


def _ensure_subnet(kube: KubeApi, view: CacheView, body: KubeObject) -> KubeObject:
    name = body["metadata"]["name"]
    cached = view.subnet_object(name)
    if cached is not None:
        return dict(cached.obj)
    existing = kube.get_subnet(name)
    if existing is not None:
        return existing
    try:
        created = kube.create_subnet(body)
        LOG.info("created subnet %s %s", name, body["spec"]["cidrBlock"])
        return created
    except AlreadyExistsError:
        again = kube.get_subnet(name)
        if again is None:
            raise
        return again


def init_ovn(config: Config, kube: KubeApi, view: CacheView, nb: NbClient) -> list[KubeObject]:
    """kube-ovn InitOVN (router + join/default subnets); returns the two Subnet objects."""
    nb.ensure_logical_router(config.cluster_router)
    result = []
    for body in (join_subnet_body(config), default_subnet_body(config)):
        subnet = _ensure_subnet(kube, view, body)
        name = body["metadata"]["name"]
        spec = format_subnet_spec(name, raw_field(subnet, "spec"))
        router = (
            "" if spec.get("vlan") and not spec.get("logicalGateway") else config.cluster_router
        )
        nb.ensure_logical_switch(
            name, router, spec["cidrBlock"], spec["gateway"], {"vpc": DEFAULT_VPC}
        )
        result.append(subnet)
    init_deny_all_security_group(nb)
    return result


def init_deny_all_security_group(nb: NbClient) -> None:
    """kube-ovn initDenyAllSecurityGroup: the deny-all port group, its drop ACLs, its ports."""
    nb.create_sg_port_group(DENY_ALL_SECURITY_GROUP)
    nb.sync_sg_ports(DENY_ALL_SECURITY_GROUP)


# --- 3. IPAM -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IpamInitReport:
    subnets: int
    sts_vm_ips: int
    pod_addresses: int
    node_addresses: int
    ip_crs_written: int
    errors: int
    seconds: float


@dataclass(slots=True)
class _Tally:
    """What the rebuild restored so far, and how many objects it had to skip."""

    subnets: int = 0
    ips: int = 0
    pods: int = 0
    nodes: int = 0
    written: int = 0
    errors: int = 0


def init_ipam(
    *,
    config: Config,
    ipam: IPAM,
    kube: KubeApi,
    view: CacheView,
    bootstrapped: Iterable[KubeObject] = (),
    now: datetime | None = None,
    parse_pod: Callable[[KubeObject], Pod] = Pod.from_dict,
) -> IpamInitReport:
    """kube-ovn InitIPAM (see the module docstring), over the view's caches. Never raises for
    bad data. `bootstrapped`: the Subnets `init_ovn` returned (the informer may not have seen
    them yet). `parse_pod` may be a start-up parse cache the garbage collection then reads the
    pods from."""
    start = time.monotonic()
    tally = _Tally()
    subnets = [CachedObject.of(raw) for raw in bootstrapped]
    _restore_subnets(ipam, [*subnets, *view.subnet_objects()], tally)
    _restore_kept_ip_crs(ipam, view, tally)
    alive, annotated = _restore_pods(
        config, ipam, kube, view, now or datetime.now(UTC), parse_pod, tally
    )
    reserved = _reserve_interrupted_adds(ipam, view, alive, annotated)
    if reserved:
        LOG.info("init ipam: kept %d address(es) of interrupted adds", reserved)
    _restore_nodes(config, ipam, view, tally)
    seconds = time.monotonic() - start
    LOG.info(
        "take %.3f seconds to initialize IPAM: %d subnets, addresses of %d pod networks, %d "
        "kept IP CRs and %d nodes restored, %d IP CRs written, %d errors",
        seconds,
        tally.subnets,
        tally.pods,
        tally.ips,
        tally.nodes,
        tally.written,
        tally.errors,
    )
    return IpamInitReport(
        tally.subnets, tally.ips, tally.pods, tally.nodes, tally.written, tally.errors, seconds
    )


def _restore_subnets(ipam: IPAM, subnets: Iterable[CachedObject], tally: _Tally) -> None:
    """Every subnet once (the first of a name wins), formatted: the gateway is excluded."""
    seen: set[str] = set()
    for subnet in subnets:
        name = subnet.name
        if not name or name in seen:
            continue
        seen.add(name)
        try:
            spec = format_subnet_spec(name, subnet.spec)
            ipam.add_or_update_subnet(name, spec["cidrBlock"], spec["excludeIps"])
            tally.subnets += 1
        except (IPAMError, MalformedObjectError) as exc:
            tally.errors += 1
            LOG.error("init ipam: subnet %s: %s", name, exc)


def _restore_kept_ip_crs(ipam: IPAM, view: CacheView, tally: _Tally) -> None:
    """The IP CRs of StatefulSet / VM pods: their pods may not exist right now."""
    for ip_cr in view.ip_crs_raw():
        cr_spec = raw_field(ip_cr, "spec")
        if not keep.is_kept_pod_type(str(cr_spec.get("podType") or "")):
            continue
        ns, pod_name = str(cr_spec.get("namespace") or ""), str(cr_spec.get("podName") or "")
        key = pod_key(ns, pod_name) if ns else node_port_name(pod_name)
        try:
            ipam.get_static_address(
                key,
                str(cr_spec.get("ipAddress") or ""),
                str(cr_spec.get("macAddress") or ""),
                str(cr_spec.get("subnet") or ""),
                quiet=True,
            )
            tally.ips += 1
        except IPAMError as exc:
            tally.errors += 1
            LOG.error(
                "init ipam: IP %s of %s: %s", raw_field(ip_cr, "metadata").get("name"), key, exc
            )


def _restore_pods(
    config: Config,
    ipam: IPAM,
    kube: KubeApi,
    view: CacheView,
    now: datetime,
    parse_pod: Callable[[KubeObject], Pod],
    tally: _Tally,
) -> tuple[set[str], set[str]]:
    """The annotated networks of every alive (or StatefulSet) non-hostNetwork pod; returns the
    keys of the alive pods (so the interrupted-adds pass parses none again) and the names of
    the IP CRs whose network the annotations restored."""
    alive: set[str] = set()
    annotated: set[str] = set()
    for raw in view.pods_raw():
        try:
            pod = parse_pod(raw)
        except MalformedObjectError as exc:
            tally.errors += 1
            LOG.error("init ipam: %s", exc)
            continue
        if pod.host_network:
            continue
        is_alive = is_pod_alive(pod, now)
        if is_alive:
            alive.add(pod.key)
        if not keep.restored_by_rebuild(pod, alive=is_alive):
            continue
        for provider in ann.allocated_providers(pod.annotations):
            restored, written, errors = _restore_pod_net(
                config, ipam, kube, view, pod, provider, annotated
            )
            tally.pods += restored
            tally.written += written
            tally.errors += errors
    return alive, annotated


def _restore_nodes(config: Config, ipam: IPAM, view: CacheView, tally: _Tally) -> None:
    """The join address of every node whose annotations say allocated=true."""
    for name in sorted(view.node_names()):
        try:
            node = view.node(name)
        except MalformedObjectError as exc:
            tally.errors += 1
            LOG.error("init ipam: %s", exc)
            continue
        node_ann = node.annotations if node is not None else {}
        if node_ann.get(ALLOCATED_ANNOTATION) != "true":
            continue
        try:
            ipam.get_static_address(
                node_port_name(name),
                node_ann.get(IP_ADDRESS_ANNOTATION, ""),
                node_ann.get(MAC_ADDRESS_ANNOTATION, ""),
                node_ann.get(LOGICAL_SWITCH_ANNOTATION, config.node_switch),
                quiet=True,
            )
            tally.nodes += 1
        except IPAMError as exc:
            tally.errors += 1
            LOG.error("init ipam: node %s: %s", name, exc)


def _reserve_interrupted_adds(
    ipam: IPAM, view: CacheView, alive: set[str], annotated: set[str]
) -> int:
    """Reserve the IP CR address of the `alive` pod keys that hold nothing in that subnet yet.
    The CRs of `annotated` networks are skipped: the annotations restored them (and rewrote a CR
    naming another subnet), so such a stale CR must not reserve a second address.

    NOTE: not in kube-ovn v1.8. A controller killed after an add wrote the IP CR (and maybe the
    port) but before the annotation patch leaves an alive pod without annotations: forgetting its
    address here lets another pod draw it, whose port create then fails for good on the leftover
    port, while the dead controller's patch may still land with that address. Reserved under the
    pod's key, the address is what the pod's own add gets again (allocation is stable per key).
    Runs after the annotations, which win any conflict. Returns how many were reserved.
    """
    reserved = 0
    for ip_cr in view.ip_crs_raw():
        spec = raw_field(ip_cr, "spec")
        if keep.is_kept_pod_type(str(spec.get("podType") or "")):
            continue  # restored above, pod or not
        ns, name = str(spec.get("namespace") or ""), str(spec.get("podName") or "")
        subnet = str(spec.get("subnet") or "")
        key = pod_key(ns, name)
        if not ns or not name or key not in alive:
            continue  # a node's CR, an orphan the start-up gc collects, or a dead/host pod
        if raw_field(ip_cr, "metadata").get("name") in annotated:
            continue  # the annotations restored this network: they win over a stale CR
        if any(a.subnet == subnet for a in ipam.get_pod_address(key)):
            continue  # its annotations were restored: they win over a stale CR
        try:
            ipam.get_static_address(
                key,
                str(spec.get("ipAddress") or ""),
                str(spec.get("macAddress") or ""),
                subnet,
                quiet=True,
            )
        except IPAMError as exc:
            cr_name = raw_field(ip_cr, "metadata").get("name")
            LOG.info("init ipam: not reserving IP %s of %s: %s", cr_name, key, exc)
            continue
        reserved += 1
    return reserved


def _restore_pod_net(
    config: Config,
    ipam: IPAM,
    kube: KubeApi,
    view: CacheView,
    pod: Pod,
    provider: str,
    annotated: set[str],
) -> tuple[int, int, int]:
    """One allocated net of one pod: (restored, CRs written, errors); the name of its IP CR
    goes into `annotated`."""
    ip = pod.annotations.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
    mac = pod.annotations.get(annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
    switch = pod.annotations.get(annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), "")
    if not ip or not switch:
        return 0, 0, 0
    key = get_pod_key(pod, config.enable_keep_vm_ip)
    try:
        ipam.get_static_address(key, ip, mac, switch, quiet=True)
    except IPAMError as exc:
        LOG.error("init ipam: pod %s net %s: %s", pod.key, provider, exc)
        return 0, 0, 1
    cr = build_ip_cr(
        pod_name=get_name_by_pod(pod, config.enable_keep_vm_ip),
        ip=ip,
        mac=mac,
        subnet=switch,
        namespace=pod.namespace,
        node_name=pod.node_name,
        provider=provider,
        pod_type=get_pod_type(pod),
        node_switch=config.node_switch,
    )
    annotated.add(cr["metadata"]["name"])
    cached = view.ip_cr_raw(cr["metadata"]["name"])
    if cached is not None and ip_update(cached, cr) is None:
        return 1, 0, 0  # nearly every pod after a restart: validated only when written
    try:
        kube.create_or_update_ip(desired_ip(cr))
    except KubeApiError as exc:
        LOG.error("init ipam: IP CR of pod %s: %s", pod.key, exc)
        return 1, 0, 1
    return 1, 1, 0
