"""The reconcilers beside the pod controller: subnets, namespaces, nodes, gc, start-up bootstrap."""
