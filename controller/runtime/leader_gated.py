"""`LeaderGated`: an informer event handler whose callbacks run only while this replica leads.

Every replica runs the informers (a follower keeps warm caches so it can take over at once),
but only the leader may act on what they report: queueing work, or changing IPAM. Each
controller hands its callbacks to this one handler instead of checking leadership itself:

* `added(obj, is_in_initial_list)`, `updated(old, new)`, `deleted(obj)`; any may be omitted;
* nothing runs while `is_leader()` is false (what happened meanwhile, the start-up passes and
  the informers' initial list give the new leader);
* objects are typed `KubeObject`s: an event whose object is not a mapping is dropped (an
  informer never holds one; a handler cannot act on one);
* a delete's tombstone (`DeletedFinalStateUnknown`) is unwrapped; when it carries no last
  state, `deleted` gets a stand-in object with only the name (and namespace) of its key, which
  is all any delete handler needs;
* with `errors_logged_as`, a callback that raises is logged under that name and the event
  dropped (an informer thread must not die of one handler); without it, errors propagate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.cache import DeletedFinalStateUnknown, split_meta_namespace_key
from controller.kube.api import KubeObject

LOG = logging.getLogger(__name__)

Added = Callable[[KubeObject, bool], None]
Updated = Callable[[KubeObject, KubeObject], None]
Deleted = Callable[[KubeObject], None]


def _object(obj: object) -> KubeObject | None:
    return obj if isinstance(obj, dict) else None


def _stand_in(key: str) -> KubeObject:
    namespace, name = split_meta_namespace_key(key)
    meta = {"name": name, "namespace": namespace} if namespace else {"name": name}
    return {"metadata": meta}


class LeaderGated:
    """A `controller.cache.ResourceEventHandler` over typed callbacks, run only while leading
    (see the module docstring)."""

    def __init__(
        self,
        is_leader: Callable[[], bool],
        *,
        added: Added | None = None,
        updated: Updated | None = None,
        deleted: Deleted | None = None,
        errors_logged_as: str = "",
    ) -> None:
        self._is_leader = is_leader
        self._added = added
        self._updated = updated
        self._deleted = deleted
        self._errors_logged_as = errors_logged_as

    def on_add(self, obj: object, is_in_initial_list: bool = False) -> None:
        new = _object(obj)
        if self._added is not None and new is not None and self._is_leader():
            self._run(self._added, new, is_in_initial_list)

    def on_update(self, old: object, new: object) -> None:
        before, after = _object(old), _object(new)
        if self._updated is None or before is None or after is None:
            return
        if self._is_leader():
            self._run(self._updated, before, after)

    def on_delete(self, obj: object) -> None:
        if self._deleted is None or not self._is_leader():
            return
        last: object = obj
        if isinstance(obj, DeletedFinalStateUnknown):
            last = obj.obj if obj.obj is not None else _stand_in(obj.key)
        gone = _object(last)
        if gone is not None:
            self._run(self._deleted, gone)

    def _run(self, callback: Callable[..., None], *args: object) -> None:
        if not self._errors_logged_as:
            callback(*args)
            return
        try:
            callback(*args)
        except Exception:
            LOG.exception("%s failed", self._errors_logged_as)
