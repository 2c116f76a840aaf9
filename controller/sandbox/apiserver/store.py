"""A thread-safe, versioned object store with watch history: the etcd + watch cache of the emulator.

Contract (the revision log, reads and watches are `VersionedTables`', revisions.py):

* One global, monotonically increasing resourceVersion (like etcd's revision) stamps every write
  of every resource. A write that changes nothing (a no-op update or patch) returns the stored
  object unchanged and bumps nothing. Every write appends a watch event (ADDED, MODIFIED,
  DELETED) to its resource's history; history past `history_window` (or a `compact()`) answers
  410, as a compacted etcd does.
* Stored dicts are never mutated after they are stored (records.py); accessors hand out fresh
  copies. All failures are `ApiError`s carrying the Status a real apiserver would answer.

Deletion: an object with finalizers gets `deletionTimestamp` and stays until an update removes the
last finalizer. A pod is removed at once when `immediate_pod_delete` is set (the default) or the
grace period is 0; otherwise it gets `deletionTimestamp` + `deletionGracePeriodSeconds` and stays
(there is no kubelet) until `finalize_delete()` or a delete with grace 0. Deleting a namespace
deletes what it contains and removes the namespace once it is empty.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from controller.sandbox.apiserver import admission
from controller.sandbox.apiserver import patch as patches
from controller.sandbox.apiserver.manifests import manifest_objects
from controller.sandbox.apiserver.patch import JSON_PATCH, MERGE_PATCH, check_patch_type
from controller.sandbox.apiserver.records import Key, Stored, dumps, stamped
from controller.sandbox.apiserver.resources import (
    ApiError,
    JsonDict,
    ResourceType,
    already_exists,
    bad_request,
    invalid,
    not_found,
)
from controller.sandbox.apiserver.revisions import VersionedTables
from controller.sandbox.apiserver.selectors import Selector
from controller.sandbox.apiserver.updates import (
    body_metadata,
    check_delete_preconditions,
    pod_grace_period,
    updated_object,
)
from controller.sandbox.apiserver.watch import Table, WatchEvent

JsonList = list[JsonDict]  # an alias: ObjectStore.list shadows `list` inside the class


_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class ObjectStore(VersionedTables):
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
        super().__init__(history_window=history_window)
        self.immediate_pod_delete = immediate_pod_delete
        self._clock = clock
        if create_default_namespaces:
            for ns in DEFAULT_NAMESPACES:
                self.create("namespaces", {"metadata": {"name": ns}})

    # ------------------------------------------------------------------ helpers

    # ------------------------------------------------------------------ reads

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
        body_meta = body_metadata(obj)
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
        meta_in = body_metadata(obj)
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
            check_delete_preconditions(rt, name, preconditions, old_meta)
            grace = 0
            if rt.plural == "pods" and not self.immediate_pod_delete:
                grace = pod_grace_period(old, grace_period_seconds)
            if dry_run:
                return old, not (old_meta.get("finalizers") or grace)
            if rt.plural == "namespaces":
                return self._delete_namespace(table, key, old)
            if not old_meta.get("finalizers") and grace == 0:
                stored = stamped(old, self._next_rv())
                self._remove(table, key, old, stored)
                return stored, True
            return self._mark_deleting(table, key, old, grace), False

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
        stored = stamped(
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
                    self._remove(other, okey, ostored, stamped(ostored, self._next_rv()))
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
        self._remove(ns_table, ("", ns), ns_stored, stamped(ns_stored, self._next_rv()))

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
        Namespaces come first; status is kept, as for every in-process create."""
        count = 0
        for rt, obj in manifest_objects(documents):  # each kind resolved as it is created
            self.create_stored(rt, obj)
            count += 1
        return count
