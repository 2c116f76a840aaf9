"""A Subnet's `status.conditions` as kube-ovn v1.8.18 writes them (pure).

The condition semantics follow kube-ovn v1.8.18 `pkg/apis/kubeovn/v1/condition.go`:

* conditions are merged by `type`; a missing one is appended with `lastUpdateTime` and
  `lastTransitionTime` both now (`addCondition`);
* setting a condition to the status, reason and message it already has changes nothing, so its
  timestamps are kept; otherwise `lastUpdateTime` is now and `lastTransitionTime` moves only when
  the status itself changes (`setConditionValue`);
* `EnsureStandardConditions` adds Ready, Validated and Error as `Unknown` / `Init` /
  `Not Observed` when they are missing.

What the conditions say follows `pkg/controller/subnet.go` (v1.8.18):

* an invalid spec (`patchSubnetStatus` with an error, lines 407-412): Error=True,
  Validated=False and Ready=False, all with the failure's reason and message;
* the logical switch in place (`handleAddOrUpdateSubnet`, lines 576 and 608-620, through
  `patchSubnetStatus` lines 414-418): the standard conditions ensured, then Validated=True and
  Ready=True with reason `SetPrivateLogicalSwitchSuccess` (a private subnet) or
  `ResetLogicalSwitchAclSuccess`, message empty;
* a centralized subnet whose gateway cannot be served (`reconcileGateway`, line 878, and
  v1.12.0 `pkg/controller/subnet.go` lines 1733-1734): Validated=True and Ready=False, both with
  reason `NoReadyGateway`.

One deliberate difference: v1.8.18 never resets Error once set, so a subnet whose spec was fixed
keeps reporting the old failure. Here a subnet in place with Error=True gets kube-ovn's own
`ClearError` values (False, `NoError`, `No error seen`), so the conditions never contradict
each other. Likewise v1.8.18 lets its final ACL step turn Ready back to True after
`NoReadyGateway`; here NotReady stays while no listed gateway node is usable, as the issue's
contract (and later kube-ovn) has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

CONDITION_READY: Final = "Ready"
CONDITION_VALIDATED: Final = "Validated"
CONDITION_ERROR: Final = "Error"
STANDARD_CONDITIONS: Final = (CONDITION_READY, CONDITION_VALIDATED, CONDITION_ERROR)

STATUS_TRUE: Final = "True"
STATUS_FALSE: Final = "False"
STATUS_UNKNOWN: Final = "Unknown"

REASON_INIT: Final = "Init"
MESSAGE_INIT: Final = "Not Observed"
REASON_NO_ERROR: Final = "NoError"
MESSAGE_NO_ERROR: Final = "No error seen"
REASON_RESET_ACL_SUCCESS: Final = "ResetLogicalSwitchAclSuccess"
REASON_SET_PRIVATE_SUCCESS: Final = "SetPrivateLogicalSwitchSuccess"
REASON_NO_READY_GATEWAY: Final = "NoReadyGateway"

Condition = dict[str, object]


def timestamp(now: datetime) -> str:
    """metav1.Time's wire form: RFC 3339 in UTC, whole seconds."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class SubnetHealth:
    """What the controller found for a subnet; `wanted_conditions` turns it into conditions."""

    state: str  # "invalid" | "ready" | "no_ready_gateway"
    reason: str
    message: str = ""

    @classmethod
    def invalid(cls, reason: str, message: str) -> SubnetHealth:
        return cls("invalid", reason, message)

    @classmethod
    def in_place(cls, private: bool) -> SubnetHealth:
        return cls("ready", REASON_SET_PRIVATE_SUCCESS if private else REASON_RESET_ACL_SUCCESS)

    @classmethod
    def no_ready_gateway(cls) -> SubnetHealth:
        return cls("no_ready_gateway", REASON_NO_READY_GATEWAY)


def _copy(conditions: Sequence[Mapping[str, object]] | None) -> list[Condition]:
    return [dict(c) for c in conditions or () if isinstance(c, Mapping)]


def find(
    conditions: Sequence[Mapping[str, object]] | None, ctype: str
) -> Mapping[str, object] | None:
    """The condition of that type (the last one, as kube-ovn's lookup), None when absent."""
    found: Mapping[str, object] | None = None
    for c in conditions or ():
        if isinstance(c, Mapping) and c.get("type") == ctype:
            found = c
    return found


def is_ready(status: Mapping[str, Any] | None) -> bool:
    """kube-ovn `SubnetStatus.IsReady`: the Ready condition is `True` (absent means not)."""
    ready = find((status or {}).get("conditions"), CONDITION_READY)
    return ready is not None and ready.get("status") == STATUS_TRUE


def set_condition(
    conditions: list[Condition], ctype: str, status: str, reason: str, message: str, now: str
) -> None:
    """kube-ovn `setConditionValue`, in place on `conditions`."""
    index = None
    for i, c in enumerate(conditions):
        if c.get("type") == ctype:
            index = i
    if index is None:
        conditions.append(
            {
                "type": ctype,
                "status": status,
                "reason": reason,
                "message": message,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
        return
    c = conditions[index]
    same = (c.get("status"), c.get("reason") or "", c.get("message") or "")
    if same == (status, reason, message):
        return
    c["lastUpdateTime"] = now
    if c.get("status") != status:
        c["lastTransitionTime"] = now
    c["status"] = status
    c["reason"] = reason
    c["message"] = message


def ensure_condition(conditions: list[Condition], ctype: str, now: str) -> None:
    """kube-ovn `EnsureCondition`: add it as Unknown/Init when it is missing."""
    if find(conditions, ctype) is None:
        set_condition(conditions, ctype, STATUS_UNKNOWN, REASON_INIT, MESSAGE_INIT, now)


def wanted_conditions(
    current: Sequence[Mapping[str, object]] | None, health: SubnetHealth, now: str
) -> list[Condition]:
    """The conditions after recording `health` on `current` (a new list; equal to `current`,
    timestamps included, when nothing changed)."""
    out = _copy(current)
    if health.state == "invalid":
        for ctype, status in (
            (CONDITION_ERROR, STATUS_TRUE),
            (CONDITION_VALIDATED, STATUS_FALSE),
            (CONDITION_READY, STATUS_FALSE),
        ):
            set_condition(out, ctype, status, health.reason, health.message, now)
        return out
    set_condition(out, CONDITION_VALIDATED, STATUS_TRUE, health.reason, "", now)
    for ctype in STANDARD_CONDITIONS:
        ensure_condition(out, ctype, now)
    error = find(out, CONDITION_ERROR)
    if error is not None and error.get("status") == STATUS_TRUE:
        set_condition(out, CONDITION_ERROR, STATUS_FALSE, REASON_NO_ERROR, MESSAGE_NO_ERROR, now)
    if health.state == "no_ready_gateway":
        set_condition(out, CONDITION_READY, STATUS_FALSE, health.reason, "", now)
    else:
        set_condition(out, CONDITION_READY, STATUS_TRUE, health.reason, "", now)
    return out
