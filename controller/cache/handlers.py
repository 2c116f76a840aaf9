"""Event handler types for shared informers (client-go tools/cache controller.go).

`ResourceEventHandler` is what `SharedIndexInformer.add_event_handler` accepts: `on_add(obj,
is_in_initial_list)`, `on_update(old, new)`, `on_delete(obj)`, each run on the handler's own
thread (shared_informer.py states the delivery contract). `ResourceEventHandlerFuncs` adapts plain
callbacks; `FilteringResourceEventHandler` passes on only the objects a predicate accepts, turning
an update that crosses the predicate into an add or a delete. Neither keeps state of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class ResourceEventHandler(Protocol):
    def on_add(self, obj: Any, is_in_initial_list: bool) -> None: ...
    def on_update(self, old: Any, new: Any) -> None: ...
    def on_delete(self, obj: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class ResourceEventHandlerFuncs:
    """Plain callbacks as a `ResourceEventHandler`; missing ones are skipped."""

    add_func: Callable[[Any], None] | None = None
    update_func: Callable[[Any, Any], None] | None = None
    delete_func: Callable[[Any], None] | None = None

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.add_func is not None:
            self.add_func(obj)

    def on_update(self, old: Any, new: Any) -> None:
        if self.update_func is not None:
            self.update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.delete_func is not None:
            self.delete_func(obj)


@dataclass(frozen=True, slots=True)
class FilteringResourceEventHandler:
    """Passes on only objects accepted by `filter_func`; an update that crosses the filter
    becomes an add (now accepted) or a delete (no longer accepted)."""

    filter_func: Callable[[Any], bool]
    handler: ResourceEventHandler

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.filter_func(obj):
            self.handler.on_add(obj, is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        old_ok, new_ok = self.filter_func(old), self.filter_func(new)
        if old_ok and new_ok:
            self.handler.on_update(old, new)
        elif new_ok:
            self.handler.on_add(new, False)
        elif old_ok:
            self.handler.on_delete(old)

    def on_delete(self, obj: Any) -> None:
        if self.filter_func(obj):
            self.handler.on_delete(obj)
