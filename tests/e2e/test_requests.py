"""What one new pod costs the API server and the NB, end to end (bounds on the per-pod work
bench/e2e measures): requests counted from the emulator's request log."""

from __future__ import annotations

from collections import Counter

import pytest

from controller.core.constants import ROUTED_ANNOTATION
from controller.sandbox.apiserver.faults import RequestRecord
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import NODE, annotations_of, pod, running, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.emulator_only("counts requests in the emulator's log")]


def test_a_new_bound_pod_costs_one_ip_create_and_one_pod_patch(
    cluster: Cluster, start_controller: StartController
) -> None:
    running(start_controller())
    seen: list[RequestRecord] = []
    cluster.emulator.add_request_hook(seen.append)

    cluster.server.store.create("pods", pod("p1", node_name=NODE))
    wait_for(
        lambda: annotations_of(cluster.server, "pods", "default", "p1").get(ROUTED_ANNOTATION),
        message="p1 routed",
    )

    per_pod = Counter(
        (r.method, r.resource, r.code)
        for r in seen
        if r.resource in ("pods", "ips") and r.verb not in ("watch", "list")
    )
    # no GET of the IP CR first: the informer cache says it is new; a pod bound at creation is
    # allocated and routed by one patch
    assert per_pod == {("POST", "ips", 201): 1, ("PATCH", "pods", 200): 1}
