"""Composition root: the only module that builds concrete adapters and wires the controller.

`main(argv)` is `python -m cmd.controller` / `kube-ovn-controller`: parse the flags (a bad one
prints "error: ..." and exits 2), set up logging, then run a `Controller` until SIGTERM/SIGINT
(exit 0, the lease handed back) or until the leadership is lost or start-up fails (exit 1).
`kube-ovn-controller check` audits the cluster once instead (`controller.audit.check.run_check`).

`Controller(config)` owns every component, so tests and the sandbox run the real thing
in-process: `start()` returns at once, `stop()` shuts everything down, `wait()` gives the exit
code; `run_controller(argv, environ)` parses and starts one.

What `start()` builds: the `kubernetes` ApiClient (kubeconfig or in-cluster) behind `KubeClient`
(also the `ClusterApi`); the OVN NB client (`OvsdbappNbClient`); one Prometheus registry with
the `workqueue_*` family (`PrometheusMetricsProvider`), `ControllerMetrics` and a `MetricsServer`
(`/metrics`, `/healthz`, `/readyz`) on `--metrics-port`; IPAM, the key mutex, the Event
recorder; then, through `controller.wiring`, the informers (all cached, nothing is fetched per
pod), the four pod queues named as kube-ovn's, the pod controller and the minimal subnet /
namespace / node controllers (each switchable off by its flag).

Start-up order, as kube-ovn's `Controller.Run` (v1.8.18 pkg/controller/controller.go). Before
it, every replica fetches the NB schema (an unreachable NB is waited out then) and receives the
NB's initial dump on its own thread, alongside the steps below until the bootstrap needs it; a
dump that does not come within `--ovn-timeout` ends the process (exit 1).

1. leader election on Lease `--leader-elect-resource-name` together with kube-ovn v1.8's
   ConfigMap `ovn-config` (`controller.runtime.locks.BothLocks`) in KUBE_NAMESPACE, identity
   POD_NAME;
   a follower starts nothing else (no informer runs, so it enqueues nothing; every informer
   callback also checks `is_leader`). Losing the lease ends the process with exit code 1.
2. informers started; caches synced (failure: exit 1).
3. bootstrap: default Vpc, cluster router, join and default subnets
   (`controller.controllers.bootstrap`).
4. IPAM rebuilt (`init_ipam`), then the start-up gc (`GarbageCollector.run_startup_gc`: what
   pods deleted while no controller ran left behind); each pod version is parsed once for the
   informer adds, the rebuild and the gc (`CacheView.all_pod_models_kept`). Steps 2-4 run in
   `load_scope()` when one is given: `main()` passes `controller.runtime.pygc.loading` (no
   garbage collections during the load, the loaded heap frozen after it).
5. workers: subnet and namespace first; wait (bounded) until the namespace queue drained and the
   join / default switches exist; node workers; wait (bounded) until every node is allocated;
   then the pod workers and the periodic loops (pod inspection every `--inspect-interval`,
   garbage collection every `--gc-interval`, subnet status every 30 s).

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

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import FrameType
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry

from controller.apiclient.errors import KubeApiError, KubeConfigError
from controller.audit.check import run_check
from controller.cache import Indexer, SharedIndexInformer, SharedInformerFactory
from controller.config import COMMAND_CHECK, Config, parse_args
from controller.config import build_parser as build_config_parser
from controller.controllers.bootstrap import init_default_vpc, init_ipam, init_ovn
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
from controller.core.errors import ConfigError
from controller.core.model import Pod
from controller.ipam import IPAM
from controller.kube.client import KubeClient, load_api_client
from controller.kube.cluster import ClusterApi
from controller.kube.events import BackgroundEventRecorder
from controller.ovn.api import OvnError
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod.controller import PodController, PodQueues
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.routing import RoutingReconciler
from controller.runtime import pygc
from controller.runtime.health import OutageTracker, stuck_worker
from controller.runtime.keymutex import KeyMutex
from controller.runtime.leaderelection import LeaderCallbacks, LeaderElector
from controller.runtime.log import LogOutputs, set_verbosity, setup_logging
from controller.runtime.metrics import ControllerMetrics, MetricsServer
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.runtime.startup import StartupError, wait_until_reachable
from controller.view import CacheView, ParseCache
from controller.wiring import add_informers, leader_elector, nb_ssl_kwargs, wire_controllers

LOG = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

NB_DB = "ovn-nb"  # kube-ovn's `db` label value of ovs_client_request_latency_milliseconds
CACHE_SYNC_TIMEOUT = 60.0
STARTUP_WAIT = 30.0  # bound of each "wait until ..." step before the pod workers start
SUBNET_STATUS_RESYNC = 30.0  # kube-ovn resyncSubnetMetrics
# every routing key re-diffed (the events keep it converged; this is the proof)
ROUTING_RESYNC = 60.0
JOIN_TIMEOUT = 10.0


def build_parser() -> argparse.ArgumentParser:
    """The command line parser (`--help`); see `controller.config`."""
    return build_config_parser()


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

    def indexer(self, name: str) -> Indexer:
        return self.informers[name].get_indexer()

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
            self.metrics.observe_ovn_request(NB_DB, method, "0" if ok else "1", seconds)

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
        wired = wire_controllers(
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

    def _sync_nb(self, nb: OvsdbappNbClient) -> None:
        try:
            nb.start()
        except Exception as exc:  # whatever it is, the controller cannot go on without the NB
            if not self._stop.is_set():
                LOG.error("start-up failed: the OVN NB's initial dump: %s", exc)
                self.stop(EXIT_FAILURE)

    def _wait_nb_synced(self) -> bool:
        """Until the NB's initial dump is in; False when stopping instead."""
        assert self.nb is not None
        while not self.nb.wait_synced(0.05):
            if self._stop.is_set():
                return False
        return not self._stop.is_set()

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
        try:
            self._run_startup(lost)
        except Exception:
            if not self._stop.is_set():
                LOG.exception("start-up failed")
                self.stop(EXIT_FAILURE)

    def _run_startup(self, lost: threading.Event) -> None:
        # Every pod is read by its informer add, the IPAM rebuild and the start-up gc: each
        # version is parsed once for all three, and the models are not kept past the start-up.
        scope = self._load_scope() if self._load_scope is not None else nullcontext()
        with scope, self.view.all_pod_models_kept() as pod_models:
            if not self._load(lost, pod_models):
                return
        if self._stop.is_set():
            return
        self._start_workers(self._stop)

    def _load(self, lost: threading.Event, pod_models: ParseCache[Pod]) -> bool:
        """Caches synced, bootstrap, IPAM rebuilt, start-up gc run; False if not to go on."""
        cfg = self.config
        stop = self._stop
        for factory in self._factories:
            factory.start(stop)
        synced = [f.wait_for_cache_sync(stop, self._cache_sync_timeout) for f in self._factories]
        failed = [rid for result in synced for rid, ok in result.items() if not ok]
        if failed:
            if not stop.is_set():
                LOG.error("caches did not sync within %ss: %s", self._cache_sync_timeout, failed)
                self.stop(EXIT_FAILURE)
            return False
        if lost.is_set() or stop.is_set():
            return False
        init_default_vpc(cfg, self.cluster)
        if not self._wait_nb_synced():
            return False
        assert self.nb is not None
        bootstrapped = init_ovn(cfg, self.kube, self.view, self.nb)
        init_ipam(
            config=cfg,
            ipam=self.ipam,
            kube=self.kube,
            view=self.view,
            bootstrapped=bootstrapped,
            parse_pod=pod_models.get,
        )
        self.gc.run_startup_gc(pod_models)
        return True

    def _start_workers(self, stop: threading.Event) -> None:
        cfg = self.config
        threads = self._threads
        if self.subnet_controller is not None:
            threads += self.subnet_controller.run_workers(cfg.worker_num, stop)
        if self.namespace_controller is not None:
            threads += self.namespace_controller.run_workers(stop)
            queue = self.namespace_controller.queue
            switches = {cfg.default_logical_switch, cfg.node_switch}
            assert self.nb is not None
            nb = self.nb
            self._wait(
                "namespaces annotated and the default/join switches created",
                lambda: len(queue) == 0 and switches <= set(nb.list_logical_switches()),
            )
        if self.node_controller is not None:
            threads += self.node_controller.run_workers(cfg.worker_num, stop)
            self._wait("every node allocated", self.node_controller.all_allocated)
        if stop.is_set():
            return
        if self.sg_controller is not None:
            threads += self.sg_controller.run_workers(cfg.worker_num, stop)
        threads += self.routing.run_workers(cfg.worker_num, stop)
        assert self.pod_controller is not None
        threads += self.pod_controller.run_workers(cfg.worker_num, stop)
        self._spawn("inspect-pods", self._every, cfg.inspect_interval, self._inspect)
        self._spawn("gc", self.gc.run, stop)
        self._spawn("routing-resync", self._every, ROUTING_RESYNC, self.routing.resync)
        if self.subnet_controller is not None:
            self._spawn(
                "subnet-status-resync",
                self._every,
                SUBNET_STATUS_RESYNC,
                self.subnet_controller.resync_status,
            )
        self.workers_started.set()
        LOG.info("controller started: %d workers per pod queue", cfg.worker_num)
        # routed pods still carrying a v1.8 src-ip route are moved to router policies at once
        # (after readiness: the scan reads every pod, the inspection repeats it later)
        self.pod_controller.migrate_static_routes()

    def _wait(self, what: str, cond: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self._startup_wait
        # short polls first: these conditions usually hold within milliseconds of the start
        poll = 0.005
        while not cond():
            if self._stop.wait(poll):
                return
            poll = min(poll * 2, 0.1)
            if time.monotonic() > deadline:
                LOG.warning("still waiting for %s after %ss; going on", what, self._startup_wait)
                return

    def _inspect(self) -> None:
        if self.pod_controller is not None and self.is_leader():
            self.pod_controller.inspect_pods()

    def _every(self, interval: float, fn: Callable[[], None]) -> None:
        while not self._stop.wait(interval):
            try:
                fn()
            except Exception:
                LOG.exception("periodic %s failed", getattr(fn, "__name__", fn))


def run_controller(
    argv: Sequence[str], environ: Mapping[str, str] | None = None, **kwargs: Any
) -> Controller:
    """Parse `argv` (ConfigError on bad flags) and start a `Controller` in this process."""
    config = parse_args(list(argv), os.environ if environ is None else environ)
    return Controller(config, **kwargs).start()


def _log_level_given(args: Sequence[str]) -> bool:
    """Did the command line choose a log level (`--log-level`, `-v` / `--v`)?"""
    return any(arg.split("=", 1)[0] in ("--log-level", "--v") for arg in args)


def main(argv: Sequence[str] | None = None) -> int:
    pygc.tune()
    args = list(sys.argv[1:] if argv is None else argv)
    # The leader-election identity is POD_NAME, else the host name (a pod's is its name).
    environ = {"HOSTNAME": socket.gethostname(), **os.environ}
    try:
        config = parse_args(args, environ)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    level = config.log_level
    if config.command == COMMAND_CHECK and not _log_level_given(args):
        # check's output is its report: the connection chatter waits for -v / --log-level
        level = "warning"
    try:
        setup_logging(
            level,
            config.log_format,
            outputs=LogOutputs(
                logtostderr=config.logtostderr,
                alsologtostderr=config.alsologtostderr,
                log_file=config.log_file,
                log_dir=config.log_dir,
                log_file_max_size=config.log_file_max_size,
                stderrthreshold=config.stderrthreshold,
            ),
            skip_headers=config.skip_headers,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if config.command == COMMAND_CHECK:
        return run_check(config, strict=config.strict)
    LOG.info("kube-ovn-controller starting on %s", socket.gethostname())
    controller = Controller(config, load_scope=pygc.loading)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        LOG.info("received %s, shutting down", signal.Signals(signum).name)
        threading.Thread(target=controller.stop, name="stop-signal", daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            controller.start()
        except (StartupError, KubeConfigError, KubeApiError, OvnError, OSError, ValueError) as exc:
            # One line where the operator looks: the log too only when it is not on stderr.
            print(f"error: {exc}", file=sys.stderr)
            if not config.logtostderr:
                LOG.error("start-up failed: %s", exc)
            return EXIT_FAILURE
        while True:
            code = controller.wait(1.0)
            if code is not None:
                return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
