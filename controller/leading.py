"""What the leader does once elected: load the cluster, then start the workers and loops.

Start-up order, as kube-ovn's `Controller.Run` (v1.8.18 pkg/controller/controller.go), after
`controller.app.Controller` won the election (or runs without one):

1. informers started; caches synced (failure: exit 1).
2. bootstrap: default Vpc, cluster router, join and default subnets
   (`controller.controllers.bootstrap`), once the NB's initial dump is in.
3. IPAM rebuilt (`init_ipam`), then the start-up gc (`GarbageCollector.run_startup_gc`: what
   pods deleted while no controller ran left behind); each pod version is parsed once for the
   informer adds, the rebuild and the gc (`CacheView.all_pod_models_kept`). Steps 1-3 run in
   `load_scope()` when one is given (`controller.process.main` passes
   `controller.runtime.pygc.loading`: no garbage collections during the load, the loaded heap
   frozen after it).
4. workers: subnet and namespace first; wait (bounded) until the namespace queue drained and the
   join / default switches exist; node workers; wait (bounded) until every node is allocated;
   then the pod workers and the periodic loops (pod inspection every `--inspect-interval`,
   garbage collection every `--gc-interval`, subnet status every 30 s, every routing key
   re-diffed every 60 s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from controller.cache import SharedInformerFactory
from controller.config import Config
from controller.controllers.bootstrap import init_default_vpc, init_ipam, init_ovn
from controller.core.model import Pod
from controller.ipam import IPAM
from controller.kube.client import KubeClient
from controller.kube.cluster import ClusterApi
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.view import ParseCache
from controller.wiring import Components

LOG = logging.getLogger(__name__)

SUBNET_STATUS_RESYNC = 30.0  # kube-ovn resyncSubnetMetrics


@dataclass
class LeaderStartup:
    """The leader's start-up over the components `controller.app.Controller` built.

    `fail()` stops the process with exit code 1; `spawn(name, target, *args)` starts a thread
    the controller joins on stop, and `threads` receives the controllers' worker threads.
    """

    config: Config
    factories: list[SharedInformerFactory]
    components: Components
    cluster: ClusterApi
    kube: KubeClient
    nb: OvsdbappNbClient
    ipam: IPAM
    stop: threading.Event
    workers_started: threading.Event
    threads: list[threading.Thread]
    spawn: Callable[..., threading.Thread]
    fail: Callable[[], None]
    is_leader: Callable[[], bool]
    cache_sync_timeout: float
    startup_wait: float
    load_scope: Callable[[], AbstractContextManager[object]] | None = None

    def run(self, lost: threading.Event) -> None:
        # Every pod is read by its informer add, the IPAM rebuild and the start-up gc: each
        # version is parsed once for all three, and the models are not kept past the start-up.
        scope = self.load_scope() if self.load_scope is not None else nullcontext()
        with scope, self.components.view.all_pod_models_kept() as pod_models:
            if not self._load(lost, pod_models):
                return
        if self.stop.is_set():
            return
        self._start_workers(self.stop)

    def _wait_nb_synced(self) -> bool:
        """Until the NB's initial dump is in; False when stopping instead."""
        while not self.nb.wait_synced(0.05):
            if self.stop.is_set():
                return False
        return not self.stop.is_set()

    def _load(self, lost: threading.Event, pod_models: ParseCache[Pod]) -> bool:
        """Caches synced, bootstrap, IPAM rebuilt, start-up gc run; False if not to go on."""
        cfg = self.config
        stop = self.stop
        for factory in self.factories:
            factory.start(stop)
        synced = [f.wait_for_cache_sync(stop, self.cache_sync_timeout) for f in self.factories]
        failed = [rid for result in synced for rid, ok in result.items() if not ok]
        if failed:
            if not stop.is_set():
                LOG.error("caches did not sync within %ss: %s", self.cache_sync_timeout, failed)
                self.fail()
            return False
        if lost.is_set() or stop.is_set():
            return False
        init_default_vpc(cfg, self.cluster)
        if not self._wait_nb_synced():
            return False
        view = self.components.view
        bootstrapped = init_ovn(cfg, self.kube, view, self.nb)
        init_ipam(
            config=cfg,
            ipam=self.ipam,
            kube=self.kube,
            view=view,
            bootstrapped=bootstrapped,
            parse_pod=pod_models.get,
        )
        self.components.gc.run_startup_gc(pod_models)
        return True

    def _start_workers(self, stop: threading.Event) -> None:
        cfg = self.config
        threads = self.threads
        c = self.components
        if c.subnet_controller is not None:
            threads += c.subnet_controller.run_workers(cfg.worker_num, stop)
        if c.namespace_controller is not None:
            threads += c.namespace_controller.run_workers(stop)
            queue = c.namespace_controller.queue
            switches = {cfg.default_logical_switch, cfg.node_switch}
            nb = self.nb
            self._wait(
                "namespaces annotated and the default/join switches created",
                lambda: len(queue) == 0 and switches <= set(nb.list_logical_switches()),
            )
        if c.node_controller is not None:
            threads += c.node_controller.run_workers(cfg.worker_num, stop)
            self._wait("every node allocated", c.node_controller.all_allocated)
        if stop.is_set():
            return
        threads += c.sg_controller.run_workers(cfg.worker_num, stop)
        threads += c.routing.run_workers(cfg.worker_num, stop)
        threads += c.pod_controller.run_workers(cfg.worker_num, stop)
        self.spawn("inspect-pods", self._every, cfg.inspect_interval, self._inspect)
        self.spawn("gc", c.gc.run, stop)
        self.spawn("routing-resync", self._every, cfg.routing_resync_period, c.routing.resync)
        if c.subnet_controller is not None:
            self.spawn(
                "subnet-status-resync",
                self._every,
                SUBNET_STATUS_RESYNC,
                c.subnet_controller.resync_status,
            )
        self.workers_started.set()
        LOG.info("controller started: %d workers per pod queue", cfg.worker_num)
        # routed pods still carrying a v1.8 src-ip route are moved to router policies at once
        # (after readiness: the scan reads every pod, the inspection repeats it later)
        c.pod_controller.migrate_static_routes()

    def _wait(self, what: str, cond: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.startup_wait
        # short polls first: these conditions usually hold within milliseconds of the start
        poll = 0.005
        while not cond():
            if self.stop.wait(poll):
                return
            poll = min(poll * 2, 0.1)
            if time.monotonic() > deadline:
                LOG.warning("still waiting for %s after %ss; going on", what, self.startup_wait)
                return

    def _inspect(self) -> None:
        if self.is_leader():
            self.components.pod_controller.inspect_pods()

    def _every(self, interval: float, fn: Callable[[], Any]) -> None:
        while not self.stop.wait(interval):
            try:
                fn()
            except Exception:
                LOG.exception("periodic %s failed", getattr(fn, "__name__", fn))
