"""handleAddPod: allocate every unallocated network of a pod, then annotate it (kube-ovn pod.go).

`AddHandler.handle` checks the whole request first (`pod_logic.check_pod_request`: the node
switch, gateways, MACs, security group names, IP CRs of other owners): a refusal records one
Warning Event per reason and allocates nothing. Then each network `pod_logic.need_allocate_subnets`
names is allocated by `NetAllocator` (allocate.py), and one merge patch writes every annotation
that changed, with the pod's UID as a precondition. A pod already bound to a node is routed in
the same pass (`PodContext.route`) and that patch carries `routed` too, as kube-ovn v1.12's
AddOrUpdatePod; an unbound pod, or one whose routing fails here, is left to the update handler.
An add that finds its pod re-created undoes what it allocated (and routed) anew
(`AddRollback`); one that fails keeps it for its retry and remembers it (`PendingDeletes`), and
the retry undoes what the pod no longer asks for, so a key never holds two subnets for one
network. A pod that vanished before the patch is handed to the delete queue.
"""

from __future__ import annotations

from dataclasses import replace

from controller import pod_logic as pl
from controller.apiclient.errors import ConflictError
from controller.apiclient.errors import NotFoundError as KubeNotFoundError
from controller.core import annotations as ann
from controller.core.constants import (
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    ROUTED_ANNOTATION,
)
from controller.core.errors import ControllerError, InvalidPodNetworkError, ResourceNotReadyError
from controller.core.model import Pod, PodNet, Subnet
from controller.core.object_fields import FrozenDict
from controller.kube.api import KubeObject
from controller.ovn.api import OvnError
from controller.pod.allocate import AddRollback, NetAllocator
from controller.pod.context import LOG, PodContext
from controller.pod.nets import PodNets
from controller.pod.pending import PendingDeletes


