"""The scale subresource: an autoscaling/v1 Scale read from and written to a replicated
object's spec.replicas (kube-apiserver's registry/apps/statefulset ScaleREST); merge patches
only.
"""

from __future__ import annotations

from controller.sandbox.apiserver import resources
from controller.sandbox.apiserver.bodies import parse_json_body
from controller.sandbox.apiserver.patch import apply_merge_patch
from controller.sandbox.apiserver.resources import JsonDict
from controller.sandbox.apiserver.routes import Route, method_not_allowed
from controller.sandbox.apiserver.store import ObjectStore


def scale_of(obj: JsonDict) -> JsonDict:
    """The autoscaling/v1 Scale of a replicated object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels")) or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(spec.get("replicas", 1))},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas", 0)),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        },
    }


def scale_answer(
    store: ObjectStore,
    method: str,
    verb: str,
    route: Route,
    body: bytes,
    content_type: str,
    dry_run: bool,
    path: str,
) -> JsonDict:
    """The scale subresource: an autoscaling/v1 Scale read from and written to the object's
    spec.replicas (kube-apiserver's registry/apps/statefulset ScaleREST)."""
    rt = route.rt
    if verb == "get":
        obj = store.get(rt, route.namespace, route.name)
    elif verb in ("patch", "update"):
        request = parse_json_body(body)
        if verb == "patch":
            current = scale_of(store.get(rt, route.namespace, route.name))
            if content_type == "application/json-patch+json":
                raise resources.ApiError(
                    415, "UnsupportedMediaType", "the emulator's scale takes merge patches"
                )
            request = apply_merge_patch(current, request)
        replicas = ((request or {}).get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise resources.invalid(
                rt, route.name, f"spec.replicas: Invalid value: {replicas!r}: must be >= 0"
            )
        obj = store.patch(
            rt,
            route.namespace,
            route.name,
            {"spec": {"replicas": replicas}},
            dry_run=dry_run,
        )
    else:
        raise method_not_allowed(method, path)
    return scale_of(obj)
