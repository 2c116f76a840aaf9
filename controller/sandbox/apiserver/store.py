"""A thread-safe, versioned object store with watch history: the etcd + watch cache of the emulator.

Contract:

* One global, monotonically increasing resourceVersion (like etcd's revision) stamps every write
  of every resource. Reads never bump it; a write that changes nothing (a no-op update or patch)
  returns the stored object unchanged and bumps nothing.
* Every write appends a watch event (ADDED, MODIFIED, DELETED) to its resource's history. History
  older than `history_window` revisions behind the newest (or older than an explicit `compact()`)
  is dropped: watching from, listing at, or continuing a list at such a version raises a 410
  `ApiError`, as a compacted etcd does.
* Each stored object keeps its JSON serialization, built once at write time, so the HTTP layer
  assembles list bodies and watch events by joining bytes.
* Stored dicts are never mutated after they are stored; accessors hand out fresh copies, so
  callers may modify what they get.
* All failures are `ApiError`s carrying the Status a real apiserver would answer.

Deletion: an object with finalizers gets `deletionTimestamp` and stays until an update removes the
last finalizer. A pod is removed at once when `immediate_pod_delete` is set (the default) or the
grace period is 0; otherwise it gets `deletionTimestamp` + `deletionGracePeriodSeconds` and stays
(there is no kubelet) until `finalize_delete()` or a delete with grace 0. Deleting a namespace
deletes what it contains and removes the namespace once it is empty.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from controller.sandbox.apiserver import admission
from controller.sandbox.apiserver import patch as patches
from controller.sandbox.apiserver.listing import (
    check_list_request,
    list_snapshot,
    page,
    parse_rv,
    snapshot_overlay,
)
from controller.sandbox.apiserver.patch import JSON_PATCH, MERGE_PATCH, check_patch_type
from controller.sandbox.apiserver.records import Key, ListResult, Stored, dumps
from controller.sandbox.apiserver.resources import (
    ApiError,
    JsonDict,
    ResourceType,
    already_exists,
    bad_request,
    conflict,
    invalid,
    namespace_not_found,
    not_found,
    resource_for,
    resource_for_kind,
    too_large,
    too_old,
)
from controller.sandbox.apiserver.selectors import Selector
from controller.sandbox.apiserver.updates import uid_conflict, updated_object
from controller.sandbox.apiserver.watch import Table, Watcher, WatchEvent

LOG = logging.getLogger(__name__)

JsonList = list[JsonDict]  # an alias: ObjectStore.list shadows `list` inside the class


_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _body_metadata(obj: Any) -> JsonDict:
    """The metadata of a request body ({} when absent or not an object); 400 for a non-object."""
    if not isinstance(obj, dict):
        raise bad_request("the body of the request must be a JSON object")
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class ObjectStore:
    """The versioned store behind the emulator; safe to call from any thread.

    Methods take a resource as a ResourceType or a name (`"pods"`, `"subnets"`,
    `"subnets.kubeovn.io"`).
    """

    def __init__(
        self,
        *,
        history_window: int = 100_000,
        immediate_pod_delete: bool = True,
        clock: Callable[[], float] = time.time,
        create_default_namespaces: bool = True,
    ) -> None:
        if history_window < 1:
            raise ValueError("history_window must be at least 1")
        self.history_window = history_window
        self.immediate_pod_delete = immediate_pod_delete
        self._clock = clock
        self._lock = threading.RLock()
        self._rv = 0
        self._forced_compaction = 0
        self._tables: dict[ResourceType, Table] = {}
        self.closed = False
        if create_default_namespaces:
            for ns in DEFAULT_NAMESPACES:
                self.create("namespaces", {"metadata": {"name": ns}})

    # ------------------------------------------------------------------ bookkeeping

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out (0 before the first write)."""
        return self._rv

    def compacted_rv(self) -> int:
        """Versions strictly below this are gone: watching or listing at them answers 410."""
        return max(self._forced_compaction, self._rv - self.history_window)

    def compact(self, rv: int | None = None) -> None:
        """Forget history up to `rv` (default: everything), like an etcd compaction."""
        with self._lock:
            self._forced_compaction = max(self._forced_compaction, self._rv if rv is None else rv)
            for table in self._tables.values():
                self._trim(table)
                table.cond.notify_all()

    def _table(self, resource: ResourceType | str) -> Table:
        rt = resource if isinstance(resource, ResourceType) else resource_for(resource)
        table = self._tables.get(rt)
        if table is None:
            with self._lock:
                table = self._tables.setdefault(rt, Table(rt, threading.Condition(self._lock)))
        return table

    def _trim(self, table: Table) -> None:
        floor = self.compacted_rv()
        hist = table.history
        i = table.history_start
        while i < len(hist) and hist[i].rv <= floor:
            i += 1
        if i > table.history_start:
            table.trimmed_rv = hist[i - 1].rv
        table.history_start = i
        if i > 1024 and i * 2 > len(hist):
            del hist[:i]
            table.history_start = 0

    def _record(self, table: Table, ev: WatchEvent) -> None:
        table.history.append(ev)
        self._trim(table)
        table.cond.notify_all()

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def close(self) -> None:
        """End every open watch (abruptly); the store stays readable."""
        with self._lock:
            self.closed = True
            for table in self._tables.values():
                table.cond.notify_all()

    # ------------------------------------------------------------------ helpers

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def _require_namespace(self, rt: ResourceType, namespace: str | None) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise bad_request(
                f"the server could not find the requested resource: {rt.plural} need a namespace"
            )
        return namespace

    def _check_namespace_exists(self, namespace: str) -> None:
        ns_table = self._table("namespaces")
        stored = ns_table.objects.get(("", namespace))
        if stored is None:
            raise namespace_not_found(namespace)
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because "
                "it is being terminated",
                details={"name": namespace, "kind": "namespaces"},
            )

    def _get_stored(self, table: Table, key: Key) -> Stored:
        stored = table.objects.get(key)
        if stored is None:
            raise not_found(table.rt, key[1])
        return stored

    @staticmethod
    def _copy(stored: Stored) -> JsonDict:
        result: JsonDict = json.loads(stored.raw)
        return result

    # ------------------------------------------------------------------ reads

    def get(self, resource: ResourceType | str, namespace: str | None, name: str) -> JsonDict:
        """A copy of the current object, or a 404 `ApiError`."""
        return self._copy(self.get_stored(resource, namespace, name))

    def get_stored(self, resource: ResourceType | str, namespace: str | None, name: str) -> Stored:
        table = self._table(resource)
        with self._lock:
            return self._get_stored(table, self._key(table.rt, namespace, name))

    def list(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        selector: Selector | None = None,
    ) -> list[JsonDict]:
        """Copies of every object (in one namespace, matching `selector`), in key order."""
        table = self._table(resource)
        sel = Selector(namespace if table.rt.namespaced else None) if selector is None else selector
        result = self.list_page(table.rt, sel)
        return [self._copy(s) for s in result.items]

    def list_page(
        self,
        resource: ResourceType | str,
        selector: Selector,
        *,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> ListResult:
        """One LIST request's worth of objects, with the semantics of a real apiserver.

        `resource_version` "" or None: the newest state; "0": any state (the newest here),
        whole (kube-apiserver serves it from its watch cache and ignores `limit`);
        "N" with match NotOlderThan (or no match): the newest state, 504 if N is in the future;
        "N" with match Exact: the state at N, 410 if compacted. A continue token serves the
        next page at the first page's version, 410 once that version is compacted.
        """
        table = self._table(resource)
        limit = check_list_request(resource_version, resource_version_match, limit, continue_token)
        with self._lock:
            snapshot, start = list_snapshot(
                self._rv,
                self.compacted_rv(),
                resource_version,
                resource_version_match,
                continue_token,
            )
            overlay = snapshot_overlay(table, snapshot, self._rv)
            return page(table, overlay, selector, snapshot, start, limit)

    # ------------------------------------------------------------------ writes

    def create(
        self,
        resource: ResourceType | str,
        obj: JsonDict,
        namespace: str | None = None,
        *,
        keep_status: bool = True,
        dry_run: bool = False,
    ) -> JsonDict:
        """Store a new object; 409 if it exists. `generateName` is honoured.

        `keep_status=True` (the default for in-process callers seeding a test) keeps the body's
        status; the HTTP layer passes False for kinds with a status subresource, which drops it
        as a real apiserver does.
        """
        return self._copy(
            self.create_stored(resource, obj, namespace, keep_status=keep_status, dry_run=dry_run)
        )

    def create_stored(
        self,
        resource: ResourceType | str,
        obj: JsonDict,
        namespace: str | None = None,
        *,
        keep_status: bool = True,
        dry_run: bool = False,
    ) -> Stored:
        table = self._table(resource)
        rt = table.rt
        body_meta = _body_metadata(obj)
        namespace = namespace or body_meta.get("namespace")
        new = json.loads(dumps(admission.validate_identity(rt, obj, namespace)))
        meta = new["metadata"]
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        with self._lock:
            ns = self._require_namespace(rt, namespace)
            if rt.namespaced:
                self._check_namespace_exists(ns)
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            name = meta.get("name")
            if not name:
                prefix = meta.get("generateName")
                if not prefix or not isinstance(prefix, str):
                    raise invalid(
                        rt, "", "metadata.name: Required value: name or generateName is required"
                    )
                for _ in range(8):
                    name = prefix + "".join(random.choices(_GENERATE_ALPHABET, k=5))
                    if (ns, name) not in table.objects:
                        break
                meta["name"] = name
            admission.validate_name(rt, name)
            key = (ns, name)
            if key in table.objects:
                raise already_exists(rt, name)
            for fld in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
                meta.pop(fld, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _rfc3339(self._clock())
            if admission.tracks_generation(rt):
                meta["generation"] = 1
            new["kind"] = rt.kind
            new["apiVersion"] = rt.api_version
            admission.apply_create_defaults(rt, new, keep_status)
            if dry_run:
                meta["resourceVersion"] = str(self._rv)
                return Stored.of(new)
            meta["resourceVersion"] = str(self._next_rv())
            stored = Stored.of(new)
            table.objects[key] = stored
            table.sorted_keys = None
            self._record(table, WatchEvent("ADDED", stored.rv, key, stored, None))
            return stored

    def update(
        self,
        resource: ResourceType | str,
        obj: JsonDict,
        namespace: str | None = None,
        name: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        """Replace an object (PUT). A set metadata.resourceVersion must be current (else 409).

        With a status subresource, the main resource ignores status changes and
        `subresource="status"` changes only the status.
        """
        return self._copy(
            self.update_stored(
                resource, obj, namespace, name, subresource=subresource, dry_run=dry_run
            )
        )

    def update_stored(
        self,
        resource: ResourceType | str,
        obj: JsonDict,
        namespace: str | None = None,
        name: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Stored:
        table = self._table(resource)
        rt = table.rt
        meta_in = _body_metadata(obj)
        body_name = meta_in.get("name")
        name = name or body_name
        if not name:
            raise bad_request("name is required to update an object")
        if body_name and body_name != name:
            raise bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        namespace = namespace or meta_in.get("namespace")
        new = json.loads(dumps(admission.validate_identity(rt, obj, namespace)))
        with self._lock:
            ns = self._require_namespace(rt, namespace)
            key = (ns, name)
            old = self._get_stored(table, key)
            return self._commit_update(table, key, old, new, subresource, dry_run)

    def _commit_update(
        self,
        table: Table,
        key: Key,
        old: Stored,
        new: JsonDict,
        subresource: str | None,
        dry_run: bool,
    ) -> Stored:
        new = updated_object(table.rt, key, old, new, subresource)
        meta = new["metadata"]
        old_meta = old.obj["metadata"]
        if admission.strip_volatile(new) == admission.strip_volatile(old.obj):
            return old  # a no-op write: no new version, no event
        if (
            "generation" in meta
            and subresource is None
            and admission.spec_part(new) != admission.spec_part(old.obj)
        ):
            meta["generation"] = int(meta["generation"]) + 1
        if dry_run:
            meta["resourceVersion"] = old_meta["resourceVersion"]
            return Stored.of(new)
        meta["resourceVersion"] = str(self._next_rv())
        stored = Stored.of(new)
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and meta.get("deletionGracePeriodSeconds", 0) == 0
        ):
            # The last finalizer is gone from an object being deleted: it goes now.
            self._remove(table, key, old, stored)
            return stored
        table.objects[key] = stored
        self._record(table, WatchEvent("MODIFIED", stored.rv, key, stored, old))
        return stored

    def patch(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        patch_body: Any,
        patch_type: str = MERGE_PATCH,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonDict:
        """Apply a JSON, merge or strategic merge patch atomically (415 for others)."""
        return self._copy(
            self.patch_stored(
                resource,
                namespace,
                name,
                patch_body,
                patch_type,
                subresource=subresource,
                dry_run=dry_run,
            )
        )

    def patch_stored(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        patch_body: Any,
        patch_type: str = MERGE_PATCH,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Stored:
        table = self._table(resource)
        rt = table.rt
        check_patch_type(rt, patch_type)
        with self._lock:
            ns = self._require_namespace(rt, namespace)
            key = (ns, name)
            old = self._get_stored(table, key)
            current: JsonDict = json.loads(old.raw)
            try:
                if patch_type == JSON_PATCH:
                    patched = patches.apply_json_patch(current, patch_body)
                elif patch_type == MERGE_PATCH:
                    if not isinstance(patch_body, dict):
                        raise ValueError("a merge patch must be a JSON object")
                    patched = patches.apply_merge_patch(current, patch_body)
                else:
                    patched = patches.apply_strategic_merge_patch(current, patch_body)
            except ValueError as exc:
                raise bad_request(str(exc)) from None
            except patches.PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
            if not isinstance(patched, dict):
                raise ApiError(422, "Invalid", "the patch turned the object into a non-object")
            pmeta = patched.get("metadata")
            if not isinstance(pmeta, dict):
                raise ApiError(422, "Invalid", "the patch removed the object's metadata")
            if pmeta.get("name") != name:
                raise invalid(rt, name, "metadata.name: Invalid value: field is immutable")
            if pmeta.get("uid") not in (None, "", old.obj["metadata"]["uid"]):
                # kube-apiserver: a patch is no precondition; another uid is an immutable-field
                # error (422), where a PUT carrying one gets the 409 "Precondition failed"
                raise invalid(
                    rt, name, f"metadata.uid: Invalid value: {pmeta['uid']!r}: field is immutable"
                )
            if rt.namespaced and pmeta.get("namespace", ns) != ns:
                raise invalid(rt, name, "metadata.namespace: Invalid value: field is immutable")
            patched = admission.validate_identity(rt, patched, ns)
            return self._commit_update(table, key, old, patched, subresource, dry_run)

    def delete(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: JsonDict | None = None,
        dry_run: bool = False,
    ) -> tuple[JsonDict, bool]:
        """Delete an object: returns (its last state, whether it is gone now)."""
        stored, removed = self.delete_stored(
            resource,
            namespace,
            name,
            grace_period_seconds=grace_period_seconds,
            preconditions=preconditions,
            dry_run=dry_run,
        )
        return self._copy(stored), removed

    def delete_stored(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: JsonDict | None = None,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        table = self._table(resource)
        rt = table.rt
        if grace_period_seconds is not None and grace_period_seconds < 0:
            raise invalid(rt, name, "gracePeriodSeconds: Invalid value: must be >= 0")
        with self._lock:
            ns = self._require_namespace(rt, namespace)
            key = (ns, name)
            old = self._get_stored(table, key)
            old_meta = old.obj["metadata"]
            if preconditions:
                uid = preconditions.get("uid")
                if uid and uid != old_meta["uid"]:
                    raise uid_conflict(rt, name, uid, old_meta["uid"])
                prv = preconditions.get("resourceVersion")
                if prv and str(prv) != old_meta["resourceVersion"]:
                    raise conflict(
                        rt,
                        name,
                        "Precondition failed: ResourceVersion in "
                        f"precondition: {prv}, ResourceVersion in object meta: "
                        f"{old_meta['resourceVersion']}",
                    )
            grace = 0
            if rt.plural == "pods" and not self.immediate_pod_delete:
                if grace_period_seconds is not None:
                    grace = grace_period_seconds
                else:
                    spec = old.obj.get("spec") or {}
                    grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
                # As kube-apiserver's pod strategy: a pod no node runs (unscheduled, or
                # finished) has nothing to wait for and goes at once.
                if not (old.obj.get("spec") or {}).get("nodeName") or (
                    (old.obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                ):
                    grace = 0
                current_grace = old_meta.get("deletionGracePeriodSeconds")
                if current_grace is not None:
                    grace = min(grace, int(current_grace))
            if dry_run:
                return old, not (old_meta.get("finalizers") or grace)
            if rt.plural == "namespaces":
                return self._delete_namespace(table, key, old)
            if not old_meta.get("finalizers") and grace == 0:
                stored = self._stamp(old, self._next_rv())
                self._remove(table, key, old, stored)
                return stored, True
            return self._mark_deleting(table, key, old, grace), False

    def _stamp(self, old: Stored, rv: int, **meta_updates: Any) -> Stored:
        obj = json.loads(old.raw)
        obj["metadata"]["resourceVersion"] = str(rv)
        obj["metadata"].update(meta_updates)
        return Stored.of(obj)

    def _mark_deleting(self, table: Table, key: Key, old: Stored, grace: int) -> Stored:
        old_meta = old.obj["metadata"]
        if (
            old_meta.get("deletionTimestamp")
            and old_meta.get("deletionGracePeriodSeconds", 0) == grace
        ):
            return old
        stamp = old_meta.get("deletionTimestamp")
        if not stamp or grace < old_meta.get("deletionGracePeriodSeconds", 0):
            stamp = _rfc3339(self._clock() + grace)
        stored = self._stamp(
            old, self._next_rv(), deletionTimestamp=stamp, deletionGracePeriodSeconds=grace
        )
        if grace == 0 and not old_meta.get("finalizers"):
            self._remove(table, key, old, stored)
            return stored
        table.objects[key] = stored
        self._record(table, WatchEvent("MODIFIED", stored.rv, key, stored, old))
        return stored

    def _remove(self, table: Table, key: Key, old: Stored, final: Stored) -> None:
        del table.objects[key]
        table.sorted_keys = None
        self._record(table, WatchEvent("DELETED", final.rv, key, final, old))
        if table.rt.namespaced:
            self._maybe_finish_namespace(key[0])

    def _delete_namespace(self, table: Table, key: Key, old: Stored) -> tuple[Stored, bool]:
        ns = key[1]
        if not old.obj["metadata"].get("deletionTimestamp"):
            obj = json.loads(old.raw)
            obj["metadata"]["resourceVersion"] = str(self._next_rv())
            obj["metadata"]["deletionTimestamp"] = _rfc3339(self._clock())
            obj["status"] = {"phase": "Terminating"}
            stored = Stored.of(obj)
            table.objects[key] = stored
            self._record(table, WatchEvent("MODIFIED", stored.rv, key, stored, old))
        for other in list(self._tables.values()):
            if not other.rt.namespaced:
                continue
            for okey in [k for k in other.objects if k[0] == ns]:
                ostored = other.objects[okey]
                if ostored.obj["metadata"].get("finalizers"):
                    self._mark_deleting(other, okey, ostored, 0)
                else:
                    self._remove(other, okey, ostored, self._stamp(ostored, self._next_rv()))
        self._maybe_finish_namespace(ns)
        current = table.objects.get(key)
        if current is None:
            return self._last_deleted(table, key), True
        return current, False

    def _last_deleted(self, table: Table, key: Key) -> Stored:
        for ev in reversed(table.history):
            if ev.key == key and ev.type == "DELETED":
                return ev.cur
        raise not_found(table.rt, key[1])  # pragma: no cover - just removed

    def _maybe_finish_namespace(self, ns: str) -> None:
        ns_table = self._table("namespaces")
        ns_stored = ns_table.objects.get(("", ns))
        if ns_stored is None or not ns_stored.obj["metadata"].get("deletionTimestamp"):
            return
        if ns_stored.obj["metadata"].get("finalizers"):
            return
        for other in self._tables.values():
            if other.rt.namespaced and any(k[0] == ns for k in other.objects):
                return
        self._remove(ns_table, ("", ns), ns_stored, self._stamp(ns_stored, self._next_rv()))

    def finalize_delete(
        self, resource: ResourceType | str, namespace: str | None, name: str
    ) -> bool:
        """Finish a graceful deletion, as a kubelet confirming a pod is gone would.

        Returns True if the object is gone; it stays (with grace 0) while finalizers remain.
        """
        # A grace-0 delete already marks an object that keeps finalizers with grace 0.
        return self.delete_stored(resource, namespace, name, grace_period_seconds=0)[1]

    def delete_collection(
        self,
        resource: ResourceType | str,
        selector: Selector,
        *,
        grace_period_seconds: int | None = None,
    ) -> JsonList:
        """Delete every object matching `selector`; returns their last states."""
        table = self._table(resource)
        out: JsonList = []
        with self._lock:
            for stored in self.list_page(table.rt, selector).items:
                meta = stored.obj["metadata"]
                obj, _ = self.delete(
                    table.rt,
                    meta.get("namespace"),
                    meta["name"],
                    grace_period_seconds=grace_period_seconds,
                )
                out.append(obj)
        return out

    def load(self, documents: Iterable[Any]) -> int:
        """Create manifests (objects with apiVersion/kind, or `kind: List`); returns the count.

        Namespaces are created first so namespaced objects can follow in any order; status is
        kept, as for every in-process create.
        """
        objects: JsonList = []
        for doc in documents:
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise bad_request(f"a manifest must be an object, got {type(doc).__name__}")
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                objects.extend(doc["items"])
            else:
                objects.append(doc)
        objects.sort(key=lambda o: o.get("kind") != "Namespace")
        for obj in objects:
            try:
                rt = resource_for_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
            except KeyError as exc:
                raise bad_request(str(exc.args[0])) from None
            self.create_stored(rt, obj)
        return len(objects)

    # ------------------------------------------------------------------ watch

    def watch(
        self,
        resource: ResourceType | str,
        selector: Selector,
        resource_version: str | None,
        *,
        send_initial_events: bool | None = None,
    ) -> Watcher:
        """Open a watch. rv "" / "0" (or send_initial_events) start with the current state.

        Raises a 410 `ApiError` for a compacted version; the HTTP layer turns that into an
        ERROR event, as a real apiserver does for an expired watch.
        """
        table = self._table(resource)
        with self._lock:
            current = self._rv
            if resource_version in (None, "", "0") or send_initial_events:
                if send_initial_events and resource_version not in (None, "", "0"):
                    cursor = parse_rv(resource_version)
                    if cursor > current:
                        raise too_large(cursor, current)
                initial = [
                    s
                    for s in table.objects.values()
                    if selector.is_everything or selector.matches(s.obj)
                ]
                initial.sort(key=lambda s: s.rv)
                watcher = Watcher(self, table, selector, current, initial)
            else:
                cursor = parse_rv(resource_version)
                if cursor < self.compacted_rv():
                    raise too_old(cursor, self.compacted_rv())
                if cursor > current:
                    # NOTE: a real apiserver first waits ~3 s for its cache to catch up.
                    raise too_large(cursor, current)
                watcher = Watcher(self, table, selector, cursor, [])
            table.watchers.add(watcher)
            table.cond.notify_all()
            return watcher

    def _tables_of(self, resource: ResourceType | str | None) -> Iterable[Table]:
        return self._tables.values() if resource is None else [self._table(resource)]

    def _end_watches(
        self, resource: ResourceType | str | None, end: Callable[[Watcher], None]
    ) -> int:
        """Apply `end` to every open watch (all, or one resource's) and wake them; how many."""
        count = 0
        with self._lock:
            for table in self._tables_of(resource):
                for w in table.watchers:
                    end(w)
                    count += 1
                table.cond.notify_all()
        return count

    def drop_watches(self, resource: ResourceType | str | None = None) -> int:
        """End open watches abruptly (all, or one resource's); returns how many."""

        def drop(w: Watcher) -> None:
            w.dropped = True

        return self._end_watches(resource, drop)

    def expire_watches(self, resource: ResourceType | str | None = None) -> int:
        """Send a 410 ERROR to open watches (all, or one resource's); returns how many."""

        def expire(w: Watcher) -> None:
            w.forced_error = too_old(w.cursor, self._rv)

        return self._end_watches(resource, expire)

    def watcher_count(self, resource: ResourceType | str | None = None) -> int:
        with self._lock:
            return sum(len(t.watchers) for t in self._tables_of(resource))

    def wait_for(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        predicate: Callable[[JsonDict | None], bool],
        timeout: float = 10.0,
    ) -> JsonDict | None:
        """Block until `predicate(object or None when absent)` holds; return what it saw.

        Woken by every write of `resource`, never by polling. Raises TimeoutError after
        `timeout` seconds, with the last state in the message. The predicate gets a copy.
        """
        table = self._table(resource)
        key = self._key(table.rt, namespace, name)
        seen: list[JsonDict | None] = [None]

        def check() -> bool:
            stored = table.objects.get(key)
            seen[0] = None if stored is None else self._copy(stored)
            return predicate(seen[0])

        with table.cond:
            if table.cond.wait_for(check, timeout):
                return seen[0]
        raise TimeoutError(
            f"{table.rt.group_resource} {'/'.join(k for k in key if k)}: "
            f"condition not met within {timeout}s; last state: {seen[0]}"
        )

    def wait_for_watchers(
        self, resource: ResourceType | str, count: int, timeout: float = 5.0
    ) -> bool:
        """Block until exactly `count` watches of `resource` are open (for tests)."""
        table = self._table(resource)
        with table.cond:
            return table.cond.wait_for(lambda: len(table.watchers) == count, timeout)
