"""The pod controller: informer handlers, queues and the add/update/delete flows.

controller.py assembles `PodController` (callbacks, deleting map, workers) from the handler
mixins of add.py, update.py, delete.py and inspection.py over the shared state of base.py.
"""

from controller.pod.controller import PodController

__all__ = ["PodController"]
