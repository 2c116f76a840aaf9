"""Server-side printing for the API server emulator: the `meta.k8s.io/v1` Table kubectl asks for.

kubectl's `get` sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints
whatever columns the server returns; without them it can only show NAME and AGE. `table(rt,
objects, now, ...)` builds that Table: for the built-in kinds the columns and cells of
kube-apiserver's printers (k8s.io/kubernetes pkg/printers/internalversion/printers.go: pods,
nodes, namespaces, events, services, config maps, stateful sets, leases), for custom resources
the CRD's `additionalPrinterColumns` as the chart declares them (charts/*/templates/crds) after
Name (Name and Age when it declares none), as apiextensions-apiserver's table convertor does.
Columns of priority 1 are the ones `-o wide` adds. Ages are printed as Kubernetes'
`duration.HumanDuration` does. `includeObject` (None, Metadata (the default), Object)
decides what each row carries.

Pure: no I/O but reading the chart's CRD files once (`openapi.chart_crds`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.sandbox.apiserver.openapi import chart_crds
from controller.sandbox.apiserver.resources import JsonDict, ResourceType

NONE = "<none>"


def wants_table(accept: str) -> bool:
    """True when the Accept header asks for a meta.k8s.io/v1 Table (kubectl get does)."""
    wanted = {"as=Table", "v=v1", "g=meta.k8s.io"}
    return any(wanted <= {p.strip() for p in part.split(";")} for part in accept.split(","))


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str  # string, integer, number, boolean, date
    cell: Callable[[JsonDict, datetime], Any]
    priority: int = 0
    format: str = ""
    description: str = ""

    def definition(self) -> JsonDict:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description or self.name,
            "priority": self.priority,
        }


# --------------------------------------------------------------------------- helpers


def human_duration(seconds: float) -> str:
    """Kubernetes' duration.HumanDuration (k8s.io/apimachinery/pkg/util/duration)."""
    if seconds < -1:
        return "<invalid>"
    s = max(int(seconds), 0)
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _age_of(value: Any, now: datetime) -> str:
    when = _parse_time(value)
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _meta(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _name(obj: JsonDict, _now: datetime) -> str:
    return str(_meta(obj).get("name", ""))


def _age(obj: JsonDict, now: datetime) -> str:
    return _age_of(_meta(obj).get("creationTimestamp"), now)


NAME = Column("Name", "string", _name, format="name", description="Name of the object")
AGE = Column("Age", "string", _age, description="Time since the object was created")


# --------------------------------------------------------------------------- built-in kinds


def _containers(obj: JsonDict) -> list[JsonDict]:
    return [c for c in (_get(obj, "spec", "containers") or []) if isinstance(c, dict)]


def _statuses(obj: JsonDict) -> list[JsonDict]:
    return [c for c in (_get(obj, "status", "containerStatuses") or []) if isinstance(c, dict)]


def _pod_ready(obj: JsonDict, _now: datetime) -> str:
    ready = sum(1 for c in _statuses(obj) if c.get("ready") is True)
    return f"{ready}/{len(_containers(obj))}"


def _pod_status(obj: JsonDict, _now: datetime) -> str:
    """printers.go printPod's reason: the phase, or a more telling reason when there is one."""
    reason = str(_get(obj, "status", "reason") or _get(obj, "status", "phase") or "Pending")
    for status in _statuses(obj):
        waiting = _get(status, "state", "waiting", "reason")
        terminated = _get(status, "state", "terminated", "reason")
        if waiting:
            reason = str(waiting)
        elif terminated:
            reason = str(terminated)
    if _meta(obj).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_restarts(obj: JsonDict, _now: datetime) -> int:
    return sum(int(c.get("restartCount") or 0) for c in _statuses(obj))


def _pod_ip(obj: JsonDict, _now: datetime) -> str:
    return str(_get(obj, "status", "podIP") or NONE)


def _pod_node(obj: JsonDict, _now: datetime) -> str:
    return str(_get(obj, "spec", "nodeName") or NONE)


def _pod_nominated(obj: JsonDict, _now: datetime) -> str:
    return str(_get(obj, "status", "nominatedNodeName") or NONE)


def _pod_gates(obj: JsonDict, _now: datetime) -> str:
    gates = _get(obj, "spec", "readinessGates") or []
    if not gates:
        return NONE
    conditions = {
        c.get("type"): c.get("status")
        for c in (_get(obj, "status", "conditions") or [])
        if isinstance(c, dict)
    }
    ok = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return f"{ok}/{len(gates)}"


def _condition(obj: JsonDict, kind: str) -> str | None:
    for c in _get(obj, "status", "conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind:
            return str(c.get("status"))
    return None


def _node_status(obj: JsonDict, _now: datetime) -> str:
    ready = _condition(obj, "Ready")
    text = "Ready" if ready == "True" else "NotReady" if ready is not None else "Unknown"
    if _get(obj, "spec", "unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: JsonDict, _now: datetime) -> str:
    labels = _meta(obj).get("labels") or {}
    roles = sorted(
        key.split("/", 1)[1]
        for key in labels
        if key.startswith("node-role.kubernetes.io/") and key.split("/", 1)[1]
    )
    return ",".join(roles) or NONE


def _node_address(kind: str) -> Callable[[JsonDict, datetime], str]:
    def cell(obj: JsonDict, _now: datetime) -> str:
        for a in _get(obj, "status", "addresses") or []:
            if isinstance(a, dict) and a.get("type") == kind:
                return str(a.get("address"))
        return NONE

    return cell


def _field(*path: str, default: Any = NONE) -> Callable[[JsonDict, datetime], Any]:
    def cell(obj: JsonDict, _now: datetime) -> Any:
        value = _get(obj, *path)
        return default if value is None or value == "" else value

    return cell


def _event_last_seen(obj: JsonDict, now: datetime) -> str:
    for path in (
        ("series", "lastObservedTime"),
        ("lastTimestamp",),
        ("eventTime",),
        ("firstTimestamp",),
        ("metadata", "creationTimestamp"),
    ):
        value = _get(obj, *path)
        if value:
            return _age_of(value, now)
    return "<unknown>"


def _event_object(obj: JsonDict, _now: datetime) -> str:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _data_count(obj: JsonDict, _now: datetime) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def _service_ports(obj: JsonDict, _now: datetime) -> str:
    ports = []
    for p in _get(obj, "spec", "ports") or []:
        if not isinstance(p, dict):
            continue
        text = f"{p.get('port')}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        ports.append(f"{text}/{p.get('protocol', 'TCP')}")
    return ",".join(ports) or NONE


def _replicas_ready(obj: JsonDict, _now: datetime) -> str:
    ready = int(_get(obj, "status", "readyReplicas") or 0)
    return f"{ready}/{int(_get(obj, 'spec', 'replicas') or 0)}"


BUILTIN: dict[tuple[str, str], tuple[Column, ...]] = {
    ("", "pods"): (
        NAME,
        Column("Ready", "string", _pod_ready, description="ready containers / containers"),
        Column("Status", "string", _pod_status),
        Column("Restarts", "string", _pod_restarts),
        AGE,
        Column("IP", "string", _pod_ip, priority=1),
        Column("Node", "string", _pod_node, priority=1),
        Column("Nominated Node", "string", _pod_nominated, priority=1),
        Column("Readiness Gates", "string", _pod_gates, priority=1),
    ),
    ("", "nodes"): (
        NAME,
        Column("Status", "string", _node_status),
        Column("Roles", "string", _node_roles),
        AGE,
        Column("Version", "string", _field("status", "nodeInfo", "kubeletVersion", default="")),
        Column("Internal-IP", "string", _node_address("InternalIP"), priority=1),
        Column("External-IP", "string", _node_address("ExternalIP"), priority=1),
        Column("OS-Image", "string", _field("status", "nodeInfo", "osImage"), priority=1),
        Column(
            "Kernel-Version", "string", _field("status", "nodeInfo", "kernelVersion"), priority=1
        ),
        Column(
            "Container-Runtime",
            "string",
            _field("status", "nodeInfo", "containerRuntimeVersion"),
            priority=1,
        ),
    ),
    ("", "namespaces"): (
        NAME,
        Column("Status", "string", _field("status", "phase", default="Active")),
        AGE,
    ),
    ("", "configmaps"): (NAME, Column("Data", "integer", _data_count), AGE),
    ("", "events"): (
        Column("Last Seen", "string", _event_last_seen),
        Column("Type", "string", _field("type", default="")),
        Column("Reason", "string", _field("reason", default="")),
        Column("Object", "string", _event_object),
        Column("Message", "string", _field("message", default="")),
        Column("Source", "string", _field("source", "component", default=""), priority=1),
        Column("Count", "integer", _field("count", default=1), priority=1),
        Column("Name", "string", _name, priority=1),
    ),
    ("", "services"): (
        NAME,
        Column("Type", "string", _field("spec", "type", default="ClusterIP")),
        Column("Cluster-IP", "string", _field("spec", "clusterIP")),
        Column("External-IP", "string", _field("spec", "externalName")),
        Column("Port(s)", "string", _service_ports),
        AGE,
    ),
    ("apps", "statefulsets"): (NAME, Column("Ready", "string", _replicas_ready), AGE),
    ("coordination.k8s.io", "leases"): (
        NAME,
        Column("Holder", "string", _field("spec", "holderIdentity", default="")),
        AGE,
    ),
}


# --------------------------------------------------------------------------- custom resources

_JSONPATH = re.compile(r"^\.[A-Za-z0-9_.\-]+$")


def _jsonpath(path: str, type_: str) -> Callable[[JsonDict, datetime], Any]:
    """The simple `.a.b.c` JSONPath that additionalPrinterColumns use."""
    keys = path.lstrip(".").split(".") if _JSONPATH.match(path) else []

    def cell(obj: JsonDict, now: datetime) -> Any:
        value = _get(obj, *keys) if keys else None
        if value is None:
            return None
        if type_ == "date":
            return _age_of(value, now)
        if isinstance(value, (list, dict)):
            return json.dumps(value, separators=(",", ":"))
        return value

    return cell


@functools.cache
def crd_columns() -> dict[tuple[str, str], tuple[Column, ...]]:
    """(group, plural) -> columns, from the chart's CRDs."""
    out: dict[tuple[str, str], tuple[Column, ...]] = {}
    for doc in chart_crds():
        spec = doc.get("spec") or {}
        for version in spec.get("versions") or []:
            extra = tuple(
                Column(
                    str(c["name"]),
                    str(c.get("type", "string")),
                    _jsonpath(str(c.get("jsonPath", "")), str(c.get("type", "string"))),
                    priority=int(c.get("priority", 0)),
                    description=str(c.get("description", "")),
                )
                for c in version.get("additionalPrinterColumns") or []
            )
            # apiextensions-apiserver: Name, then the declared columns; Age only when
            # none are declared.
            out[(spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))] = (
                (NAME, *extra) if extra else (NAME, AGE)
            )
    return out


def columns_for(rt: ResourceType) -> tuple[Column, ...]:
    key = (rt.group, rt.plural)
    return BUILTIN.get(key) or crd_columns().get(key) or (NAME, AGE)


# --------------------------------------------------------------------------- the Table


def _row_object(obj: JsonDict, include: str) -> JsonDict | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": _meta(obj),
    }


def table(
    rt: ResourceType,
    objects: Iterable[JsonDict],
    now: datetime,
    *,
    resource_version: str = "",
    continue_token: str | None = None,
    remaining: int | None = None,
    include_object: str = "Metadata",
) -> JsonDict:
    columns = columns_for(rt)
    rows = []
    for obj in objects:
        row: JsonDict = {"cells": [c.cell(obj, now) for c in columns]}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: JsonDict = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    if remaining is not None:
        metadata["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [c.definition() for c in columns],
        "rows": rows,
    }


def column_names(rt: ResourceType, wide: bool = False) -> Sequence[str]:
    return [c.name for c in columns_for(rt) if wide or c.priority == 0]
