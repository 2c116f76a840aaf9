"""The pod handlers' two hooks into the routing reconciler (controller/routing/).

Routing rows (router policies, address-set entries, NAT) are derived state the reconciler owns;
the pod handlers only ask it for the one pod at the moments kube-ovn's handlers route:
`route` when the add or update routes a pod (the add for a bound pod, the update otherwise),
`release` when an address goes back (the delete, or an add undoing what it allocated).
"""

from __future__ import annotations

from controller.core.errors import ResourceNotReadyError
from controller.core.model import Pod
from controller.routing import RoutingReconciler


class PodRoutes:
    """Routes and un-routes one pod through the routing reconciler."""

    def __init__(self, routing: RoutingReconciler) -> None:
        self._routing = routing

    def route(self, pod: Pod) -> None:
        """Write `pod`'s own routing rows (its annotations carry the allocation);
        ResourceNotReadyError when they cannot all be written yet (its node's join address, the
        external gateway): the reconciler routes it once they can."""
        if not self._routing.route_pod(pod):
            raise ResourceNotReadyError(
                f"pod {pod.key}: routing waits for its node {pod.node_name!r} or the external"
                " gateway"
            )

    def release(self, pod: Pod, subnet: str, address: str) -> None:
        """The pod's routing and NAT rows of its `address` in `subnet` go now (one transaction),
        unless a live pod still claims them; the reconciler settles its keys after."""
        if address.strip():
            self._routing.release_pod(pod, subnet, address)
