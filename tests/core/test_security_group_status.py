"""The SecurityGroup controller's status decisions (wanted_status, remote_groups_of): pure."""

from __future__ import annotations

from controller.controllers.security_group import remote_groups_of, wanted_status
from controller.core.security_group import plan_security_group

GOOD = {
    "ingressRules": [
        {
            "ipVersion": "ipv4",
            "protocol": "icmp",
            "priority": 1,
            "remoteType": "securityGroup",
            "remoteSecurityGroup": "db",
            "policy": "allow",
        }
    ]
}
T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"


def test_first_write_then_nothing_until_something_changes() -> None:
    plan = plan_security_group("web", GOOD, {"db"}.__contains__)
    first = wanted_status(plan, None, T0)
    assert first is not None
    assert first["conditions"] == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Synced",
            "message": "",
            "lastUpdateTime": T0,
            "lastTransitionTime": T0,
        }
    ]
    assert wanted_status(plan, first, T1) is None  # unchanged: no write


def test_a_missing_remote_group_flips_ready_and_keeps_transition_times_right() -> None:
    ok = wanted_status(plan_security_group("web", GOOD, {"db"}.__contains__), None, T0)
    bad_plan = plan_security_group("web", GOOD)  # db does not exist
    bad = wanted_status(bad_plan, ok, T1)
    assert bad is not None and bad["ingressLastSyncSuccess"] is False
    cond = bad["conditions"][0]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False",
        "InvalidRules",
        T1,
    )
    assert "ingressRules[0]: remote security group 'db' does not exist" in cond["message"]
    # NB failing on top: still False, so the transition time stays T1
    failed = wanted_status(bad_plan, bad, T2, synced=False, error="NB timed out")
    assert failed is not None
    assert failed["conditions"][0]["reason"] == "SyncFailed"
    assert failed["conditions"][0]["lastTransitionTime"] == T1
    assert failed["egressLastSyncSuccess"] is False


def test_remote_groups_of_reads_both_directions_and_ignores_junk() -> None:
    spec = {
        "ingressRules": [{"remoteSecurityGroup": " db "}, "junk", {"remoteSecurityGroup": 3}],
        "egressRules": [{"remoteSecurityGroup": "cache"}],
    }
    assert remote_groups_of(spec) == {"db", "cache"}
    assert remote_groups_of(None) == set()
    assert remote_groups_of({"ingressRules": "x"}) == set()
