"""A PodController wired to in-memory fakes, plus a tiny informer simulation.

`Env` owns: `FakeKubeApi` (the API server's truth), real cache `Indexer`s (what the informers
would hold), `FakeNbClient`, the real `IPAM`, `FakeEventRecorder`, real queues on a `FakeClock`.
Helpers move state the way an informer would: `create_pod` / `sync` / `remove_pod` copy the fake
API server's objects into the pod indexer and fire the controller's callbacks. `process(queue)` /
`converge()` run the worker function (`controller.runtime.worker.process_next_work_item`)
inline, on the test thread, so no real threads are involved; the routing reconciler's queue is
one of them, fed by the pod events (`enqueue_routing()` queues every key of the cluster).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controller.cache import NAMESPACE_INDEX, Indexer, meta_namespace_index_func
from controller.config import Config
from controller.ipam import IPAM
from controller.pod.controller import PodController, PodQueues
from controller.queues import (
    Clock,
    MetricsProvider,
    RateLimitingQueue,
    default_controller_rate_limiter,
)
from controller.routing import RoutingReconciler
from controller.runtime.keymutex import KeyMutex
from controller.runtime.metrics import ControllerMetrics
from controller.runtime.worker import process_next_work_item
from controller.testing import builders
from controller.testing.clock import FakeClock
from controller.testing.fake_kube import FakeEventRecorder, FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from controller.view import (
    IP_INDEX,
    NODE_INDEX,
    NODE_IP_INDEX,
    CacheView,
    ip_index,
    node_index,
    node_ip_index,
)

NOW = builders.NOW
ROUTER = "ovn-cluster"
DEFAULT_SUBNET = "ovn-default"
NODE = "node1"
NODE_INTERNAL_IP = "172.18.0.2"
NODE_JOIN_IP = "100.64.0.2"


def indexer() -> Indexer:
    return Indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func})


POD_CONTAINERS = ({"name": "c", "image": "i"},)


def cached(store: Indexer, key: str) -> dict[str, Any]:
    """The object cached under `key`; fails the test when it is not there."""
    obj = store.get_by_key(key)
    assert obj is not None, f"{key} not in the cache"
    return obj


def raw_pod(
    name: str,
    namespace: str = "default",
    *,
    annotations: dict[str, str] | None = None,
    node: str = "",
    owner: tuple[str, str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A running pod as these tests seed it (`node` empty: not scheduled yet)."""
    return builders.pod(
        name,
        namespace,
        annotations=annotations,
        owner=owner,
        owner_uid="o",
        node=node or None,
        containers=POD_CONTAINERS,
        phase="Running",
        **spec,
    )


def raw_subnet(
    name: str,
    cidr: str,
    *,
    gateway: str,
    exclude: list[str] | None = None,
    available: float = 1000,
    **spec: Any,
) -> dict[str, Any]:
    """A Subnet excluding its gateway(s) unless `exclude` says otherwise."""
    return builders.subnet(
        name,
        cidr,
        gateway=gateway,
        exclude_ips=exclude if exclude is not None else gateway.split(","),
        available=available,
        typed=True,
        **spec,
    )


def _queue(
    name: str, clock: Clock, provider: MetricsProvider | None = None
) -> RateLimitingQueue[str]:
    return RateLimitingQueue[str](
        default_controller_rate_limiter(clock), name=name, clock=clock, metrics_provider=provider
    )


