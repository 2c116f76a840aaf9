"""The audit's verdict on pods that do not converge: a pod the controller refused is a finding
naming the Event's reason, pending has a bound, the verdict at both ends of the report agrees
with the exit status in every mode, liveness is the controller's, and the IPAM rebuild is
silent."""

from __future__ import annotations

import dataclasses
import io
import logging
from datetime import timedelta
from typing import Any

import pytest

from controller.apiclient.errors import ForbiddenError
from controller.audit.audit import (
    KIND_IP_CR_MISSING,
    KIND_LSP_MISSING,
    KIND_POD_NOT_ALLOCATED,
    KIND_POD_REFUSED,
    KIND_POD_STALLED,
    AuditReport,
    audit,
)
from controller.audit.check import EXIT_CLEAN, EXIT_FINDINGS, check, exit_code
from controller.config import Config
from controller.core.model import Pod
from controller.core.object_fields import FrozenDict
from controller.testing.fake_kube import FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from tests.audit.helpers import NOW, Cluster, clean_cluster

CONFIG = Config()


def warning(pod: str, reason: str, message: str, *, uid: str = "", at: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{pod}.1", "namespace": "default"},
        "type": "Warning",
        "reason": reason,
        "message": message,
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod, "uid": uid},
        "lastTimestamp": at or "2026-01-01T11:59:00Z",
    }


def with_unallocated(c: Cluster, name: str = "bad") -> Cluster:
    c.pods[f"default/{name}"] = Pod("default", name, uid=f"uid-{name}", phase="Pending")
    return c


def run(c: Cluster, **snapshot: Any) -> AuditReport:
    return audit(dataclasses.replace(c.snapshot(), **snapshot), CONFIG)


def test_refused_pod_is_a_finding_with_the_events_reason() -> None:
    c = with_unallocated(clean_cluster())
    events = (
        warning("bad", "ValidatePodNetworkFailed", "10.16.0.1 is the gateway", uid="uid-bad"),
        warning("bad", "Scheduled", "not a refusal"),
    )
    report = run(c, events=events)
    assert report.kinds() == {KIND_POD_REFUSED: 1}, report.render()
    (finding,) = report.findings
    assert finding.object == "pod default/bad"
    assert finding.message == "ValidatePodNetworkFailed: 10.16.0.1 is the gateway"
    assert not report.ok


def test_events_of_an_earlier_pod_of_the_same_name_do_not_refuse_this_one() -> None:
    c = with_unallocated(clean_cluster())
    report = run(c, events=(warning("bad", "AcquireAddressFailed", "x", uid="old-uid"),))
    assert report.kinds() == {KIND_POD_NOT_ALLOCATED: 1}


def test_pending_has_a_bound() -> None:
    c = with_unallocated(clean_cluster())
    fresh = run(c, events=(), created={"default/bad": NOW - timedelta(seconds=10)})
    assert fresh.kinds() == {KIND_POD_NOT_ALLOCATED: 1} and fresh.ok
    old = run(c, events=(), created={"default/bad": NOW - timedelta(minutes=10)})
    assert old.kinds() == {KIND_POD_STALLED: 1} and not old.ok
    assert "600 s after its creation" in old.findings[0].message


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("state", ["clean", "pending", "refused"])
def test_verdict_lines_agree_with_the_exit_status(state: str, strict: bool) -> None:
    c = clean_cluster()
    events: tuple[dict[str, Any], ...] = ()
    if state != "clean":
        with_unallocated(c)
    if state == "refused":
        events = (warning("bad", "AcquireAddressFailed", "AddressConflict", uid="uid-bad"),)
    report = run(c, events=events)
    lines = report.render(strict=strict).splitlines()
    code = exit_code(report, strict=strict)
    for line in (lines[0], lines[-1]):
        says_ok = line.startswith("cluster audit: OK")
        assert says_ok == (code == EXIT_CLEAN), (state, strict, line, code)
    assert lines[-1].startswith("cluster audit: ")
    expected = EXIT_CLEAN if state == "clean" or (state == "pending" and not strict) else 1
    assert code == expected


