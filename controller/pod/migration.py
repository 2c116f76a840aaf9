"""The migration of kube-ovn v1.8's per-pod src-ip static routes to router policies.

Contract:

* `StaticRouteMigration.run` (run by the inspection, so at every --inspect-interval and once the
  workers start) reads the cluster router's src-ip host routes once; every alive, routed pod in
  the cache that holds such an address has its routing keys queued for the routing reconciler,
  which writes its policies and address-set entries and deletes the static route in the same
  transaction (`controller.routing`): the pod keeps egress throughout.
* A route whose address no pod holds is left to the garbage collection (`gc_static_routes`,
  two passes); dst-ip routes and routes of other routers are never looked at.
* Once no src-ip host route is left the pass costs one read of the router's routes.
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.core.address import host_prefix
from controller.core.constants import IP_ADDRESS_ANNOTATION, POLICY_SRC_IP
from controller.ovn.api import OvnError
from controller.pod.context import LOG, PodContext, pod_or_none
from controller.pod_logic import routing_state as rs


class StaticRouteMigration:
    """The scan that hands pods with a v1.8 src-ip route to the routing reconciler."""

    def __init__(self, ctx: PodContext) -> None:
        self._ctx = ctx

    def run(self) -> int:
        """Queue every routed pod that still has a src-ip static route; returns how many."""
        ctx = self._ctx
        router = ctx.config.cluster_router
        try:
            routes = ctx.nb.list_static_routes(router)
        except OvnError as exc:
            LOG.warning("cannot list the static routes of %s: %s", router, exc)
            return 0
        stale = {
            ip
            for r in routes
            if r.policy == POLICY_SRC_IP and (ip := host_prefix(r.ip_prefix)) is not None
        }
        if not stale:
            return 0
        now = ctx.wall_clock()
        queued = 0
        for raw in ctx.view.pods_raw():
            pod = pod_or_none(raw)
            if pod is None or not pl.needs_reroute(pod, now):
                continue
            ips = pod.annotations.get(IP_ADDRESS_ANNOTATION, "").split(",")
            if any(host_prefix(ip) in stale for ip in ips if ip):
                for key in rs.pod_keys_of(pod):
                    ctx.routing.enqueue(key)
                queued += 1
        if queued:
            LOG.info("migrating the src-ip static routes of %d pods to router policies", queued)
        return queued
