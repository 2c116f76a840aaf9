"""What a write may change: a request body's metadata, an update (PUT), and the preconditions
and grace period of a delete, as kube-apiserver's strategies decide them.

`updated_object` checks the request's preconditions (resourceVersion, UID), then builds the
object to store: for the status subresource the stored object with the new status; otherwise
the new object with the stored status and the fields only the server sets (UID, creation and
deletion timestamps, generation) kept, managedFields dropped, name and namespace from the URL.
An object being deleted gets no new finalizers.
"""

from __future__ import annotations

import json
from typing import Any

from controller.sandbox.apiserver.records import Key, Stored, dumps
from controller.sandbox.apiserver.resources import (
    ApiError,
    JsonDict,
    ResourceType,
    bad_request,
    conflict,
    invalid,
    modified_conflict,
    not_found,
)

#: Fields of metadata a client cannot change through an update.
_SERVER_FIELDS = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def uid_conflict(rt: ResourceType, name: str, uid: Any, stored_uid: str) -> ApiError:
    """The 409 for a write whose UID precondition names another incarnation of the object."""
    return conflict(
        rt,
        name,
        f"Precondition failed: UID in precondition: {uid}, UID in object meta: {stored_uid}",
    )


def body_metadata(obj: Any) -> JsonDict:
    """The metadata of a request body ({} when absent or not an object); 400 for a non-object."""
    if not isinstance(obj, dict):
        raise bad_request("the body of the request must be a JSON object")
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _check_preconditions(rt: ResourceType, name: str, meta: JsonDict, old_meta: JsonDict) -> None:
    rv = meta.get("resourceVersion")
    if rv not in (None, "") and str(rv) != old_meta["resourceVersion"]:
        raise modified_conflict(rt, name)
    if meta.get("uid") not in (None, "", old_meta["uid"]):
        raise uid_conflict(rt, name, meta.get("uid"), old_meta["uid"])


def _status_update(rt: ResourceType, name: str, old: Stored, new: JsonDict) -> JsonDict:
    """The stored object with the request's status (or none)."""
    if not rt.has_status:
        raise not_found(rt, name)
    merged: JsonDict = json.loads(old.raw)
    if "status" in new:
        merged["status"] = new["status"]
    else:
        merged.pop("status", None)
    return merged


def _keep_server_fields(rt: ResourceType, key: Key, old: Stored, new: JsonDict) -> None:
    meta, old_meta = new["metadata"], old.obj["metadata"]
    if rt.has_status:
        if "status" in old.obj:
            new["status"] = json.loads(dumps(old.obj["status"]))
        else:
            new.pop("status", None)
    for fld in _SERVER_FIELDS:
        if fld in old_meta:
            meta[fld] = old_meta[fld]
        else:
            meta.pop(fld, None)
    meta.pop("managedFields", None)
    if rt.namespaced:
        meta["namespace"] = key[0]
    else:
        meta.pop("namespace", None)
    meta["name"] = key[1]


def updated_object(
    rt: ResourceType, key: Key, old: Stored, new: JsonDict, subresource: str | None
) -> JsonDict:
    """The object an update of `old` to `new` stores (see the module docstring)."""
    name = key[1]
    meta = new.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be a JSON object")
    old_meta = old.obj["metadata"]
    _check_preconditions(rt, name, meta, old_meta)
    if subresource == "status":
        new = _status_update(rt, name, old, new)
        meta = new["metadata"]
    elif subresource is not None:
        raise not_found(rt, name)
    else:
        _keep_server_fields(rt, key, old, new)
    new["kind"] = rt.kind
    new["apiVersion"] = rt.api_version
    if old_meta.get("deletionTimestamp") and (
        set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
    ):
        raise invalid(
            rt,
            name,
            "metadata.finalizers: Forbidden: no new finalizers can be "
            "added if the object is being deleted",
        )
    return new


def check_delete_preconditions(
    rt: ResourceType, name: str, preconditions: JsonDict | None, old_meta: JsonDict
) -> None:
    """A 409 when a delete's UID or resourceVersion precondition names another version."""
    if not preconditions:
        return
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


def pod_grace_period(old: Stored, requested: int | None) -> int:
    """The seconds a pod's graceful delete waits: the request's, else its spec's (30 s by
    default), never longer than a delete already under way."""
    if requested is not None:
        grace = requested
    else:
        spec = old.obj.get("spec") or {}
        grace = int(spec.get("terminationGracePeriodSeconds", 30) or 0)
    # As kube-apiserver's pod strategy: a pod no node runs (unscheduled, or finished) has
    # nothing to wait for and goes at once.
    if not (old.obj.get("spec") or {}).get("nodeName") or (
        (old.obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    ):
        grace = 0
    current_grace = old.obj["metadata"].get("deletionGracePeriodSeconds")
    if current_grace is not None:
        grace = min(grace, int(current_grace))
    return grace
