"""The built-in minimal node controller (kube-ovn `node.go` handleAddNode / handleDeleteNode).

Contract:

* Every node holds one join-subnet address under the IPAM key `node-<name>`: the address in its
  annotations when they say `allocated=true` (kept across restarts), else a random one. If that
  annotated address is now held by someone else, a new one is taken (logged).
* The node gets a logical switch port `node-<name>` on the join switch (`--node-switch`) with
  that MAC and address, an IP CR `node-<name>` (podName = node, namespace ""), and the annotations
  `ovn.kubernetes.io/ip_address`, `mac_address`, `cidr`, `gateway`, `logical_switch`,
  `port_name` and `allocated=true`, written only when they differ, and the cluster router gets
  a default route per family to the join gateway when it has none. The routing reconciler
  (`controller.routing`, node policy key) reads `ip_address` as the node's ovn0 address: the
  next hop of its pods' reroutes and of the priority-30000 policy of each InternalIP.
* A node delete releases the address and deletes the port and the IP CR (unless a node of the
  same name exists again by then); its router policies are the routing reconciler's, which
  follows the delete.
* Queues `AddNode` and `DeleteNode`, key = node name; idempotent handlers. Not done:
  gateway checks, `NodeAddressConflictWithSubnet` events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.cache import Indexer
from controller.cache.keys import object_name, raw_field
from controller.config import Config
from controller.core import router_policy as rp
from controller.core.address import get_string_ip, parse_ip
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION,
    GATEWAY_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    OVN_PROVIDER,
    POLICY_DST_IP,
    PORT_NAME_ANNOTATION,
)
from controller.core.errors import ResourceNotReadyError
from controller.core.naming import node_port_name
from controller.core.subnet_spec import format_subnet_spec
from controller.ipam import IPAM, IPAMError, SubnetNotFoundError
from controller.kube.api import KubeApi, KubeObject, desired_ip, ip_update
from controller.ovn.api import NbClient, PortSpec
from controller.pod_logic import build_ip_cr
from controller.queues import RateLimitingQueue
from controller.runtime.leader_gated import LeaderGated
from controller.runtime.worker import start_workers
from controller.view import CacheView

LOG = logging.getLogger(__name__)

NODE_KEYS = (
    IP_ADDRESS_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    CIDR_ANNOTATION,
    GATEWAY_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    PORT_NAME_ANNOTATION,
    ALLOCATED_ANNOTATION,
)


def node_ip_cr(name: str, ip: str, mac: str, join_name: str) -> KubeObject:
    """The IP CR `node-<name>` of a node's join address (podName = node, namespace "")."""
    return build_ip_cr(
        pod_name=name,
        ip=ip,
        mac=mac,
        subnet=join_name,
        namespace="",
        node_name=name,
        provider=OVN_PROVIDER,
        pod_type="",
        node_switch=join_name,
    )


def _annotations(obj: KubeObject) -> Mapping[str, object]:
    return raw_field(raw_field(obj, "metadata"), "annotations")


@dataclass(frozen=True, slots=True)
class NodeQueues:
    add: RateLimitingQueue[str]  # "AddNode"
    delete: RateLimitingQueue[str]  # "DeleteNode"


