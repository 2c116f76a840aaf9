"""What `controller.app.Controller` wires together: informers, controllers, the elector's locks.

Each builder gets its ports and returns (or fills) what the `Controller` keeps, so `app` holds
the process's life cycle and this module the wiring:

- `add_informers`: the informers (all cached, nothing is fetched per pod) of pods, namespaces,
  nodes, subnets, IPs, vlans, vpcs, security groups, statefulsets, the ConfigMaps of
  KUBE_NAMESPACE (the external gateway ConfigMap), and network-attachment-definitions / kubevirt
  virtual machines only when their API group is served.
- `wire_controllers`: the four pod queues named as kube-ovn's, the `CacheView`, the routing
  reconciler (queue `UpdateRouting`, fed by the pod, node, subnet and ConfigMap informers), the pod
  controller, the garbage collector, the security group controller and the minimal subnet /
  namespace / node controllers (each switchable off by its flag; with the subnet controller off
  IPAM still follows the Subnets), each subscribed to its informers.
- `leader_elector`: the `LeaderElector` on both kube-ovn generations' locks.
- `nb_ssl_kwargs`: the NB client's TLS files when a remote is `ssl:`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.cache import Indexer, SharedIndexInformer, SharedInformerFactory
from controller.config import Config
from controller.controllers.gc import GarbageCollector
from controller.controllers.namespace import NamespaceController
from controller.controllers.node import NodeController, NodeQueues
from controller.controllers.security_group import (
    QUEUE_DELETE_SG,
    QUEUE_UPDATE_SG,
    RESOURCE_SECURITY_GROUPS,
    SecurityGroupController,
    SecurityGroupQueues,
)
from controller.controllers.subnet import SubnetController, SubnetQueues
from controller.controllers.subnet_ipam import SubnetIpamTracker
from controller.controllers.subnet_status import SubnetConditions
from controller.core.constants import (
    KUBEOVN_GROUP,
    KUBEOVN_VERSION,
    KUBEVIRT_GROUP,
    KUBEVIRT_VERSION,
    NAD_GROUP,
    NAD_VERSION,
    QUEUE_ADD_NAMESPACE,
    QUEUE_ADD_NODE,
    QUEUE_ADD_POD,
    QUEUE_ADD_SUBNET,
    QUEUE_DELETE_NODE,
    QUEUE_DELETE_POD,
    QUEUE_DELETE_SUBNET,
    QUEUE_UPDATE_POD,
    QUEUE_UPDATE_POD_SECURITY,
    QUEUE_UPDATE_ROUTING,
    QUEUE_UPDATE_SUBNET_STATUS,
    RESOURCE_IPS,
    RESOURCE_NADS,
    RESOURCE_SUBNETS,
    RESOURCE_VIRTUAL_MACHINES,
    RESOURCE_VLANS,
    RESOURCE_VPCS,
)
from controller.ipam import IPAM
from controller.kube.client import KubeClient
from controller.kube.cluster import ClusterApi
from controller.kube.events import BackgroundEventRecorder
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod.controller import PodController, PodQueues
from controller.queues import RateLimitingQueue
from controller.routing import RoutingReconciler
from controller.runtime.keymutex import KeyMutex
from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
)
from controller.runtime.locks import (
    KUBE_OVN_V18_LOCK,
    BothLocks,
    ConfigMapLock,
    LeaseLock,
    max_hold,
)
from controller.runtime.metrics import ControllerMetrics
from controller.view import (
    IP_INDEX,
    MAY_WAIT_INDEX,
    NODE_INDEX,
    NODE_IP_INDEX,
    CacheView,
    ip_index,
    may_wait_index,
    node_index,
    node_ip_index,
)

LOG = logging.getLogger(__name__)


def add_informers(
    inf: dict[str, SharedIndexInformer],
    factory: SharedInformerFactory,
    cm_factory: SharedInformerFactory,
    *,
    nad_served: bool,
    kubevirt_served: bool,
) -> None:
    """Create the informers into `inf` (by resource name); `cm_factory` is KUBE_NAMESPACE's."""
    inf["pods"] = factory.informer_for("", "v1", "pods")
    inf["pods"].add_indexers(
        {MAY_WAIT_INDEX: may_wait_index, NODE_INDEX: node_index, IP_INDEX: ip_index}
    )
    inf["namespaces"] = factory.informer_for("", "v1", "namespaces", namespaced=False)
    inf["nodes"] = factory.informer_for("", "v1", "nodes", namespaced=False)
    inf["nodes"].add_indexers({NODE_IP_INDEX: node_ip_index})
    for name in (RESOURCE_SUBNETS, RESOURCE_IPS, RESOURCE_VLANS, RESOURCE_VPCS):
        inf[name] = factory.informer_for(KUBEOVN_GROUP, KUBEOVN_VERSION, name, namespaced=False)
    inf[RESOURCE_SECURITY_GROUPS] = factory.informer_for(
        KUBEOVN_GROUP, KUBEOVN_VERSION, RESOURCE_SECURITY_GROUPS, namespaced=False
    )
    inf["statefulsets"] = factory.informer_for("apps", "v1", "statefulsets")
    inf["configmaps"] = cm_factory.informer_for("", "v1", "configmaps")
    if nad_served:
        inf["nads"] = factory.informer_for(NAD_GROUP, NAD_VERSION, RESOURCE_NADS)
    else:
        LOG.info("%s/%s is not served: no network attachments", NAD_GROUP, NAD_VERSION)
    if kubevirt_served:
        inf["vms"] = factory.informer_for(
            KUBEVIRT_GROUP, KUBEVIRT_VERSION, RESOURCE_VIRTUAL_MACHINES
        )
    else:
        LOG.info("%s/%s is not served: no KubeVirt VMs", KUBEVIRT_GROUP, KUBEVIRT_VERSION)


