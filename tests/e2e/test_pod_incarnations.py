"""The allocation patch applies only to the pod incarnation it was computed for (a pod deleted
and re-created under its name meanwhile is left alone)."""

from __future__ import annotations

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import get_or_none, running, wait_for
from tests.e2e.workloads import (
    NS,
    allocated,
    formatted_subnet,
    lsp,
    pod,
    quiet,
)

pytestmark = pytest.mark.e2e


@pytest.mark.emulator_only(
    "holds the allocation patch with the emulator's latency fault; the real-plane side of the "
    "UID precondition is tests/controlplane/test_uid_precondition_and_owner_get.py"
)
def test_allocation_patch_only_applies_to_the_pod_it_was_computed_for(
    cluster: Cluster, start_controller: StartController
) -> None:
    store = cluster.server.store
    ctl = running(start_controller())
    formatted_subnet(cluster, "other", "10.92.0.0/24", "10.92.0.1")
    wait_for(lambda: ctl.ipam.has_subnet("other"), message="subnet other in IPAM")
    # the first incarnation's allocation patch is held back at the API server...
    cluster.emulator.faults.add_latency(2.0, n=1, verb="patch", resource="pods", name="p")
    first = store.create("pods", pod("p"))
    wait_for(
        lambda: get_or_none(cluster.server, "ips", None, "p.default"),
        message="first incarnation's IP CR",
    )
    # ...while the pod is deleted and re-created on another subnet
    store.delete("pods", NS, "p")
    second = store.create("pods", pod("p", annotations={LOGICAL_SWITCH_ANNOTATION: "other"}))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    ann = allocated(cluster, "p")
    assert ann[LOGICAL_SWITCH_ANNOTATION] == "other"
    assert ann[IP_ADDRESS_ANNOTATION].startswith("10.92.0.")
    quiet(ctl)
    held = ctl.ipam.get_pod_address(f"{NS}/p")
    assert [(a.subnet, a.ip) for a in held] == [("other", ann[IP_ADDRESS_ANNOTATION])]
    port = lsp(cluster, "p.default")
    assert port.switch == "other"
    assert store.get("ips", None, "p.default")["spec"]["subnet"] == "other"
