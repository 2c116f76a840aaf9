"""The routing backstop check the e2e and fault tiers run after every test
(tests/e2e/backstop.py) can fail: drift planted in a routing set (an orphan entry, or a live
pod's entry deleted by hand) is reported, both when the teardown pass finds it and when a
periodic pass already removed or restored it. The wait before the teardown pass ends once the
controller has nothing left to do: a key it refuses for good does not hold it, a grace period
still running does."""

from __future__ import annotations

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION, ROUTED_ANNOTATION
from tests.e2e import backstop
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import NODE, annotations_of, pod, running, wait_for
from tests.e2e.routing_state import Snapshot, leftovers, routing_sets_holding
from tests.e2e.workloads import allocated, graceful, lsp, no_lsp
from tests.e2e.workloads import pod as wl_pod
from tests.fixtures.nb import nbctl

pytestmark = [
    pytest.mark.emulator_only("the check itself: one plane is enough"),
    pytest.mark.routing_drift_expected("plants drift in a set entry to see the check report it"),
]

ORPHAN = "10.16.200.250"


def routed_set(cluster: Cluster) -> str:
    cluster.server.store.create("pods", pod("a", node_name=NODE))
    ip = wait_for(
        lambda: (
            annotations_of(cluster.server, "pods", "default", "a").get(IP_ADDRESS_ANNOTATION)
            if annotations_of(cluster.server, "pods", "default", "a").get(ROUTED_ANNOTATION)
            == "true"
            else None
        ),
        message="pod a routed",
    )
    remote = cluster.nb_server.remote
    names = wait_for(lambda: routing_sets_holding(Snapshot.read(remote), ip), message="a's set")
    return str(names[0])


def test_the_teardown_pass_reports_a_planted_orphan(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--gc-interval=3600"))
    name = routed_set(cluster)
    assert backstop.check_controller(ctl, judge=True) == []

    nbctl(cluster.nb_server.remote, "add", "Address_Set", name, "addresses", ORPHAN)
    problems = backstop.check_controller(ctl, judge=True)
    assert len(problems) == 1, problems
    assert problems[0].startswith("the teardown routing gc pass removed 1 row(s)"), problems
    assert ORPHAN in problems[0]
    assert not leftovers(cluster.nb_server.remote, [ORPHAN])


def test_a_periodic_pass_that_removed_drift_is_reported(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--gc-interval=0.5"))
    name = routed_set(cluster)
    assert backstop.check_controller(ctl, judge=True) == []

    nbctl(cluster.nb_server.remote, "add", "Address_Set", name, "addresses", ORPHAN)
    wait_for(
        lambda: not leftovers(cluster.nb_server.remote, [ORPHAN]),
        message="a periodic pass removed the orphan",
    )
    problems = backstop.check_controller(ctl, judge=True)
    assert problems == ["routing gc passes removed 1 row(s) during the test"], problems


def test_the_teardown_pass_reports_a_row_it_had_to_add(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--gc-interval=3600"))
    name = routed_set(cluster)
    ip = annotations_of(cluster.server, "pods", "default", "a")[IP_ADDRESS_ANNOTATION]
    assert backstop.check_controller(ctl, judge=True) == []

    nbctl(cluster.nb_server.remote, "remove", "Address_Set", name, "addresses", ip)
    problems = backstop.check_controller(ctl, judge=True)
    assert len(problems) == 1, problems
    assert problems[0].startswith("the teardown routing gc pass added 1 row(s)"), problems
    assert ip in problems[0]
    assert name in routing_sets_holding(Snapshot.read(cluster.nb_server.remote), ip)


def test_a_periodic_pass_that_added_a_missing_row_is_reported(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--gc-interval=0.5"))
    name = routed_set(cluster)
    ip = annotations_of(cluster.server, "pods", "default", "a")[IP_ADDRESS_ANNOTATION]
    assert backstop.check_controller(ctl, judge=True) == []

    nbctl(cluster.nb_server.remote, "remove", "Address_Set", name, "addresses", ip)
    wait_for(
        lambda: name in routing_sets_holding(Snapshot.read(cluster.nb_server.remote), ip),
        message="a periodic pass restored the entry",
    )
    problems = backstop.check_controller(ctl, judge=True)
    assert problems == ["routing gc passes added 1 row(s) during the test"], problems


def test_the_wait_before_the_teardown_pass_skips_a_key_refused_for_good(
    cluster: Cluster, start_controller: StartController
) -> None:
    ctl = running(start_controller("--gc-interval=3600"))
    # an address outside every subnet: AcquireAddressFailed, retried (kube-ovn requeues it)
    outside = {IP_ADDRESS_ANNOTATION: "10.99.0.5"}
    cluster.server.store.create("pods", pod("refused", node_name=NODE, annotations=outside))
    queue = ctl.pod_queues.add
    wait_for(
        lambda: queue.num_requeues("default/refused") >= backstop.PERSISTENT_FAILURES,
        timeout=30,
        message="the refused pod's add retried",
    )
    wait_for(lambda: "default/refused" in queue.waiting(), message="its retry pending")
    # the retry comes back for ever (its backoff grows towards minutes): nothing to wait for
    assert backstop.settle(ctl, timeout=10)
    assert backstop.check_controller(ctl, judge=True) == []


def test_the_wait_before_the_teardown_pass_keeps_a_running_grace_period(
    cluster: Cluster, start_controller: StartController
) -> None:
    graceful(cluster)
    ctl = running(start_controller("--gc-interval=3600"))
    pods = ctl.pod_controller
    assert pods is not None
    store = cluster.server.store
    store.create("pods", wl_pod("slow", grace=300))
    allocated(cluster, "slow")
    store.delete("pods", "default", "slow")
    wait_for(lambda: "default/slow" in pods.pending_deletes(), message="the delete pending")
    # 300 s of grace left: the cleanup is work still to come, waited for up to the deadline
    assert not backstop.settle(ctl, timeout=1.0)
    lsp(cluster, "slow.default")

    # removed within its grace: cleaned up at once; the wake-up left queued does nothing
    store.finalize_delete("pods", "default", "slow")
    no_lsp(cluster, "slow.default")
    wait_for(lambda: "default/slow" not in pods.pending_deletes(), message="the delete done")
    assert "default/slow" in ctl.pod_queues.delete.waiting()
    assert backstop.settle(ctl, timeout=10)
