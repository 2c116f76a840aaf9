"""Per-write checks and defaults of the emulator: its small stand-in for admission and strategies.

Pure functions over raw object dicts. They refuse malformed bodies with the `ApiError` a real
apiserver answers (400 for identity mismatches, 422 for invalid names and metadata) and fill the
few defaults the emulator knows (see README.md); everything else is stored as sent.
"""

from __future__ import annotations

import re
from typing import Any

from controller.sandbox.apiserver.resources import JsonDict, ResourceType, bad_request, invalid

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_identity(rt: ResourceType, obj: Any, namespace: str | None) -> JsonDict:
    """A shallow copy of `obj` with its metadata copied, after the checks every write makes."""
    if not isinstance(obj, dict):
        raise bad_request(
            f"the body of the request must be a JSON object, not {type(obj).__name__}"
        )
    kind = obj.get("kind")
    if kind not in (None, "", rt.kind):
        raise bad_request(f"the kind {kind!r} of the body does not match {rt.kind!r}")
    api_version = obj.get("apiVersion")
    if api_version not in (None, "", rt.api_version):
        raise bad_request(
            f"the apiVersion {api_version!r} of the body does not match {rt.api_version!r}"
        )
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata must be a JSON object")
    body_ns = meta.get("namespace")
    if rt.namespaced and body_ns and namespace and body_ns != namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    for fld in ("labels", "annotations"):
        value = meta.get(fld)
        if value is not None and (
            not isinstance(value, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            raise invalid(
                rt,
                str(meta.get("name", "")),
                f"metadata.{fld}: Invalid value: must be a map of strings",
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        raise invalid(
            rt,
            str(meta.get("name", "")),
            "metadata.finalizers: Invalid value: must be a list of strings",
        )
    return {**obj, "metadata": dict(meta)}


def validate_name(rt: ResourceType, name: Any) -> None:
    """Refuse names a real apiserver refuses (RFC 1123 subdomain; label for namespaces)."""
    pattern = _DNS_LABEL if rt.plural == "namespaces" else _DNS_SUBDOMAIN
    limit = 63 if rt.plural == "namespaces" else 253
    if not isinstance(name, str) or not name or len(name) > limit or not pattern.match(name):
        raise invalid(
            rt,
            str(name),
            f"metadata.name: Invalid value: {name!r}: a lowercase "
            "RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an "
            "alphanumeric character",
        )


def apply_create_defaults(rt: ResourceType, obj: JsonDict, keep_status: bool) -> None:
    """Drop or keep the status sent on create, and fill the few defaults the emulator knows."""
    if rt.has_status and not keep_status:
        obj.pop("status", None)
    if rt.plural == "pods":
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("terminationGracePeriodSeconds", 30)
        status = obj.setdefault("status", {})
        if isinstance(status, dict):
            status.setdefault("phase", "Pending")
    elif rt.plural == "namespaces":
        name = obj["metadata"]["name"]
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = name
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj.setdefault("status", {"phase": "Active"})


def tracks_generation(rt: ResourceType) -> bool:
    """Whether metadata.generation is kept (apps kinds, pods as since Kubernetes 1.33, and
    custom resources)."""
    return rt.group == "apps" or not rt.builtin or rt.plural == "pods"


def strip_volatile(obj: JsonDict) -> JsonDict:
    """The object minus the fields a write always changes, for no-op detection."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    return {**obj, "metadata": meta}


def spec_part(obj: JsonDict) -> JsonDict:
    """Everything but metadata, status, kind and apiVersion: what bumps metadata.generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}