@dataclass
class Env:
    config: Config = field(default_factory=Config)
    clock: Clock = field(default_factory=FakeClock)
    with_owner_indexers: bool = True
    metrics: ControllerMetrics | None = None
    now: datetime = NOW
    leader: bool = True
    queue_metrics: MetricsProvider | None = None
    nb_client: FakeNbClient | None = None  # a FakeNbClient subclass to use instead

    def __post_init__(self) -> None:
        self.kube = FakeKubeApi()
        if self.nb_client is not None:
            self.nb: FakeNbClient = self.nb_client
        else:
            self.nb = FakeNbClient()
        self.ipam = IPAM()
        self.recorder = FakeEventRecorder()
        self.pods = indexer()
        self.namespaces = indexer()
        self.subnets = indexer()
        self.nodes = indexer()
        self.ips = indexer()
        self.vlans = indexer()
        self.vpcs = indexer()
        self.configmaps = indexer()
        self.statefulsets = indexer()
        self.nads = indexer()
        self.vms = indexer()
        self.queues = PodQueues(
            add=_queue("AddPod", self.clock, self.queue_metrics),
            update=_queue("UpdatePod", self.clock, self.queue_metrics),
            delete=_queue("DeletePod", self.clock, self.queue_metrics),
            security=_queue("UpdatePodSecurity", self.clock, self.queue_metrics),
        )
        self.pods.add_indexers({NODE_INDEX: node_index, IP_INDEX: ip_index})
        self.nodes.add_indexers({NODE_IP_INDEX: node_ip_index})
        self.view = CacheView(
            pods=self.pods,
            namespaces=self.namespaces,
            subnets=self.subnets,
            nodes=self.nodes,
            ips=self.ips,
            vlans=self.vlans,
            vpcs=self.vpcs,
            configmaps=self.configmaps,
            statefulsets=self.statefulsets if self.with_owner_indexers else None,
            nads=self.nads if self.with_owner_indexers else None,
            vms=self.vms if self.with_owner_indexers else None,
            kube=self.kube,
        )
        self.routing_queue = _queue("UpdateRouting", self.clock, self.queue_metrics)
        self.routing = RoutingReconciler(
            config=self.config,
            view=self.view,
            kube=self.kube,
            nb=self.nb,
            queue=self.routing_queue,
            is_leader=lambda: self.leader,
            wall_clock=lambda: self.now,
        )
        self.routing_events = self.routing.pod_event_handler()
        self.controller = PodController(
            config=self.config,
            view=self.view,
            routing=self.routing,
            kube=self.kube,
            nb=self.nb,
            ipam=self.ipam,
            recorder=self.recorder,
            key_mutex=KeyMutex(8),
            queues=self.queues,
            is_leader=lambda: self.leader,
            metrics=self.metrics,
            clock=self.clock,
            wall_clock=lambda: self.now,
        )
        self.pod_events = self.controller.event_handler()
        self.nb.ensure_logical_router(ROUTER)
        self.vpcs.add({"metadata": {"name": ROUTER}, "status": {"router": ROUTER}})

    def close(self) -> None:
        for queue in self.queues.all():
            queue.shut_down()
        self.routing_queue.shut_down()

    # --- cluster objects ----------------------------------------------------------------------
    def add_subnet(self, raw: dict[str, Any]) -> None:
        self.subnets.add(raw)
        spec = raw["spec"]
        self.ipam.add_or_update_subnet(
            raw["metadata"]["name"], spec["cidrBlock"], spec.get("excludeIps") or []
        )
        if not spec.get("vlan"):
            self.nb.ensure_logical_switch(
                raw["metadata"]["name"], ROUTER, spec["cidrBlock"], spec["gateway"], {}
            )
        else:
            self.nb.ensure_logical_switch(
                raw["metadata"]["name"], "", spec["cidrBlock"], spec["gateway"], {}
            )

    def add_namespace(self, name: str, logical_switch: str | None = DEFAULT_SUBNET) -> None:
        meta: dict[str, Any] = {"name": name}
        if logical_switch is not None:
            meta["annotations"] = {"ovn.kubernetes.io/logical_switch": logical_switch}
        obj = self.kube.add_namespace({"metadata": meta})
        self.namespaces.add(obj)

    def add_node(self, name: str, internal_ip: str, join_ip: str) -> None:
        obj = self.kube.add_node(
            {
                "metadata": {
                    "name": name,
                    "annotations": {"ovn.kubernetes.io/ip_address": join_ip},
                },
                "status": {"addresses": [{"type": "InternalIP", "address": internal_ip}]},
            }
        )
        self.nodes.add(obj)
        self.routing.node_event_handler().on_add(obj, False)  # the informer's add

    # --- pods, the informer's way ----------------------------------------------------------------
    def create_pod(self, raw: dict[str, Any]) -> dict[str, Any]:
        stored = self.kube.add_pod(raw)
        self.pods.add(copy.deepcopy(stored))
        self.pod_events.on_add(copy.deepcopy(stored), False)
        self.routing_events.on_add(copy.deepcopy(stored), False)
        return stored

    def sync(self, key: str) -> bool:
        """Copy the API server's pod into the cache and fire the event; True if it changed."""
        fresh = self.kube.pods.get(key)
        cached = self.pods.get_by_key(key)
        if fresh is None:
            if cached is not None:
                self.pods.delete(cached)
                self.pod_events.on_delete(cached)
                self.routing_events.on_delete(cached)
                return True
            return False
        if cached is not None and (
            cached["metadata"].get("resourceVersion") == fresh["metadata"]["resourceVersion"]
        ):
            return False
        new = copy.deepcopy(fresh)
        if cached is None:
            self.pods.add(new)
            self.pod_events.on_add(copy.deepcopy(new), False)
            self.routing_events.on_add(copy.deepcopy(new), False)
        else:
            self.pods.update(new)
            self.pod_events.on_update(cached, copy.deepcopy(new))
            self.routing_events.on_update(cached, copy.deepcopy(new))
        return True

    def sync_all(self) -> bool:
        keys = set(self.kube.pods) | set(self.pods.list_keys())
        changed = False
        for key in sorted(keys):
            changed |= self.sync(key)
        return changed

    def edit_pod(self, key: str, mutate: Callable[[dict[str, Any]], None]) -> None:
        """Change the pod on the API server (bumping its resourceVersion), then sync."""
        obj = self.kube.pods[key]
        mutate(obj)
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 10**6)
        self.sync(key)

    def remove_pod(self, key: str) -> None:
        self.kube.pods.pop(key, None)
        self.sync(key)

    # --- queues -------------------------------------------------------------------------------
    def handlers(self) -> list[tuple[RateLimitingQueue[str], Callable[[str], None], str]]:
        c = self.controller
        return [
            (self.queues.add, c.handle_add_pod, "AddPod"),
            (self.queues.update, c.handle_update_pod, "UpdatePod"),
            (self.queues.delete, c.handle_delete_pod, "DeletePod"),
            (self.queues.security, c.handle_update_pod_security, "UpdatePodSecurity"),
            (self.routing_queue, self.routing.handle, "UpdateRouting"),
        ]

    def process(self, queue: RateLimitingQueue[str]) -> int:
        """Run the worker on every ready item of one queue (inline); returns how many."""
        for q, handler, name in self.handlers():
            if q is queue:
                count = 0
                while len(q):
                    process_next_work_item(q, handler, name=name, metrics=self.metrics)
                    count += 1
                return count
        raise ValueError("not one of the queues")

    def enqueue_routing(self) -> None:
        """Every routing key, as a node or subnet event (or the periodic pass) would."""
        for subnet in self.view.subnets():
            self.routing.enqueue(subnet.name)
            for node in self.view.nodes():
                self.routing.enqueue(f"{subnet.name}/{node.name}")
        for node in self.view.nodes():
            self.routing.enqueue(f"/{node.name}")

    def converge(self, rounds: int = 20) -> None:
        """Process the ready items and feed the API server's changes back until quiet."""
        for _ in range(rounds):
            worked = sum(self.process(q) for q, _, _ in self.handlers())
            changed = self.sync_all()
            if not worked and not changed:
                return
        raise AssertionError("the controller did not converge")

    def drain(self, queue: RateLimitingQueue[str]) -> list[str]:
        """Take the ready items out of a queue without handling them."""
        items = []
        while len(queue):
            item, _ = queue.get()
            assert item is not None
            queue.done(item)
            items.append(item)
        return items

    # --- state --------------------------------------------------------------------------------
    def annotations(self, key: str) -> dict[str, str]:
        return dict(self.kube.pods[key]["metadata"].get("annotations") or {})

    def pod_ports(self) -> list[str]:
        """Names of the LSPs that belong to pods (router ports excluded)."""
        return [p.name for p in self.nb.list_ports() if "pod" in p.external_ids]

    def reasons(self) -> list[str]:
        return self.recorder.reasons()

    def event_messages(self, reason: str) -> list[str]:
        return [e.message for e in self.recorder.events if e.reason == reason]

    def routes(self) -> list[tuple[str, str, str]]:
        """How each pod address leaves the cluster: ("src-ip", address, next hop), from the
        router policies and address sets the controller writes (and any src-ip static route
        left, which would show up twice)."""
        out = [(r.policy, r.ip_prefix, r.nexthop) for r in self.nb.list_static_routes(ROUTER)]
        policies = self.nb.list_router_policies(ROUTER)
        by_match = {p.match: p for p in policies if p.action == "reroute"}
        for aset in self.nb.list_address_sets({"kube-ovn-route": "gateway"}):
            for version in (4, 6):
                policy = by_match.get(f"ip{version}.src == ${aset.name}")
                if policy is not None:
                    out += [("src-ip", ip, policy.nexthops[0]) for ip in aset.addresses]
        for p in policies:
            if p.priority == 29250 and p.action == "reroute":
                out.append(("src-ip", p.match.split("== ", 1)[1], p.nexthops[0]))
        return out

    def nats(self) -> list[tuple[str, str, str, str]]:
        return [
            (n.type, n.logical_ip, n.external_ip, n.logical_port)
            for n in self.nb.list_nat_rules(ROUTER)
        ]

    def advance(self, seconds: float) -> None:
        assert isinstance(self.clock, FakeClock)
        self.clock.step(seconds)
        self.now += timedelta(seconds=seconds)


def standard_env(**kw: Any) -> Env:
    """One node, the default subnet 10.16.0.0/16 (distributed gateway), namespace default."""
    env = Env(**kw)
    env.add_subnet(raw_subnet(DEFAULT_SUBNET, "10.16.0.0/16", gateway="10.16.0.1"))
    env.add_namespace("default")
    env.add_node(NODE, NODE_INTERNAL_IP, NODE_JOIN_IP)
    return env


def iter_ips(annotations: dict[str, str]) -> Iterator[str]:
    yield from (ip for ip in annotations.get("ovn.kubernetes.io/ip_address", "").split(",") if ip)
