"""The pod controller: informer handlers, queues and the add/update/delete flows."""

from controller.pod.controller import PodController

__all__ = ["PodController"]
