"""inspectPod: the periodic repair pass over every pod (kube-ovn pod.go inspectPod).

A pod whose logical switch port is lost gets its allocation annotations removed and is re-added;
an allocated pod not yet routed is queued for the update handler; then the static route
migration runs. Reads the NB ports once per pass, the subnets once, and each namespace once.
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.apiclient.errors import KubeApiError
from controller.apiclient.errors import NotFoundError as KubeNotFoundError
from controller.core import annotations as ann
from controller.core.errors import ControllerError
from controller.core.model import Namespace, Pod
from controller.pod.context import LOG, PodContext, pod_or_none
from controller.pod.migration import StaticRouteMigration
from controller.pod.nets import PodNets


class Inspection:
    """`run`, called by the app every --inspect-interval."""

    def __init__(self, ctx: PodContext, *, nets: PodNets, migration: StaticRouteMigration) -> None:
        self._ctx = ctx
        self._nets = nets
        self._migration = migration
        # allocated pods whose networks cannot be resolved -> the resourceVersion warned about
        self._warned: dict[str, str] = {}

    def run(self) -> None:
        """kube-ovn inspectPod: re-add pods whose port is lost, re-route unrouted ones."""
        ctx = self._ctx
        now = ctx.wall_clock()
        subnets = ctx.view.subnets()
        namespaces: dict[str, Namespace | None] = {}
        # NOTE: one read of the NB ports per pass rather than a lookup per pod (every pod, every
        # 20 s). A name missing from it (a port made since, or one without the vendor id) is
        # looked up on its own, so the answer is the same as asking for each port.
        listed = {port.name for port in ctx.nb.list_ports()}

        def port_exists(name: str) -> bool:
            return name in listed or ctx.nb.get_port(name) is not None

        warned, self._warned = self._warned, {}
        for raw in ctx.view.pods_raw():
            pod = pod_or_none(raw)
            if pod is None or not pl.may_need_inspection(pod, now):
                continue
            try:
                nets = self._nets.of(raw, pod, record=False, subnets=subnets, namespaces=namespaces)
            except ControllerError as exc:
                # NOTE: an allocated pod whose networks cannot be resolved (its logical_switch
                # names no subnet) has no port to repair and never reaches the add; say so
                # once per version of the pod, not on every pass (kube-ovn only logs it).
                if exc.reason and warned.get(pod.key) != pod.resource_version:
                    ctx.warn(raw, exc.reason, exc)
                if exc.reason:
                    self._warned[pod.key] = pod.resource_version
                LOG.debug("inspect: skipping pod %s: %s", pod.key, exc)
                continue
            except Exception as exc:
                LOG.debug("inspect: skipping pod %s: %s", pod.key, exc)
                continue
            result = pl.inspect_pod(pod, nets, port_exists, now, keep_vm_ip=ctx.keep_vm_ip)
            if result.lost_providers:
                self._repair_lost_ports(pod, result.lost_providers)
            elif result.needs_update:
                ctx.queues.update.add(pod.key)
                if ctx.metrics is not None:
                    ctx.metrics.inspection_repair("reroute")
        self._migration.run()
        if ctx.metrics is not None:
            ctx.metrics.inspection_run()

    def _repair_lost_ports(self, pod: Pod, providers: tuple[str, ...]) -> None:
        ctx = self._ctx
        keys = [k for provider in providers for k in ann.allocation_state_keys(provider)]
        LOG.warning("lsp lost for pod %s (%s), re-allocating", pod.key, ", ".join(providers))
        try:
            ctx.kube.delete_pod_annotations(pod.namespace, pod.name, keys)
        except KubeNotFoundError:
            return
        except KubeApiError as exc:
            LOG.error("inspect: failed to reset pod %s: %s", pod.key, exc)
            return
        ctx.queues.add.add(pod.key)
        if ctx.metrics is not None:
            ctx.metrics.inspection_repair("readd")
