"""handleUpdatePod: route an allocated, scheduled pod, then mark it `routed` (kube-ovn pod.go).

`UpdateHandler.handle` asks the routing reconciler for the default network's routing rows of
the pod (`PodContext.route`: its entry in its node's address set for a distributed gateway, its
own reroute policy for a north gateway or the EIP/SNAT external gateway, NAT rules, and the
removal of its v1.8 src-ip static routes in the same transaction), then patches `routed=true`.
The reconciler keeps the rows right afterwards, whatever `routed` says. A pod gone before the
patch is handed to the delete queue.
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.apiclient.errors import NotFoundError as KubeNotFoundError
from controller.core import annotations as ann
from controller.core.constants import ROUTED_ANNOTATION
from controller.core.model import Pod
from controller.kube.api import KubeObject
from controller.pod.context import LOG, PodContext
from controller.pod.nets import PodNets
from controller.pod.pending import PendingDeletes


class UpdateHandler:
    """The UpdatePod queue's handler (see the module docstring)."""

    def __init__(self, ctx: PodContext, *, nets: PodNets, pending: PendingDeletes) -> None:
        self._ctx = ctx
        self._nets = nets
        self._pending = pending

    def handle(self, key: str) -> None:
        self._ctx.on_cached_pod(key, self._update_pod)

    def _update_pod(self, key: str, raw: KubeObject, pod: Pod) -> None:
        ctx = self._ctx
        if not pl.needs_update(pod, ctx.wall_clock()):
            return
        # the pod's networks must resolve (a Warning Event says why not) before it is routed
        self._nets.of(raw, pod)
        ctx.route(pod)
        if ann.is_routed(pod.annotations):
            return
        try:
            ctx.kube.patch_pod_annotations(pod.namespace, pod.name, {ROUTED_ANNOTATION: ann.TRUE})
        except KubeNotFoundError:
            LOG.info("pod %s deleted during its update, cleaning up", key)
            self._pending.enqueue_vanished(key, raw)