@dataclass(frozen=True, slots=True)
class Components:
    """The controllers `wire_controllers` built (None: switched off by its flag)."""

    pod_queues: PodQueues
    view: CacheView
    pod_controller: PodController
    routing: RoutingReconciler
    gc: GarbageCollector
    sg_controller: SecurityGroupController
    subnet_controller: SubnetController | None
    namespace_controller: NamespaceController | None
    node_controller: NodeController | None


def wire_controllers(
    *,
    cfg: Config,
    inf: dict[str, SharedIndexInformer],
    kube: KubeClient,
    cluster: ClusterApi,
    nb: OvsdbappNbClient,
    ipam: IPAM,
    recorder: BackgroundEventRecorder,
    key_mutex: KeyMutex,
    metrics: ControllerMetrics,
    is_leader: Callable[[], bool],
    queue: Callable[[str], RateLimitingQueue[str]],
    status_delay: float,
) -> Components:
    """Build every controller on the informers' caches and subscribe it to its informers.

    `queue(name)` makes one named work queue (the caller keeps them to shut them down).
    """

    def idx(name: str) -> Indexer:
        return inf[name].get_indexer()

    def opt(name: str) -> Indexer | None:
        return inf[name].get_indexer() if name in inf else None

    pod_queues = PodQueues(
        add=queue(QUEUE_ADD_POD),
        update=queue(QUEUE_UPDATE_POD),
        delete=queue(QUEUE_DELETE_POD),
        security=queue(QUEUE_UPDATE_POD_SECURITY),
    )
    # One read view for every controller: each cached object parsed once.
    view = CacheView(
        kube=kube,
        pods=idx("pods"),
        namespaces=idx("namespaces"),
        subnets=idx(RESOURCE_SUBNETS),
        nodes=idx("nodes"),
        ips=idx(RESOURCE_IPS),
        vlans=idx(RESOURCE_VLANS),
        vpcs=idx(RESOURCE_VPCS),
        configmaps=idx("configmaps"),
        statefulsets=opt("statefulsets"),
        nads=opt("nads"),
        vms=opt("vms"),
        security_groups=idx(RESOURCE_SECURITY_GROUPS),
    )
    routing = RoutingReconciler(
        config=cfg,
        view=view,
        kube=kube,
        nb=nb,
        queue=queue(QUEUE_UPDATE_ROUTING),
        is_leader=is_leader,
        events_delivered=lambda: all(
            inf[r].notifications_handled()
            for r in ("pods", "nodes", RESOURCE_SUBNETS, "configmaps")
        ),
    )
    inf["pods"].add_event_handler(routing.pod_event_handler())
    inf["nodes"].add_event_handler(routing.node_event_handler())
    inf[RESOURCE_SUBNETS].add_event_handler(routing.subnet_event_handler())
    inf["configmaps"].add_event_handler(routing.configmap_event_handler())
    pod_controller = PodController(
        config=cfg,
        routing=routing,
        kube=kube,
        nb=nb,
        ipam=ipam,
        recorder=recorder,
        key_mutex=key_mutex,
        queues=pod_queues,
        is_leader=is_leader,
        metrics=metrics,
        view=view,
    )
    inf["pods"].add_event_handler(pod_controller.event_handler())
    if "nads" in inf:
        # A pod waiting for its attachment definition converges as soon as it appears.
        inf["nads"].add_event_handler(pod_controller.nad_event_handler())
    gc = GarbageCollector(
        config=cfg,
        kube=kube,
        nb=nb,
        ipam=ipam,
        metrics=metrics,
        key_mutex=key_mutex,
        ready=lambda: all(i.has_synced() for i in inf.values()),
        view=view,
        routing=routing,
    )

    sg_controller = SecurityGroupController(
        view=view,
        kube=kube,
        nb=nb,
        recorder=recorder,
        queues=SecurityGroupQueues(update=queue(QUEUE_UPDATE_SG), delete=queue(QUEUE_DELETE_SG)),
        is_leader=is_leader,
    )
    inf[RESOURCE_SECURITY_GROUPS].add_event_handler(sg_controller.event_handler())
    subnet_controller: SubnetController | None = None
    namespace_controller: NamespaceController | None = None
    node_controller: NodeController | None = None
    if cfg.enable_subnet_controller:
        conditions = SubnetConditions(kube=kube, nb=nb, node_switch=cfg.node_switch, view=view)
        subnet_controller = SubnetController(
            config=cfg,
            view=view,
            kube=kube,
            cluster=cluster,
            nb=nb,
            ipam=ipam,
            recorder=recorder,
            queues=SubnetQueues(
                add=queue(QUEUE_ADD_SUBNET),
                delete=queue(QUEUE_DELETE_SUBNET),
                status=queue(QUEUE_UPDATE_SUBNET_STATUS),
            ),
            is_leader=is_leader,
            metrics=metrics,
            status_delay=status_delay,
            on_ready=pod_controller.subnet_ready,
            conditions=conditions,
        )
        inf[RESOURCE_SUBNETS].add_event_handler(subnet_controller.event_handler())
        inf[RESOURCE_SUBNETS].add_event_handler(
            conditions.subnet_event_handler(subnet_controller.enqueue_status, is_leader)
        )
        inf["nodes"].add_event_handler(
            conditions.node_event_handler(subnet_controller.enqueue_status, is_leader)
        )
        inf[RESOURCE_IPS].add_event_handler(subnet_controller.ip_event_handler())
    else:
        # Another controller owns the Subnets; IPAM must still follow them.
        inf[RESOURCE_SUBNETS].add_event_handler(
            SubnetIpamTracker(ipam, is_leader, pod_controller.subnet_ready).event_handler()
        )
    if cfg.enable_namespace_controller:
        namespace_controller = NamespaceController(
            config=cfg,
            view=view,
            kube=kube,
            queue=queue(QUEUE_ADD_NAMESPACE),
            is_leader=is_leader,
        )
        inf["namespaces"].add_event_handler(namespace_controller.event_handler())
        inf[RESOURCE_VPCS].add_event_handler(namespace_controller.vpc_event_handler())
        inf[RESOURCE_SUBNETS].add_event_handler(namespace_controller.subnet_event_handler())
    if cfg.enable_node_controller:
        node_controller = NodeController(
            config=cfg,
            view=view,
            kube=kube,
            nb=nb,
            ipam=ipam,
            queues=NodeQueues(add=queue(QUEUE_ADD_NODE), delete=queue(QUEUE_DELETE_NODE)),
            is_leader=is_leader,
        )
        inf["nodes"].add_event_handler(node_controller.event_handler())
    return Components(
        pod_queues=pod_queues,
        view=view,
        pod_controller=pod_controller,
        routing=routing,
        gc=gc,
        sg_controller=sg_controller,
        subnet_controller=subnet_controller,
        namespace_controller=namespace_controller,
        node_controller=node_controller,
    )


