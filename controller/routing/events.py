"""The routing reconciler's informer handlers: which keys an event enqueues.

* a pod add / delete, or an update that changes what its rows depend on (subnet, node,
  addresses, liveness, EIP/SNAT, north gateway), enqueues its old and new node keys and subnet
  keys;
* a node event (join address, InternalIPs, readiness, delete and re-register) enqueues its
  node policy key, the node key of every subnet and the subnet key of every centralized subnet
  it may gate;
* a subnet event (spec or `status.activateGateway`) enqueues its subnet key;
* the external gateway ConfigMap feeds every EIP/SNAT pod's rows: a change of its data is a
  full resync.

Every handler runs only while this replica leads, and a failing one is logged, never raised
into the informer (`LeaderGated`).
"""

from __future__ import annotations

from collections.abc import Callable

from controller.cache.keys import object_name, raw_field
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    EIP_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    NORTH_GATEWAY_ANNOTATION,
    SNAT_ANNOTATION,
)
from controller.core.errors import MalformedObjectError
from controller.core.gateway import gateway_node_names
from controller.core.model import Node, Subnet
from controller.kube.api import KubeObject
from controller.pod_logic import routing_state as rs
from controller.runtime.leader_gated import LeaderGated

_RELEVANT = (
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    EIP_ANNOTATION,
    SNAT_ANNOTATION,
    NORTH_GATEWAY_ANNOTATION,
    ALLOCATED_ANNOTATION,
)
_LOGGED_AS = "routing event handler"

Enqueue = Callable[[str], None]
IsLeader = Callable[[], bool]


def _relevant(obj: KubeObject) -> tuple[object, ...]:
    """What a pod's routing rows depend on (an update that changes none of it queues nothing)."""
    meta = raw_field(obj, "metadata")
    annotations = raw_field(meta, "annotations")
    return (
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        raw_field(obj, "spec").get("nodeName"),
        raw_field(obj, "status").get("phase"),
        raw_field(obj, "status").get("reason"),
        *(annotations.get(k) for k in _RELEVANT),
    )


def _node_inputs(obj: KubeObject) -> tuple[object, ...]:
    try:
        node = Node.from_dict(obj)
    except MalformedObjectError:
        return (None,)
    return (node.ready, node.annotations.get(IP_ADDRESS_ANNOTATION, ""), node.internal_ips)


def pod_event_handler(enqueue: Enqueue, is_leader: IsLeader) -> LeaderGated:
    def touched(obj: KubeObject, *_: object) -> None:
        subnet = raw_field(raw_field(obj, "metadata"), "annotations").get(LOGICAL_SWITCH_ANNOTATION)
        if not isinstance(subnet, str) or not subnet or rs.KEY_SEP in subnet:
            return
        enqueue(rs.subnet_key(subnet))
        node = raw_field(obj, "spec").get("nodeName")
        if isinstance(node, str) and node:
            enqueue(rs.node_key(subnet, node))

    def updated(old: KubeObject, new: KubeObject) -> None:
        if _relevant(old) != _relevant(new):
            touched(old)
            touched(new)

    return LeaderGated(
        is_leader, added=touched, updated=updated, deleted=touched, errors_logged_as=_LOGGED_AS
    )


def node_event_handler(
    enqueue: Enqueue, subnets: Callable[[], list[Subnet]], is_leader: IsLeader
) -> LeaderGated:
    def touched(obj: KubeObject, *_: object) -> None:
        name = object_name(obj)
        if not name:
            return
        enqueue(rs.node_policy_key(name))
        for subnet in subnets():
            enqueue(rs.node_key(subnet.name, name))
            if name in gateway_node_names(subnet.gateway_node):
                enqueue(rs.subnet_key(subnet.name))

    def updated(old: KubeObject, new: KubeObject) -> None:
        if _node_inputs(old) != _node_inputs(new):
            touched(new)

    return LeaderGated(
        is_leader, added=touched, updated=updated, deleted=touched, errors_logged_as=_LOGGED_AS
    )


def subnet_event_handler(enqueue: Enqueue, is_leader: IsLeader) -> LeaderGated:
    def changed(obj: KubeObject, *_: object) -> None:
        name = object_name(obj)
        if name:
            enqueue(rs.subnet_key(name))

    def updated(old: KubeObject, new: KubeObject) -> None:
        gateway_changed = raw_field(old, "status").get("activateGateway") != raw_field(
            new, "status"
        ).get("activateGateway")
        if old.get("spec") != new.get("spec") or gateway_changed:
            changed(new)

    return LeaderGated(
        is_leader, added=changed, updated=updated, deleted=changed, errors_logged_as=_LOGGED_AS
    )


def configmap_event_handler(resync: Callable[[], None], is_leader: IsLeader) -> LeaderGated:
    def changed(obj: KubeObject, *_: object) -> None:
        resync()

    def updated(old: KubeObject, new: KubeObject) -> None:
        if old.get("data") != new.get("data"):
            resync()

    return LeaderGated(
        is_leader, added=changed, updated=updated, deleted=changed, errors_logged_as=_LOGGED_AS
    )
