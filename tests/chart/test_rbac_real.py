"""The real-plane RBAC check of tests/fixtures/realrbac.py tells a missing grant from a 403 the
authorizer gave while its caches were not synced, and reads the ServiceAccount's uses back from
the audit log."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fixtures.realbed import RealBed
from tests.fixtures.realrbac import AuditedUse, genuinely_forbidden, service_account_uses

pytestmark = pytest.mark.realcp


def test_forbidden_requests_are_judged_by_the_authorizer_now(real_bed: RealBed) -> None:
    namespace, name = real_bed.service_account
    user = f"system:serviceaccount:{namespace}:{name}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    granted = AuditedUse("", "pods", "list", "", "", {403})  # a 403 from an unsynced cache
    missing = AuditedUse("", "nodes", "delete", "", "", {403})  # the chart grants no such thing
    answered = AuditedUse("", "pods", "get", "default", "", {200})
    assert genuinely_forbidden(real_bed.admin, user, groups, [granted, missing, answered]) == [
        missing
    ]


def test_the_audit_log_has_a_service_accounts_requests(real_bed: RealBed) -> None:
    # a ServiceAccount of its own: a 403 of the controller's would fail the session's check
    core = client.CoreV1Api(real_bed.admin)
    core.create_namespaced_service_account("default", {"metadata": {"name": "rbac-probe"}})
    try:
        token = real_bed.plane.service_account_token("default", "rbac-probe")
        with real_bed.plane.api_client(token=token) as api, pytest.raises(ApiException) as denied:
            client.CoreV1Api(api).delete_node("no-such-node")
        assert denied.value.status == 403
        uses = service_account_uses(real_bed.plane, "system:serviceaccount:default:rbac-probe")
        assert uses[("", "nodes", "delete", "", "")].codes == {403}
    finally:
        core.delete_namespaced_service_account("rbac-probe", "default")
