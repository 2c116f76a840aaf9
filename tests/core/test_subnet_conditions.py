"""kube-ovn v1.8.18 condition semantics (pkg/apis/kubeovn/v1/condition.go) on plain dicts."""

from __future__ import annotations

from controller.core.subnet_conditions import (
    SubnetHealth,
    find,
    is_ready,
    set_condition,
    wanted_conditions,
)

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"


def by_type(conditions: list[dict[str, object]]) -> dict[object, tuple[object, ...]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in conditions}


def test_a_new_subnet_in_place_is_validated_and_ready_with_error_unobserved() -> None:
    out = wanted_conditions([], SubnetHealth.in_place(private=False), T0)
    assert by_type(out) == {
        "Validated": ("True", "ResetLogicalSwitchAclSuccess", ""),
        "Ready": ("True", "ResetLogicalSwitchAclSuccess", ""),
        "Error": ("Unknown", "Init", "Not Observed"),
    }
    assert all(c["lastTransitionTime"] == c["lastUpdateTime"] == T0 for c in out)
    assert is_ready({"conditions": out})
    private = wanted_conditions([], SubnetHealth.in_place(private=True), T0)
    assert by_type(private)["Ready"][1] == "SetPrivateLogicalSwitchSuccess"


def test_an_invalid_spec_is_error_not_validated_not_ready_with_its_message() -> None:
    out = wanted_conditions([], SubnetHealth.invalid("ValidateLogicalSwitchFailed", "bad"), T0)
    assert by_type(out) == {
        "Error": ("True", "ValidateLogicalSwitchFailed", "bad"),
        "Validated": ("False", "ValidateLogicalSwitchFailed", "bad"),
        "Ready": ("False", "ValidateLogicalSwitchFailed", "bad"),
    }
    assert not is_ready({"conditions": out})


def test_nothing_changes_when_the_health_is_the_same_timestamps_included() -> None:
    first = wanted_conditions([], SubnetHealth.in_place(private=False), T0)
    again = wanted_conditions(first, SubnetHealth.in_place(private=False), T1)
    assert again == first


def test_a_transition_moves_last_transition_time_only_for_a_changed_status() -> None:
    ready = wanted_conditions([], SubnetHealth.in_place(private=False), T0)
    no_gw = wanted_conditions(ready, SubnetHealth.no_ready_gateway(), T1)
    assert by_type(no_gw)["Ready"] == ("False", "NoReadyGateway", "")
    assert by_type(no_gw)["Validated"] == ("True", "NoReadyGateway", "")
    validated = find(no_gw, "Validated")
    assert validated is not None
    # same status, new reason: updated, not a transition
    assert (validated["lastUpdateTime"], validated["lastTransitionTime"]) == (T1, T0)
    ready_c = find(no_gw, "Ready")
    assert ready_c is not None
    assert (ready_c["lastUpdateTime"], ready_c["lastTransitionTime"]) == (T1, T1)
    error = find(no_gw, "Error")
    assert error is not None and error["lastUpdateTime"] == T0  # untouched


def test_a_fixed_spec_clears_the_error_and_becomes_ready() -> None:
    bad = wanted_conditions([], SubnetHealth.invalid("ValidateLogicalSwitchFailed", "x"), T0)
    fixed = wanted_conditions(bad, SubnetHealth.in_place(private=False), T2)
    assert by_type(fixed) == {
        "Error": ("False", "NoError", "No error seen"),
        "Validated": ("True", "ResetLogicalSwitchAclSuccess", ""),
        "Ready": ("True", "ResetLogicalSwitchAclSuccess", ""),
    }
    assert all(c["lastTransitionTime"] == T2 for c in fixed)


def test_conditions_merge_by_type_and_keep_foreign_ones() -> None:
    current = [{"type": "Custom", "status": "True", "reason": "r", "message": ""}]
    out = wanted_conditions(current, SubnetHealth.in_place(private=False), T0)
    assert out[0] == current[0] and len(out) == 4
    conditions: list[dict[str, object]] = []
    set_condition(conditions, "Ready", "True", "a", "", T0)
    set_condition(conditions, "Ready", "True", "a", "", T1)
    assert conditions == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "a",
            "message": "",
            "lastUpdateTime": T0,
            "lastTransitionTime": T0,
        }
    ]


def test_wanted_conditions_does_not_modify_its_input() -> None:
    current = wanted_conditions([], SubnetHealth.in_place(private=False), T0)
    snapshot = [dict(c) for c in current]
    wanted_conditions(current, SubnetHealth.no_ready_gateway(), T1)
    assert current == snapshot