def test_check_reads_the_events_and_prints_the_verdict_last() -> None:
    kube = FakeKubeApi()
    kube.add_pod(
        {
            "metadata": {"name": "bad", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        }
    )
    kube.events["default/bad.1"] = warning("bad", "ValidatePodNetworkFailed", "no", uid="u1")
    out = io.StringIO()
    code = check(kube, FakeNbClient(), CONFIG, out=out, strict=False, wall_clock=lambda: NOW)
    lines = out.getvalue().splitlines()
    assert code == EXIT_FINDINGS
    assert "pod-refused (1):" in lines
    assert lines[-1] == "cluster audit: 1 finding(s), 0 pending"


def test_terminating_pod_released_when_its_cleanup_came_due_is_not_reported() -> None:
    # the controller cleans up terminationGracePeriodSeconds after the delete request, i.e. at
    # the deletionTimestamp; kube-ovn's isPodAlive keeps it alive one more grace period
    c = clean_cluster()
    pod = c.pods["default/b"]
    c.pods["default/b"] = dataclasses.replace(
        pod,
        deletion_timestamp=NOW - timedelta(seconds=1),
        deletion_grace_period_seconds=30,
        termination_grace_period_seconds=30,
    )
    del c.ips["b.default"], c.ports["b.default"]
    c.unroute("10.16.0.3")
    report = run(c)
    assert report.settled, report.render()
    # before its cleanup is due, a missing network is still wrong
    c.pods["default/b"] = dataclasses.replace(
        c.pods["default/b"], deletion_timestamp=NOW + timedelta(seconds=20)
    )
    kinds = run(c).kinds()
    assert KIND_IP_CR_MISSING in kinds and KIND_LSP_MISSING in kinds


def test_the_ipam_rebuild_logs_nothing_above_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        run(clean_cluster())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []


def test_pod_allocated_by_hand_on_a_missing_subnet_is_one_refused_finding() -> None:
    c = clean_cluster()
    c.add_pod("ghost", "10.99.0.5", "00:00:00:00:00:99", objects=False, routed=False)
    pod = c.pods["default/ghost"]
    annotations = dict(pod.annotations.to_dict(), **{"ovn.kubernetes.io/logical_switch": "nowhere"})
    c.pods["default/ghost"] = dataclasses.replace(pod, annotations=FrozenDict(annotations))
    message = "subnet 'nowhere' of pod default/ghost not found"
    report = run(c, events=(warning("ghost", "ValidatePodNetworkFailed", message),))
    assert report.kinds() == {KIND_POD_REFUSED: 1}, report.render()


def test_a_message_quoting_line_separators_stays_on_its_line() -> None:
    c = with_unallocated(clean_cluster())
    message = "x\u2028y\nz is not a valid ovn.kubernetes.io/mac_address"
    report = run(c, events=(warning("bad", "ValidatePodNetworkFailed", message, uid="uid-bad"),))
    lines = report.render().splitlines()
    assert lines[-1] == "cluster audit: 1 finding(s), 0 pending"
    assert "  pod default/bad: ValidatePodNetworkFailed: x\\u2028y\\nz is not a valid" in lines[2]


class NoEventsKube(FakeKubeApi):
    """A lister whose credentials may read everything but Events (the chart's ServiceAccount)."""

    def list_events(self) -> list[dict[str, Any]]:
        raise ForbiddenError(403, "Forbidden", "events is forbidden")


def test_without_events_a_refused_pod_is_pending_and_the_log_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = NoEventsKube()
    kube.add_pod(
        {
            "metadata": {"name": "bad", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        }
    )
    out = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="controller.audit.check"):
        code = check(kube, FakeNbClient(), CONFIG, out=out, strict=False, wall_clock=lambda: NOW)
    assert code == EXIT_CLEAN
    assert out.getvalue().splitlines()[-1] == "cluster audit: OK, 1 pending"
    assert any("cannot list Events" in r.getMessage() for r in caplog.records)