def leader_elector(api_client: Any, cfg: Config, callbacks: LeaderCallbacks) -> LeaderElector:
    """The elector on Lease `--leader-elect-resource-name` and kube-ovn v1.8's ConfigMap."""
    # Both generations' locks: a kube-ovn-controller v1.8 (ConfigMap) or v1.12+ (Lease)
    # still running waits instead of allocating beside us, and we wait for it.
    lock = BothLocks(
        LeaseLock(
            api_client,
            cfg.leader_elect_resource_namespace,
            cfg.leader_elect_resource_name,
            cfg.pod_name,
        ),
        ConfigMapLock(
            api_client,
            cfg.leader_elect_resource_namespace,
            KUBE_OVN_V18_LOCK,
            cfg.pod_name,
        ),
    )
    return LeaderElector(
        LeaderElectionConfig(
            lock=lock,
            callbacks=callbacks,
            lease_duration=cfg.leader_elect_lease_duration,
            renew_deadline=cfg.leader_elect_renew_deadline,
            retry_period=cfg.leader_elect_retry_period,
            release_on_cancel=True,
            name=f"{cfg.leader_elect_resource_namespace}/{cfg.leader_elect_resource_name}",
            max_hold=max_hold(cfg.leader_elect_lease_duration),
        )
    )


def nb_ssl_kwargs(cfg: Config) -> dict[str, Any]:
    """The NB client's TLS keyword arguments: empty unless a remote is `ssl:`."""
    if not any(r.startswith("ssl:") for r in cfg.ovn_nb_addr.split(",")):
        return {}
    return {
        "ssl_private_key": cfg.ovn_nb_ssl_key,
        "ssl_certificate": cfg.ovn_nb_ssl_cert,
        "ssl_ca_cert": cfg.ovn_nb_ssl_ca,
    }
