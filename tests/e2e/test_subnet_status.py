"""Subnet status conditions on both planes, as kube-ovn v1.8.18 writes them (pkg/controller/
subnet.go patchSubnetStatus): the default subnet becomes Validated and Ready, a spec the
controller refuses gets Error/NotValidated/NotReady, and on the real kube-apiserver `kubectl get
subnets` (the CRD's printer columns, served as a Table) shows real values. The Ready condition
is what `kubectl wait --for=condition=Ready subnet/ovn-default` waits for."""

from __future__ import annotations

import json
from typing import Any

from controller.testing import builders
from tests.e2e.conftest import Cluster, RealServer, StartController
from tests.e2e.helpers import get_or_none, running, wait_for


def _conditions(cluster: Cluster, name: str) -> dict[str, tuple[str, str]]:
    obj = get_or_none(cluster.server, "subnets", None, name) or {}
    conds = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c["reason"]) for c in conds}


def _table(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """`kubectl get subnets`: the server's Table, row name -> column name -> cell."""
    with cluster.server.api_client() as api:
        _, url, headers, _, _ = api.param_serialize(
            "GET",
            "/apis/kubeovn.io/v1/subnets",
            header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
            auth_settings=["BearerToken"],
        )
        response = api.call_api("GET", url, header_params=headers)
        data = json.loads(response.response.data)
    columns = [c["name"] for c in data["columnDefinitions"]]
    rows = {}
    for row in data["rows"]:
        cells = dict(zip(columns, row["cells"], strict=True))
        rows[str(cells["Name"])] = cells
    return rows


def test_subnets_are_validated_and_ready_and_a_bad_spec_says_why(
    cluster: Cluster, start_controller: StartController
) -> None:
    # kube-ovn's CNI daemon routes a subnet on ovn0 only once its conditions say Ready
    running(start_controller())
    ready = ("True", "ResetLogicalSwitchAclSuccess")
    wait_for(
        lambda: _conditions(cluster, "ovn-default").get("Ready") == ready or None,
        message="ovn-default Ready",
    )
    conds = _conditions(cluster, "ovn-default")
    assert conds["Validated"] == ready and conds["Error"] == ("Unknown", "Init")

    cluster.server.store.create("subnets", builders.subnet("bad", "10.1.0.0/33"))
    failed = "ValidateLogicalSwitchFailed"
    wait_for(
        lambda: _conditions(cluster, "bad").get("Error") == ("True", failed) or None,
        message="bad subnet Error",
    )
    assert _conditions(cluster, "bad") == {
        "Error": ("True", failed),
        "Validated": ("False", failed),
        "Ready": ("False", failed),
    }

    if isinstance(cluster.server, RealServer):
        # kubectl get subnets: the printer columns are filled (PRIVATE was blank)
        row = wait_for(
            lambda: (r := _table(cluster).get("ovn-default")) and r["V4Available"] and r,
            message="ovn-default's table row with counters",
        )
        assert (row["Private"], row["NAT"], row["Default"]) == (False, True, True)
        assert row["Protocol"] == "IPv4" and row["CIDR"] == "10.16.0.0/16"
        assert row["V4Available"] > 0 and row["GatewayType"] == "distributed"
