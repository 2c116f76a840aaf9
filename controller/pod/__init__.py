"""The pod controller: informer callbacks, four work queues and their handlers, as parts.

controller.py composes `PodController` from one `PodContext` (context.py, the ports) and plain
handler classes given that context and the parts they use: events.py, add.py (with
allocate.py), update.py, delete.py, security.py, inspection.py (with migration.py), over nets.py
and pending.py. The decisions themselves are `controller.pod_logic`'s.
"""

from controller.pod.controller import PodController

__all__ = ["PodController"]
