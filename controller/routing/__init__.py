"""The routing reconciler of the default VPC (router policies, address sets, NAT): the key
handler and the pod handlers' hooks (`reconciler`), which keys an informer event enqueues
(`events`), what a key is computed from (`inputs`) and how a change reads (`changes`)."""

from controller.routing.changes import describe, removes
from controller.routing.reconciler import RoutingReconciler

__all__ = ["RoutingReconciler", "describe", "removes"]