class NodeController:
    def __init__(
        self,
        *,
        config: Config,
        kube: KubeApi,
        nb: NbClient,
        ipam: IPAM,
        queues: NodeQueues,
        is_leader: Callable[[], bool],
        view: CacheView | None = None,
        **caches: Indexer | None,
    ) -> None:
        """The caches are read through `view`, or a view over `caches` (nodes=, subnets=,
        ips=)."""
        self._config = config
        self._view = CacheView.given_or_over(view, kube, caches)
        self._kube = kube
        self._nb = nb
        self._ipam = ipam
        self.queues = queues
        self._is_leader = is_leader

    # --- informer callbacks ----------------------------------------------------------------------
    def event_handler(self) -> LeaderGated:
        return LeaderGated(
            self._is_leader, added=self._added, updated=self._updated, deleted=self._deleted
        )

    def _added(self, obj: KubeObject, is_in_initial_list: bool) -> None:
        if object_name(obj):
            self.queues.add.add(object_name(obj))

    def _updated(self, old: KubeObject, new: KubeObject) -> None:
        old_ann, new_ann = _annotations(old), _annotations(new)
        if new_ann.get(ALLOCATED_ANNOTATION) != "true" or any(
            old_ann.get(k) != new_ann.get(k) for k in NODE_KEYS
        ):
            self.queues.add.add(object_name(new))

    def _deleted(self, obj: KubeObject) -> None:
        if object_name(obj):
            self.queues.delete.add(object_name(obj))

    def all_allocated(self) -> bool:
        """True when every cached node says allocated=true (the pod workers wait for it); a
        malformed node cannot be allocated and does not hold them up."""
        return all(
            n.annotations.get(ALLOCATED_ANNOTATION) == "true"
            for n in self._view.well_formed_nodes()
        )

    # --- handlers --------------------------------------------------------------------------------
    def handle_add_node(self, name: str) -> None:
        node = self._view.node(name)
        if node is None:
            return
        join_name = self._config.node_switch
        join = self._view.subnet_object(join_name)
        if join is None or not self._ipam.has_subnet(join_name):
            raise ResourceNotReadyError(f"node {name}: join subnet {join_name} not ready")
        spec = format_subnet_spec(join_name, join.spec)
        key = node_port_name(name)
        ann = node.annotations
        v4, v6, mac = self._acquire(key, ann, join_name)
        ip = get_string_ip(v4, v6)
        self._nb.create_port(
            PortSpec(name=key, switch=join_name, mac=mac, ips=tuple(a for a in (v4, v6) if a))
        )
        wanted = {
            IP_ADDRESS_ANNOTATION: ip,
            MAC_ADDRESS_ANNOTATION: mac,
            CIDR_ANNOTATION: spec["cidrBlock"],
            GATEWAY_ANNOTATION: spec["gateway"],
            LOGICAL_SWITCH_ANNOTATION: join_name,
            PORT_NAME_ANNOTATION: key,
            ALLOCATED_ANNOTATION: "true",
        }
        self._ensure_default_route(str(spec["gateway"]))
        cr = desired_ip(node_ip_cr(name, ip, mac, join_name))
        cached = self._view.ip_cr_raw(key)
        if cached is None or ip_update(cached, cr) is not None:
            self._kube.create_or_update_ip(cr)
        if any(ann.get(k) != v for k, v in wanted.items()):
            self._kube.annotate_node(name, dict(wanted))
            LOG.info("node %s: join address %s mac %s", name, ip, mac)

    def _ensure_default_route(self, join_gateway: str) -> None:
        """kube-ovn addNodeGwStaticRoute: a default route per family towards the join gateway,
        so egress has a route that the pods' reroute policies then redirect to their node. A
        default route someone else set (any next hop) is left as it is."""
        router = self._config.cluster_router
        have = {
            r.ip_prefix
            for r in self._nb.list_static_routes(router)
            if r.policy in ("", POLICY_DST_IP)
        }
        for part in join_gateway.split(","):
            gateway = part.strip()
            if not gateway or parse_ip(gateway) is None:
                continue
            default = "0.0.0.0/0" if rp.family(gateway) == 4 else "::/0"
            if default not in have:
                self._nb.add_static_route(POLICY_DST_IP, default, gateway, router)

    def _acquire(self, key: str, ann: Mapping[str, str], join: str) -> tuple[str, str, str]:
        ip, mac = ann.get(IP_ADDRESS_ANNOTATION, ""), ann.get(MAC_ADDRESS_ANNOTATION, "")
        if (
            ann.get(ALLOCATED_ANNOTATION) == "true"
            and ip
            and mac
            and ann.get(LOGICAL_SWITCH_ANNOTATION, join) == join
        ):
            try:
                return self._ipam.get_static_address(key, ip, mac, join)
            except SubnetNotFoundError:
                raise
            except IPAMError as exc:
                LOG.warning("%s: annotated address %s is taken (%s); allocating anew", key, ip, exc)
                self._ipam.release_address(key, join)
        return self._ipam.get_random_address(key, join)

    def handle_delete_node(self, name: str) -> None:
        if self._view.has_node(name):
            return  # a node of that name is back: the add queue owns it
        key = node_port_name(name)
        self._ipam.release_address_by_pod(key)
        self._nb.delete_port(key)
        self._kube.delete_ip(key)
        LOG.info("node %s deleted: released %s", name, key)

    def run_workers(self, worker_num: int, stop: threading.Event) -> list[threading.Thread]:
        return start_workers(
            [
                (self.queues.add, self.handle_add_node, worker_num),
                (self.queues.delete, self.handle_delete_node, 1),
            ],
            stop,
        )
