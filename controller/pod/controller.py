"""The pod controller: its parts composed, wired to the four queues (kube-ovn pod.go).

`PodController` ports kube-ovn v1.8.18 `pkg/controller/pod.go`. It builds one `PodContext`
(the ports: config, cache view, Kubernetes and NB clients, IPAM, recorder, key lock, queues,
routing reconciler, clocks, metrics) and the parts, each given the context and the other parts
it uses:

* `PodEvents` (events.py): the informer callbacks, which classify and enqueue keys;
* `AddHandler` (add.py) over `NetAllocator` and `AddRollback` (allocate.py: execute the pure
  `pod_logic.plan_net_allocation` of each network, or undo it);
* `UpdateHandler` (update.py), which routes through the context's routing hook;
* `DeleteHandler` (delete.py); `SecurityHandler` (security.py);
* `Inspection` (inspection.py) and its `StaticRouteMigration` (migration.py);
* shared by several: `PodNets` (nets.py, the pod's networks) and `PendingDeletes`
  (pending.py, the deleting map and the unfinished adds).

Every handler locks the pod key with the shared `KeyMutex`, so the handlers of one pod never
run concurrently. Failures the user can fix become Warning Events with kube-ovn's reasons. The
deliberate deviations from v1.8 (several follow kube-ovn v1.12 `pkg/controller/pod.go`) are
listed in docs/deviations.md (the pod controller's handlers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.cache import Indexer
from controller.config import Config
from controller.ipam import IPAM
from controller.kube.api import EventRecorder, KubeApi, KubeObject
from controller.ovn.api import NbClient
from controller.pod.add import AddHandler
from controller.pod.allocate import AddRollback, NetAllocator
from controller.pod.context import PodContext, PodQueues
from controller.pod.delete import DeleteHandler
from controller.pod.events import PodEvents
from controller.pod.inspection import Inspection
from controller.pod.migration import StaticRouteMigration
from controller.pod.nets import PodNets
from controller.pod.pending import PendingDeletes
from controller.pod.security import SecurityHandler
from controller.pod.update import UpdateHandler
from controller.queues import Clock, RealClock
from controller.queues.clock import WallClock, utcnow
from controller.routing import RoutingReconciler
from controller.runtime.keymutex import KeyMutex
from controller.runtime.leader_gated import LeaderGated
from controller.runtime.metrics import ControllerMetrics
from controller.runtime.worker import start_workers
from controller.view import CacheView

__all__ = ["PodController", "PodQueues"]


class PodController:
    """kube-ovn's pod controller for the default network and multus attachments.

    Guarantees:

    * handlers of one pod key never overlap (KeyMutex), and a handler is idempotent: running it
      again after a failure converges to the same state (IPAM allocation is stable per key, NB
      verbs and IP CR writes are idempotent, annotation patches only touch our keys);
    * an address is released from IPAM only by the delete handler, after the port is gone;
    * a delete of an older incarnation never touches a re-created pod of the same name.
    """

    def __init__(
        self,
        *,
        config: Config,
        kube: KubeApi,
        nb: NbClient,
        ipam: IPAM,
        recorder: EventRecorder,
        key_mutex: KeyMutex,
        queues: PodQueues,
        is_leader: Callable[[], bool],
        metrics: ControllerMetrics | None = None,
        clock: Clock | None = None,
        wall_clock: WallClock = utcnow,
        view: CacheView | None = None,
        routing: RoutingReconciler | None = None,
        **caches: Indexer | None,
    ) -> None:
        """The caches are read through `view` (shared with other controllers, so each object
        is parsed once) or, without one, through a view over `caches`: the informer indexers
        by kind, as `CacheView` takes them (pods=, namespaces=, subnets=, nodes=, ips=, vlans=,
        vpcs=, configmaps=; statefulsets=, nads=, vms= are optional: without them owners and
        attachments are GET through `kube`). Without `routing`, a reconciler of its own."""
        view = CacheView.given_or_over(view, kube, caches)
        if routing is None:
            routing = RoutingReconciler.unshared(
                config=config,
                view=view,
                kube=kube,
                nb=nb,
                is_leader=is_leader,
                wall_clock=wall_clock,
            )
        ctx = PodContext(
            config=config,
            view=view,
            kube=kube,
            nb=nb,
            ipam=ipam,
            recorder=recorder,
            key_mutex=key_mutex,
            queues=queues,
            routing=routing,
            is_leader=is_leader,
            clock=clock if clock is not None else RealClock(),
            wall_clock=wall_clock,
            metrics=metrics,
        )
        self.queues = queues
        self._ctx = ctx
        nets = PodNets(ctx)
        self._pending = pending = PendingDeletes(queues.delete, ctx.clock)
        rollback = AddRollback(ctx)
        self._events = PodEvents(ctx, nets=nets, pending=pending)
        self._add = AddHandler(
            ctx,
            nets=nets,
            allocator=NetAllocator(ctx, rollback),
            rollback=rollback,
            pending=pending,
        )
        self._update = UpdateHandler(ctx, nets=nets, pending=pending)
        self._delete = DeleteHandler(ctx, pending=pending)
        self._security = SecurityHandler(ctx, nets=nets)
        self._migration = StaticRouteMigration(ctx)
        self._inspection = Inspection(ctx, nets=nets, migration=self._migration)

    # --- informer callbacks (kube-ovn enqueueAddPod / enqueueUpdatePod / enqueueDeletePod) ------

    def event_handler(self) -> LeaderGated:
        """The pods informer's handler, run only while leading (`PodEvents`)."""
        return self._events.event_handler()

    def nad_event_handler(self) -> LeaderGated:
        """Re-queue the pods that wait for a NetworkAttachmentDefinition (`PodEvents`)."""
        return self._events.nad_event_handler()

    def subnet_ready(self, name: str) -> None:
        """Re-queue the pods that wait for subnet `name`, now registered (`PodEvents`)."""
        self._events.subnet_ready(name)

    # --- the queues' handlers, and the periodic passes --------------------------------------------

    def handle_add_pod(self, key: str) -> None:
        self._add.handle(key)

    def handle_update_pod(self, key: str) -> None:
        self._update.handle(key)

    def handle_delete_pod(self, key: str) -> None:
        self._delete.handle(key)

    def handle_update_pod_security(self, key: str) -> None:
        self._security.handle(key)

    def inspect_pods(self) -> None:
        """kube-ovn inspectPod (`Inspection`), run every --inspect-interval."""
        self._inspection.run()

    def migrate_static_routes(self) -> int:
        """Hand the pods that still have a v1.8 src-ip route to the routing reconciler."""
        return self._migration.run()

    def pending_deletes(self) -> dict[str, KubeObject]:
        """The deleting-pod map (a copy), for tests and debugging."""
        return self._pending.snapshot()

    # --- workers ---------------------------------------------------------------------------------

    def run_workers(self, worker_num: int, stop: threading.Event) -> list[threading.Thread]:
        """Start `worker_num` workers per queue (kube-ovn: 3 each) and a thread that shuts the
        queues down once `stop` is set (which is what ends the workers). Returns all threads."""
        if worker_num < 1:
            raise ValueError(f"worker_num must be >= 1, not {worker_num}")
        q = self.queues
        threads = start_workers(
            [
                (q.add, self.handle_add_pod, worker_num),
                (q.update, self.handle_update_pod, worker_num),
                (q.delete, self.handle_delete_pod, worker_num),
                (q.security, self.handle_update_pod_security, worker_num),
            ],
            stop,
            metrics=self._ctx.metrics,
            clock=self._ctx.clock,
        )

        def shut_down_on_stop() -> None:
            stop.wait()
            for queue in self.queues.all():
                queue.shut_down()

        stopper = threading.Thread(target=shut_down_on_stop, name="pod-queues-stopper", daemon=True)
        stopper.start()
        return [*threads, stopper]