class AddHandler:
    """The AddPod queue's handler (see the module docstring)."""

    def __init__(
        self,
        ctx: PodContext,
        *,
        nets: PodNets,
        allocator: NetAllocator,
        rollback: AddRollback,
        pending: PendingDeletes,
    ) -> None:
        self._ctx = ctx
        self._nets = nets
        self._allocator = allocator
        self._rollback = rollback
        self._pending = pending

    def handle(self, key: str) -> None:
        self._ctx.on_cached_pod(key, self._add_pod)

    def _add_pod(self, key: str, raw: KubeObject, pod: Pod) -> None:
        try:
            pl.validate_pod_network(pod.annotations)
        except InvalidPodNetworkError as exc:
            self._ctx.warn(raw, REASON_VALIDATE_POD_NETWORK_FAILED, exc)
            raise
        nets = self._nets.of(raw, pod)
        self._check_request(raw, pod, pl.need_allocate_subnets(pod, nets))
        annotations: dict[str, str] = dict(pod.annotations)
        taken: list[tuple[PodNet, str]] = []  # what this run allocated anew
        # what earlier failed adds of this key allocated and kept for their retry
        leftover = self._pending.take_unfinished(key)
        try:
            for net in pl.need_allocate_subnets(pod, nets):
                others = frozenset(n.subnet.name for n in nets if n is not net)
                annotations = self._allocator.allocate(
                    raw, pod, net, annotations, taken, leftover, others
                )
            self._rollback.roll_back(pod, _not_wanted(leftover, annotations))
            leftover = []
            changes = {k: v for k, v in annotations.items() if pod.annotations.get(k) != v}
            if not changes:
                return
            if self._route_with_add(raw, pod, nets, annotations):
                changes[ROUTED_ANNOTATION] = ann.TRUE
            self._ctx.kube.patch_pod_annotations(
                pod.namespace, pod.name, changes, uid=pod.uid or None
            )
        except KubeNotFoundError:
            # NOTE: kube-ovn handleAddPod: the pod vanished between the NB write and the patch;
            # clean up what was just allocated.
            LOG.info("pod %s deleted during its add, cleaning up", key)
            self._pending.enqueue_vanished(key, raw)
            return
        except ConflictError:
            # NOTE: kube-ovn v1.8 patches without a UID precondition, so the allocation of a
            # pod deleted meanwhile lands on its same-name successor. Here the patch carries the
            # UID: the successor's own add allocates for it, once this run's work is undone.
            LOG.info("pod %s was re-created during its add, undoing its allocation", key)
            self._rollback.roll_back(pod, [*leftover, *taken])
            return
        except Exception:
            # NOTE: what a failed add allocated is kept for its retry (the same address comes
            # back), and remembered: kube-ovn v1.8 forgets it, so when the retry asks for
            # another subnet (the annotation was fixed) the key holds addresses in both. Here
            # the retry undoes a kept allocation the pod no longer asks for.
            self._pending.keep_unfinished(key, [*leftover, *taken])
            raise
        LOG.info("allocated %s for pod %s", annotations.get(IP_ADDRESS_ANNOTATION, ""), key)

    def _check_request(self, raw: KubeObject, pod: Pod, nets: list[PodNet]) -> None:
        """Refuse the whole request before anything is allocated (`pl.check_pod_request`):
        one Warning Event per distinct reason, then the error the worker acts on."""
        if not nets:
            return
        view = self._ctx.view
        ns_nets: list[PodNet] | None = None

        def candidates(net: PodNet) -> tuple[Subnet, ...]:
            nonlocal ns_nets
            if ns_nets is None:
                try:
                    ns_nets = pl.get_ns_available_subnets(
                        view.namespace(pod.namespace), view.subnet_map()
                    )
                except ResourceNotReadyError:
                    ns_nets = []  # the pod's own subnet is still a candidate (NetAllocator)
            return pl.candidate_subnets(net, ns_nets)

        refusals = pl.check_pod_request(
            pod,
            nets,
            candidates,
            node_switch=self._ctx.config.node_switch,
            pod_name=pl.get_name_by_pod(pod, self._ctx.keep_vm_ip),
            ip_cr_owner=view.ip_cr_owner,
        )
        if not refusals:
            return
        error = pl.refusal_error(refusals)
        for reason, message in pl.group_by_reason(refusals).items():
            self._ctx.warn(raw, reason, ControllerError(message))
        raise error

    def _route_with_add(
        self, raw: KubeObject, pod: Pod, nets: list[PodNet], annotations: dict[str, str]
    ) -> bool:
        """Route a bound pod in its add's own pass (`pod_logic.routes_with_add`), so that one
        patch carries `allocated` and `routed` and no UpdatePod round follows. False when the
        pod is left to handleUpdatePod: not bound yet, or its routing failed (a gateway node
        not ready, the NB refusing), which that handler retries with its backoff. What this
        wrote for an address the add then gives back is undone by `AddRollback`."""
        allocated = replace(pod, annotations=FrozenDict(annotations))
        if not pl.routes_with_add(allocated, self._ctx.wall_clock()):
            return False
        try:
            default = pl.default_ovn_net(nets)
            if default is not None and default.subnet.name != allocated.annotations.get(
                LOGICAL_SWITCH_ANNOTATION, default.subnet.name
            ):
                # a static address found in another of the namespace's subnets: its networks
                # must resolve from the annotated pod, as UpdatePod would resolve them
                self._nets.of(raw, allocated, record=False)
            self._ctx.route(allocated)
        except (ControllerError, OvnError) as exc:
            LOG.info("pod %s: routing left to its update: %s", pod.key, exc)
            return False
        return True


def _not_wanted(
    leftover: list[tuple[PodNet, str]], annotations: dict[str, str]
) -> list[tuple[PodNet, str]]:
    """The kept allocations whose network the finished annotations put in another subnet."""
    return [
        (net, subnet)
        for net, subnet in leftover
        if ann.get(annotations, LOGICAL_SWITCH_ANNOTATION_TEMPLATE, net.provider_name) != subnet
    ]
