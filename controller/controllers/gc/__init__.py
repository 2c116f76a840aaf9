"""Garbage collection of what pod networking leaves behind, one module per thing collected:
`collector` (the passes' schedule, and logical switch ports, IP CRs and IPAM addresses),
`static_routes` (src-ip host routes), `routing_rows` (the routing reconciler's backstop over
router policies, address sets and NAT) and `security_groups` (rows of deleted security groups).
"""

from controller.controllers.gc.collector import GarbageCollector, KeyLock

__all__ = ["GarbageCollector", "KeyLock"]
