"""The routing reconciler of the default VPC (router policies, address sets, NAT)."""

from controller.routing.reconciler import RoutingReconciler, describe, removes

__all__ = ["RoutingReconciler", "describe", "removes"]
