"""Composition root: the only module that builds concrete adapters and wires the controller.

`Controller(config)` owns every component, so tests and the sandbox run the real thing
in-process: `start()` returns at once, `stop()` shuts everything down, `wait()` gives the exit
code. `controller.process` runs one as the process (`main`: flags, logging, signals, exit
codes).

What `start()` builds: the `kubernetes` ApiClient (kubeconfig or in-cluster) behind `KubeClient`
(also the `ClusterApi`); the OVN NB client (`OvsdbappNbClient`); one Prometheus registry with
the `workqueue_*` family (`PrometheusMetricsProvider`), `ControllerMetrics` and a `MetricsServer`
(`/metrics`, `/healthz`, `/readyz`) on `--metrics-port`; IPAM, the key mutex, the Event
recorder; then, through `controller.wiring`, the informers (all cached, nothing is fetched per
pod), the four pod queues named as kube-ovn's, the pod controller and the minimal subnet /
namespace / node controllers (each switchable off by its flag).

Before the election, every replica fetches the NB schema (an unreachable NB is waited out then)
and receives the NB's initial dump on its own thread, alongside the start-up until the
bootstrap needs it; a dump that does not come within `--ovn-timeout` ends the process (exit 1).
Then leader election on Lease `--leader-elect-resource-name` together with kube-ovn v1.8's
ConfigMap `ovn-config` (`controller.runtime.locks.BothLocks`) in KUBE_NAMESPACE, identity
POD_NAME: a follower starts nothing else (no informer runs, so it enqueues nothing; every
informer callback also checks `is_leader`), and losing the lease ends the process with exit
code 1. The leader runs `controller.leading.LeaderStartup` (caches, bootstrap, IPAM, start-up
gc, then the workers in kube-ovn's order).

`/readyz` is 200 once the election loop runs and, when this replica leads, once the workers
started (caches synced, IPAM rebuilt) and while its caches stay synced; a standing-by follower is
ready. Any replica is not ready while its OVN NB connection is down. `/healthz` fails when a
leader has not renewed its lease for longer than the lease duration, when the NB has been
unreachable longer than `--nb-unreachable-timeout`, or when a worker has spent longer than
`--worker-stuck-timeout` on one item (`controller.runtime.health`), so the kubelet restarts a
wedged controller. Start-up waits for an unreachable API server and NB with backoff, up to
`--ovn-timeout` each (`controller.runtime.startup`), then exits 1 with one sentence.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry

from controller.cache import SharedIndexInformer, SharedInformerFactory
from controller.config import Config
from controller.controllers.gc import GarbageCollector
from controller.controllers.namespace import NamespaceController
from controller.controllers.node import NodeController
from controller.controllers.security_group import SecurityGroupController
from controller.controllers.subnet import DEFAULT_STATUS_DELAY, SubnetController
from controller.core.constants import (
    EVENT_COMPONENT,
    KUBEVIRT_GROUP,
    KUBEVIRT_VERSION,
    NAD_GROUP,
    NAD_VERSION,
)
from controller.ipam import IPAM
from controller.kube.client import KubeClient, load_api_client
from controller.kube.cluster import ClusterApi
from controller.kube.events import BackgroundEventRecorder
from controller.leading import LeaderStartup
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod.controller import PodController, PodQueues
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.routing import RoutingReconciler
from controller.runtime.health import OutageTracker, stuck_worker
from controller.runtime.keymutex import KeyMutex
from controller.runtime.leaderelection import LeaderCallbacks, LeaderElector
from controller.runtime.log import set_verbosity
from controller.runtime.metrics import ControllerMetrics, MetricsServer
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.runtime.startup import wait_until_reachable
from controller.view import CacheView
from controller.wiring import (
    Components,
    add_informers,
    leader_elector,
    nb_ssl_kwargs,
    wire_controllers,
)

LOG = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1

NB_METRIC_DB = "ovn-nb"  # kube-ovn's `db` label value of ovs_client_request_latency_milliseconds
CACHE_SYNC_TIMEOUT = 60.0
STARTUP_WAIT = 30.0  # bound of each "wait until ..." step before the pod workers start
JOIN_TIMEOUT = 10.0


class Controller:
    """The whole controller process, runnable in-process (see the module docstring)."""

    def __init__(
        self,
        config: Config,
        *,
        cache_sync_timeout: float = CACHE_SYNC_TIMEOUT,
        startup_wait: float = STARTUP_WAIT,
        status_delay: float = DEFAULT_STATUS_DELAY,
        load_scope: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        """`load_scope()` is entered once in the leading thread around the start-up's load
        (caches synced, bootstrap, IPAM rebuilt, start-up gc) and left before the workers
        start."""
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.config = config
        self._cache_sync_timeout = cache_sync_timeout
        self._startup_wait = startup_wait
        self._status_delay = status_delay
        self._load_scope = load_scope
        self.registry = CollectorRegistry()
        # built in start(): they need the API client
        self.metrics: ControllerMetrics
        self.kube: KubeClient
        self.cluster: ClusterApi
        self.pod_queues: PodQueues
        self.gc: GarbageCollector
        self.routing: RoutingReconciler
        self.view: CacheView
        self.components: Components
        self.queue_metrics = PrometheusMetricsProvider(self.registry)
        self.ipam = IPAM()
        # NOTE: kube-ovn sizes its striped mutex max(2*NumCPU, 2*WorkerNum); fewer stripes make
        # unrelated pods wait on each other's locks.
        self.key_mutex = KeyMutex(max(2 * (os.cpu_count() or 1), 2 * config.worker_num))
        self.exit_code: int | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._stop = threading.Event()  # workers, informers, periodic loops
        self._elector_stop = threading.Event()  # set after the workers stopped
        self._done = threading.Event()
        self.leading = threading.Event()
        self.workers_started = threading.Event()
        self._election_running = threading.Event()
        self._threads: list[threading.Thread] = []
        self._elector: LeaderElector | None = None
        self._elector_thread: threading.Thread | None = None
        self._api_client: Any = None
        self.nb: OvsdbappNbClient | None = None
        self._nb_sync: threading.Thread | None = None
        self.nb_outage: OutageTracker | None = None
        self.metrics_server: MetricsServer | None = None
        self.recorder: BackgroundEventRecorder | None = None
        self._factories: list[SharedInformerFactory] = []
        self.informers: dict[str, SharedIndexInformer] = {}
        self._queues: list[RateLimitingQueue[str]] = []
        self.pod_controller: PodController | None = None
        self.subnet_controller: SubnetController | None = None
        self.namespace_controller: NamespaceController | None = None
        self.node_controller: NodeController | None = None
        self.sg_controller: SecurityGroupController | None = None

    # --- public ----------------------------------------------------------------------------------
    def start(self) -> Controller:
        """Connect, build and start; returns at once. Raises on connection/config failures."""
        try:
            self._build()
            if self._stop.is_set():
                # stopped (a signal) while connecting: start nothing; the NB connection may
                # have come up after stop() looked for it
                if self.nb is not None:
                    self.nb.close()
                return self
            assert self.metrics_server is not None and self.recorder is not None
            self.metrics_server.start()
            self.recorder.start()
            if self.config.leader_elect:
                self._start_election()
            else:
                self._election_running.set()
                self._spawn("controller-leading", self._lead, self._stop)
        except BaseException:
            self.stop(EXIT_FAILURE)
            raise
        return self

    def is_leader(self) -> bool:
        if self._stop.is_set():
            return False
        if self._elector is None:
            return not self.config.leader_elect
        return self._elector.is_leader()

    @property
    def metrics_port(self) -> int:
        if self.metrics_server is None:
            raise RuntimeError("controller not started")
        return self.metrics_server.port

    def ready(self) -> tuple[bool, str]:
        if self._stop.is_set():
            return False, "stopping"
        if not self._election_running.is_set():
            return False, "leader election not started"
        if self.nb is not None and not self.nb.synced:
            return False, "OVN NB: initial sync"
        if self.nb_outage is not None and not self.nb_outage.sample():
            return False, f"OVN NB connection down for {self.nb_outage.down_for():.0f}s"
        if not self.leading.is_set():
            # Only a campaigning replica has a standby state; without election the gap before
            # the leading thread starts is plain start-up.
            if not self.config.leader_elect:
                return False, "starting"
            return True, "follower, standing by"
        if not self.workers_started.is_set():
            return False, "leading: waiting for caches, bootstrap and IPAM"
        unsynced = sorted(n for n, i in self.informers.items() if not i.has_synced())
        if unsynced:
            return False, f"leading: caches not synced: {', '.join(unsynced)}"
        return True, "ok"

    def healthy(self) -> tuple[bool, str]:
        if self._elector is not None:
            problem = self._elector.check(self.config.leader_elect_retry_period)
            if problem:
                return False, problem
        cfg = self.config
        if self.nb_outage is not None:
            down = self.nb_outage.down_for()
            if down > cfg.nb_unreachable_timeout:
                return False, (
                    f"OVN NB unreachable for {down:.0f}s "
                    f"(> --nb-unreachable-timeout {cfg.nb_unreachable_timeout:g}s)"
                )
        queue, seconds = stuck_worker(self.registry, [q.name for q in self._queues])
        if seconds > cfg.worker_stuck_timeout:
            return False, (
                f"a {queue} worker has spent {seconds:.0f}s on one item "
                f"(> --worker-stuck-timeout {cfg.worker_stuck_timeout:g}s)"
            )
        return True, "ok"

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code once the controller has stopped, None if still running at `timeout`."""
        self._done.wait(timeout)
        return self.exit_code if self._done.is_set() else None

    def stop(self, exit_code: int = EXIT_OK) -> None:
        """Stop everything (idempotent); the first exit code recorded wins."""
        with self._lock:
            if self.exit_code is None:
                self.exit_code = exit_code
            if self._stopping:
                return
            self._stopping = True
        LOG.info("shutting down (exit code %d)", self.exit_code)
        self._stop.set()
        for queue in self._queues:
            queue.shut_down()
        me = threading.current_thread()
        for thread in list(self._threads):
            if thread is not me:
                thread.join(JOIN_TIMEOUT)
        # The lease is handed back only after our workers stopped: never two acting leaders.
        self._elector_stop.set()
        if self._elector_thread is not None and self._elector_thread is not me:
            self._elector_thread.join(JOIN_TIMEOUT)
        for factory in self._factories:
            factory.shutdown(JOIN_TIMEOUT)
        if self.recorder is not None:
            self.recorder.stop()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.nb is not None:
            self.nb.close()
        if self._nb_sync is not None and self._nb_sync is not me:
            self._nb_sync.join(JOIN_TIMEOUT)  # a dump still coming in ends the connection
        if self._api_client is not None:
            self._api_client.close()
        self._done.set()
        LOG.info("stopped")

    # --- construction ----------------------------------------------------------------------------
    def _build(self) -> None:
        cfg = self.config
        api_client = load_api_client(cfg.kubeconfig, worker_threads=cfg.worker_num * 8 + 8)
        self._api_client = api_client
        self.metrics = ControllerMetrics(
            self.registry, api_host=str(getattr(api_client.configuration, "host", ""))
        )
        kube = KubeClient(api_client, on_request=self.metrics.observe_kube_request)
        cluster = kube  # the one client serves the ClusterApi calls too
        self.kube, self.cluster = kube, cluster

        def observe_nb(method: str, seconds: float, ok: bool) -> None:
            self.metrics.observe_ovn_request(NB_METRIC_DB, method, "0" if ok else "1", seconds)

        api_host = str(getattr(api_client.configuration, "host", ""))
        # The first API request: wait out an API server that is not up yet.
        served = wait_until_reachable(
            f"the Kubernetes API server at {api_host}",
            lambda: (
                cluster.api_group_exists(NAD_GROUP, NAD_VERSION),
                cluster.api_group_exists(KUBEVIRT_GROUP, KUBEVIRT_VERSION),
            ),
            timeout=float(cfg.ovn_timeout),
            stop=self._stop,
        )
        if served is None:
            return
        nad_served, kubevirt_served = served
        # The schema is fetched here (an unreachable NB is waited out here); the initial dump
        # comes in on its own thread while the election and the informers' lists run.
        self.nb = wait_until_reachable(
            f"the OVN NB at {cfg.ovn_nb_addr}",
            lambda: OvsdbappNbClient.from_addr(
                cfg.ovn_nb_addr,
                float(cfg.ovn_timeout),
                on_request=observe_nb,
                start=False,
                **nb_ssl_kwargs(cfg),
            ),
            timeout=float(cfg.ovn_timeout),
            stop=self._stop,
        )
        if self.nb is None:
            return
        nb = self.nb
        self._nb_sync = threading.Thread(
            target=self._sync_nb, args=(nb,), name="ovn-nb-sync", daemon=True
        )
        self._nb_sync.start()
        self.nb_outage = OutageTracker(lambda: nb.connected)
        if cfg.enable_external_vpc:
            LOG.info(
                "--enable-external-vpc: logical routers made outside kube-ovn are not synced "
                "into Vpc CRs by this controller (pods do not need it)"
            )
        self.recorder = BackgroundEventRecorder(
            kube,
            component=EVENT_COMPONENT,
            host=cfg.node_name,
            on_drop=self.metrics.event_dropped,
        )
        self.metrics_server = MetricsServer(
            self.registry,
            cfg.metrics_port,
            health_check=self.healthy,
            ready_check=self.ready,
            host=cfg.metrics_addr,
            debug_flags={"v": set_verbosity},
        )

        factory = SharedInformerFactory(api_client)
        cm_factory = SharedInformerFactory(api_client, namespace=cfg.pod_namespace)
        self._factories = [factory, cm_factory]
        add_informers(
            self.informers,
            factory,
            cm_factory,
            nad_served=nad_served,
            kubevirt_served=kubevirt_served,
        )
        self.components = wired = wire_controllers(
            cfg=cfg,
            inf=self.informers,
            kube=kube,
            cluster=cluster,
            nb=nb,
            ipam=self.ipam,
            recorder=self.recorder,
            key_mutex=self.key_mutex,
            metrics=self.metrics,
            is_leader=self.is_leader,
            queue=self._queue,
            status_delay=self._status_delay,
        )
        self.pod_queues = wired.pod_queues
        self.view = wired.view
        self.pod_controller = wired.pod_controller
        self.gc = wired.gc
        self.routing = wired.routing
        self.sg_controller = wired.sg_controller
        self.subnet_controller = wired.subnet_controller
        self.namespace_controller = wired.namespace_controller
        self.node_controller = wired.node_controller

    def work_queues(self) -> tuple[RateLimitingQueue[str], ...]:
        """Every work queue the controller runs (pods, subnets, security groups, nodes, ...),
        for probes and tests that wait for it to have acted on what it was told."""
        return tuple(self._queues)

    def _sync_nb(self, nb: OvsdbappNbClient) -> None:
        try:
            nb.start()
        except Exception as exc:  # whatever it is, the controller cannot go on without the NB
            if not self._stop.is_set():
                LOG.error("start-up failed: the OVN NB's initial dump: %s", exc)
                self.stop(EXIT_FAILURE)

    def _queue(self, name: str) -> RateLimitingQueue[str]:
        queue = RateLimitingQueue[str](
            default_controller_rate_limiter(), name=name, metrics_provider=self.queue_metrics
        )
        self._queues.append(queue)
        return queue

    def _spawn(self, name: str, target: Callable[..., None], *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    # --- leader election -------------------------------------------------------------------------
    def _start_election(self) -> None:
        cfg = self.config

        def started(lost: threading.Event) -> None:
            self._lead(lost)

        def stopped() -> None:
            if not self._stop.is_set():
                LOG.error("leader election lost, exiting")
                threading.Thread(
                    target=self.stop, args=(EXIT_FAILURE,), name="stop-lost-lease", daemon=True
                ).start()

        def new_leader(identity: str) -> None:
            if identity and identity != cfg.pod_name:
                LOG.info("new leader elected: %s", identity)

        self._elector = leader_elector(
            self._api_client, cfg, LeaderCallbacks(started, stopped, new_leader)
        )
        elector = self._elector

        def run() -> None:
            self._election_running.set()
            elector.run(self._elector_stop)

        self._elector_thread = threading.Thread(target=run, name="leader-election", daemon=True)
        self._elector_thread.start()

    # --- leading ---------------------------------------------------------------------------------
    def _lead(self, lost: threading.Event) -> None:
        """Everything after winning the election; any failure ends the process (exit 1)."""
        self.leading.set()
        LOG.info("leading: starting informers")
        assert self.nb is not None
        startup = LeaderStartup(
            config=self.config,
            factories=self._factories,
            components=self.components,
            cluster=self.cluster,
            kube=self.kube,
            nb=self.nb,
            ipam=self.ipam,
            stop=self._stop,
            workers_started=self.workers_started,
            threads=self._threads,
            spawn=self._spawn,
            fail=lambda: self.stop(EXIT_FAILURE),
            is_leader=self.is_leader,
            cache_sync_timeout=self._cache_sync_timeout,
            startup_wait=self._startup_wait,
            load_scope=self._load_scope,
        )
        try:
            startup.run(lost)
        except Exception:
            if not self._stop.is_set():
                LOG.exception("start-up failed")
                self.stop(EXIT_FAILURE)
