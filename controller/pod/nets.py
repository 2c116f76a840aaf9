"""A pod's networks as the handlers resolve them: kube-ovn getPodKubeovnNets over the caches.

`PodNets.of` reads the pod's namespace, the subnets and the NADs it names through the cache
view and asks `pod_logic.get_pod_kubeovn_nets`; a failure that carries kube-ovn's Event reason
becomes a Warning Event on the pod (unless the caller only probes). A subnet the pod names that
exists but is malformed is reported as such, not as "not found".
"""

from __future__ import annotations

from controller import pod_logic as pl
from controller.core.constants import LOGICAL_SWITCH_ANNOTATION, REASON_VALIDATE_POD_NETWORK_FAILED
from controller.core.errors import ControllerError, ResourceNotReadyError
from controller.core.model import Namespace, Pod, PodNet, Subnet
from controller.kube.api import KubeObject
from controller.pod.context import PodContext


class PodNets:
    """Resolves a pod's networks through the context's cache view."""

    def __init__(self, ctx: PodContext) -> None:
        self._ctx = ctx

    def of(
        self,
        raw: KubeObject,
        pod: Pod,
        *,
        record: bool = True,
        subnets: list[Subnet] | None = None,
        namespaces: dict[str, Namespace | None] | None = None,
    ) -> list[PodNet]:
        """kube-ovn getPodKubeovnNets over the caches; a failure with an Event reason is
        recorded on the pod (unless `record` is False). `subnets` may pass a pre-read list,
        `namespaces` a memo of parsed namespaces (filled here) for a pass over many pods."""
        view = self._ctx.view
        try:
            self._check_named_subnet(pod)
            if namespaces is None:
                namespace = view.namespace(pod.namespace)
            elif pod.namespace in namespaces:
                namespace = namespaces[pod.namespace]
            else:
                namespace = namespaces[pod.namespace] = view.namespace(pod.namespace)
            return pl.get_pod_kubeovn_nets(
                pod,
                namespace,
                subnets if subnets is not None else view.subnets(),
                view.nads_of(pod),
            )
        except ControllerError as exc:
            if record:
                self._ctx.warn_with_reason(raw, exc)
            raise

    def _check_named_subnet(self, pod: Pod) -> None:
        """A subnet the pod's `logical_switch` names exists but is malformed (wrong types, or a
        spec the subnet controller refuses, so IPAM never registers it): say so, rather than
        "not found" / "not registered" (retryable: fixing the subnet heals the pod)."""
        name = pod.annotations.get(LOGICAL_SWITCH_ANNOTATION, "")
        parsed = self._ctx.view.parsed_subnet(name)
        if parsed is None:
            return
        error = parsed.parse_error or parsed.spec_error
        if error:
            raise ResourceNotReadyError(
                f"subnet {name} of pod {pod.key} is malformed: {error}",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
