"""Garbage collection of what pod networking leaves behind, one module per thing collected:
`collector` (the passes' schedule and what they share), `ports` (logical switch ports, with
their routes, NAT, IP CR and address), `ip_crs` (IP CRs and their address), `static_routes`
(src-ip host routes), `routing_rows` (the routing reconciler's backstop over router policies,
address sets and NAT) and `security_groups` (rows of deleted security groups); `kept` is what
the caches account for, which every sweep judges by.
"""

from controller.controllers.gc.collector import GarbageCollector, KeyLock

__all__ = ["GarbageCollector", "KeyLock"]
