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
(`/metrics`, `/healthz`, `/readyz`) on `--metrics-port`; informers (all cached, nothing is fetched
per pod) for pods, namespaces, nodes, subnets, IPs, vlans, vpcs, statefulsets, the ConfigMaps of
KUBE_NAMESPACE (the external gateway ConfigMap), and network-attachment-definitions / kubevirt
virtual machines only when their API group is served; the four pod queues named as kube-ovn's;
IPAM, the key mutex, the Event recorder; the pod controller and the minimal subnet / namespace /
node controllers (each switchable off by its flag).

Start-up order, as kube-ovn's `Controller.Run` (v1.8.18 pkg/controller/controller.go):

1. leader election on Lease `--leader-elect-resource-name` together with kube-ovn v1.8's
   ConfigMap `ovn-config` (`controller.runtime.locks.BothLocks`) in KUBE_NAMESPACE, identity
   POD_NAME;
   a follower starts nothing else (no informer runs, so it enqueues nothing; every informer
   callback also checks `is_leader`). Losing the lease ends the process with exit code 1.
2. informers started; caches synced (failure: exit 1).
3. bootstrap: default Vpc, cluster router, join and default subnets
   (`controller.controllers.bootstrap`).
4. IPAM rebuilt (`init_ipam`), then the start-up gc (`GarbageCollector.run_startup_gc`: what
   pods deleted while no controller ran left behind).
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
from types import FrameType
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry

from controller.audit.check import run_check
from controller.cache import Indexer, SharedIndexInformer, SharedInformerFactory
from controller.config import COMMAND_CHECK, Config, parse_args
from controller.config import build_parser as build_config_parser
from controller.controllers.bootstrap import init_default_vpc, init_ipam, init_ovn
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
from controller.controllers.subnet import DEFAULT_STATUS_DELAY, SubnetController, SubnetQueues
from controller.controllers.subnet_ipam import SubnetIpamTracker
from controller.core.constants import (
    EVENT_COMPONENT,
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
    QUEUE_UPDATE_SUBNET_STATUS,
    RESOURCE_IPS,
    RESOURCE_NADS,
    RESOURCE_SUBNETS,
    RESOURCE_VIRTUAL_MACHINES,
    RESOURCE_VLANS,
    RESOURCE_VPCS,
)
from controller.core.errors import ConfigError
from controller.ipam import IPAM
from controller.kube.client import KubeClient, load_api_client
from controller.kube.cluster import ClusterApi
from controller.kube.errors import KubeApiError, KubeConfigError
from controller.kube.events import BackgroundEventRecorder
from controller.ovn.api import OvnError
from controller.ovn.impl_idl import OvsdbappNbClient
from controller.pod.controller import PodController, PodQueues
from controller.queues import (
    RateLimitingQueue,
    default_controller_rate_limiter,
)
from controller.runtime.health import OutageTracker, stuck_worker
from controller.runtime.keymutex import KeyMutex
from controller.runtime.leaderelection import (
    LeaderCallbacks,
    LeaderElectionConfig,
    LeaderElector,
    LeaseLock,
)
from controller.runtime.locks import KUBE_OVN_V18_LOCK, BothLocks, ConfigMapLock
from controller.runtime.log import LogOutputs, set_verbosity, setup_logging
from controller.runtime.metrics import ControllerMetrics, MetricsServer
from controller.runtime.queue_metrics import PrometheusMetricsProvider
from controller.runtime.startup import StartupError, wait_until_reachable
from controller.view import CacheView

LOG = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

NB_DB = "ovn-nb"  # kube-ovn's `db` label value of ovs_client_request_latency_milliseconds
CACHE_SYNC_TIMEOUT = 60.0
STARTUP_WAIT = 30.0  # bound of each "wait until ..." step before the pod workers start
SUBNET_STATUS_RESYNC = 30.0  # kube-ovn resyncSubnetMetrics
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
    ) -> None:
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.config = config
        self._cache_sync_timeout = cache_sync_timeout
        self._startup_wait = startup_wait
        self._status_delay = status_delay
        self.registry = CollectorRegistry()
        # built in start(): they need the API client
        self.metrics: ControllerMetrics
        self.kube: KubeClient
        self.cluster: ClusterApi
        self.pod_queues: PodQueues
        self.gc: GarbageCollector
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
        self.nb = wait_until_reachable(
            f"the OVN NB at {cfg.ovn_nb_addr}",
            lambda: OvsdbappNbClient.from_addr(
                cfg.ovn_nb_addr,
                float(cfg.ovn_timeout),
                on_request=observe_nb,
                **_ssl_kwargs(cfg),
            ),
            timeout=float(cfg.ovn_timeout),
            stop=self._stop,
        )
        if self.nb is None:
            return
        nb = self.nb
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
        inf = self.informers
        inf["pods"] = factory.informer_for("", "v1", "pods")
        inf["namespaces"] = factory.informer_for("", "v1", "namespaces", namespaced=False)
        inf["nodes"] = factory.informer_for("", "v1", "nodes", namespaced=False)
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

        def idx(name: str) -> Indexer:
            return inf[name].get_indexer()

        def opt(name: str) -> Indexer | None:
            return inf[name].get_indexer() if name in inf else None

        self.pod_queues = PodQueues(
            add=self._queue(QUEUE_ADD_POD),
            update=self._queue(QUEUE_UPDATE_POD),
            delete=self._queue(QUEUE_DELETE_POD),
            security=self._queue(QUEUE_UPDATE_POD_SECURITY),
        )
        is_leader = self.is_leader
        # One read view for the pod controller and the gc: each cached object parsed once.
        self.view = CacheView(
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
        )
        self.pod_controller = PodController(
            config=cfg,
            kube=kube,
            nb=nb,
            ipam=self.ipam,
            recorder=self.recorder,
            key_mutex=self.key_mutex,
            queues=self.pod_queues,
            is_leader=is_leader,
            metrics=self.metrics,
            view=self.view,
        )
        inf["pods"].add_event_handler(self.pod_controller)
        if "nads" in inf:
            # A pod waiting for its attachment definition converges as soon as it appears.
            inf["nads"].add_event_handler(self.pod_controller.nad_event_handler())
        self.gc = GarbageCollector(
            config=cfg,
            kube=kube,
            nb=nb,
            ipam=self.ipam,
            metrics=self.metrics,
            key_mutex=self.key_mutex,
            ready=lambda: all(i.has_synced() for i in inf.values()),
            view=self.view,
            security_groups=idx(RESOURCE_SECURITY_GROUPS),
        )

        self.sg_controller = SecurityGroupController(
            sgs=idx(RESOURCE_SECURITY_GROUPS),
            kube=kube,
            nb=nb,
            recorder=self.recorder,
            queues=SecurityGroupQueues(
                update=self._queue(QUEUE_UPDATE_SG), delete=self._queue(QUEUE_DELETE_SG)
            ),
            is_leader=is_leader,
        )
        inf[RESOURCE_SECURITY_GROUPS].add_event_handler(self.sg_controller)
        if cfg.enable_subnet_controller:
            self.subnet_controller = SubnetController(
                config=cfg,
                subnets=idx(RESOURCE_SUBNETS),
                vpcs=idx(RESOURCE_VPCS),
                kube=kube,
                cluster=cluster,
                nb=nb,
                ipam=self.ipam,
                recorder=self.recorder,
                queues=SubnetQueues(
                    add=self._queue(QUEUE_ADD_SUBNET),
                    delete=self._queue(QUEUE_DELETE_SUBNET),
                    status=self._queue(QUEUE_UPDATE_SUBNET_STATUS),
                ),
                is_leader=is_leader,
                metrics=self.metrics,
                status_delay=self._status_delay,
                on_ready=self.pod_controller.subnet_ready,
                nodes=idx("nodes"),
            )
            inf[RESOURCE_SUBNETS].add_event_handler(self.subnet_controller)
            inf[RESOURCE_IPS].add_event_handler(self.subnet_controller.ip_event_handler())
        else:
            # Another controller owns the Subnets; IPAM must still follow them.
            inf[RESOURCE_SUBNETS].add_event_handler(
                SubnetIpamTracker(self.ipam, is_leader, self.pod_controller.subnet_ready)
            )
        if cfg.enable_namespace_controller:
            self.namespace_controller = NamespaceController(
                config=cfg,
                namespaces=idx("namespaces"),
                subnets=idx(RESOURCE_SUBNETS),
                kube=kube,
                queue=self._queue(QUEUE_ADD_NAMESPACE),
                is_leader=is_leader,
                vpcs=idx(RESOURCE_VPCS),
            )
            inf["namespaces"].add_event_handler(self.namespace_controller)
            inf[RESOURCE_VPCS].add_event_handler(self.namespace_controller.vpc_event_handler())
            inf[RESOURCE_SUBNETS].add_event_handler(
                self.namespace_controller.subnet_event_handler()
            )
        if cfg.enable_node_controller:
            self.node_controller = NodeController(
                config=cfg,
                nodes=idx("nodes"),
                subnets=idx(RESOURCE_SUBNETS),
                ips=idx(RESOURCE_IPS),
                kube=kube,
                nb=nb,
                ipam=self.ipam,
                queues=NodeQueues(
                    add=self._queue(QUEUE_ADD_NODE), delete=self._queue(QUEUE_DELETE_NODE)
                ),
                is_leader=is_leader,
            )
            inf["nodes"].add_event_handler(self.node_controller)

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
        # Both generations' locks: a kube-ovn-controller v1.8 (ConfigMap) or v1.12+ (Lease)
        # still running waits instead of allocating beside us, and we wait for it.
        lock = BothLocks(
            LeaseLock(
                self._api_client,
                cfg.leader_elect_resource_namespace,
                cfg.leader_elect_resource_name,
                cfg.pod_name,
            ),
            ConfigMapLock(
                self._api_client,
                cfg.leader_elect_resource_namespace,
                KUBE_OVN_V18_LOCK,
                cfg.pod_name,
            ),
        )

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

        self._elector = LeaderElector(
            LeaderElectionConfig(
                lock=lock,
                callbacks=LeaderCallbacks(started, stopped, new_leader),
                lease_duration=cfg.leader_elect_lease_duration,
                renew_deadline=cfg.leader_elect_renew_deadline,
                retry_period=cfg.leader_elect_retry_period,
                release_on_cancel=True,
                name=f"{cfg.leader_elect_resource_namespace}/{cfg.leader_elect_resource_name}",
            )
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
            return
        if lost.is_set() or stop.is_set():
            return
        assert self.nb is not None
        init_default_vpc(cfg, self.cluster)
        bootstrapped = init_ovn(cfg, self.kube, self.indexer(RESOURCE_SUBNETS), self.nb)
        init_ipam(
            config=cfg,
            ipam=self.ipam,
            kube=self.kube,
            subnets=[*bootstrapped, *self.indexer(RESOURCE_SUBNETS).list()],
            ips=self.indexer(RESOURCE_IPS),
            pods=self.indexer("pods"),
            nodes=self.indexer("nodes"),
        )
        self.gc.run_startup_gc()
        if stop.is_set():
            return
        self._start_workers(stop)

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
        assert self.pod_controller is not None
        threads += self.pod_controller.run_workers(cfg.worker_num, stop)
        self._spawn("inspect-pods", self._every, cfg.inspect_interval, self._inspect)
        self._spawn("gc", self.gc.run, stop)
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
        while not cond():
            if self._stop.wait(0.1):
                return
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


def _ssl_kwargs(cfg: Config) -> dict[str, Any]:
    if not any(r.startswith("ssl:") for r in cfg.ovn_nb_addr.split(",")):
        return {}
    return {
        "ssl_private_key": cfg.ovn_nb_ssl_key,
        "ssl_certificate": cfg.ovn_nb_ssl_cert,
        "ssl_ca_cert": cfg.ovn_nb_ssl_ca,
    }


def run_controller(
    argv: Sequence[str], environ: Mapping[str, str] | None = None, **kwargs: Any
) -> Controller:
    """Parse `argv` (ConfigError on bad flags) and start a `Controller` in this process."""
    config = parse_args(list(argv), os.environ if environ is None else environ)
    return Controller(config, **kwargs).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # The leader-election identity is POD_NAME, else the host name (a pod's is its name).
    environ = {"HOSTNAME": socket.gethostname(), **os.environ}
    try:
        config = parse_args(args, environ)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        setup_logging(
            config.log_level,
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
    controller = Controller(config)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        LOG.info("received %s, shutting down", signal.Signals(signum).name)
        threading.Thread(target=controller.stop, name="stop-signal", daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            controller.start()
        except (StartupError, KubeConfigError, KubeApiError, OvnError, OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            LOG.error("start-up failed: %s", exc)
            return EXIT_FAILURE
        while True:
            code = controller.wait(1.0)
            if code is not None:
                return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
