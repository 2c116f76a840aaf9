"""The audit reads StatefulSet / VM owners through `controller.view.OwnerLookup`: an owner the
listed snapshot does not have (a list that lagged behind) is confirmed with a GET before the
address it keeps is reported as an orphan."""

from __future__ import annotations

import io

from controller.audit.check import EXIT_CLEAN, EXIT_FINDINGS, check
from controller.config import Config
from controller.kube.api import KubeObject
from controller.pod_logic import build_ip_cr
from controller.testing.fake_kube import FakeKubeApi
from controller.testing.fake_nb import FakeNbClient


class LaggingListKube(FakeKubeApi):
    """The API: its StatefulSet list was taken before the StatefulSet existed (a GET finds it)."""

    def list_statefulsets(self) -> list[KubeObject]:
        return []


def _kept_sts_address(kube: FakeKubeApi) -> None:
    """web-1's IP CR, kept for its StatefulSet while no pod exists."""
    kube.create_or_update_ip(
        build_ip_cr(
            pod_name="web-1",
            ip="10.16.0.9",
            mac="00:00:00:00:00:09",
            subnet="ovn-default",
            namespace="default",
            node_name="",
            provider="ovn",
            pod_type="StatefulSet",
            node_switch="join",
        )
    )


def _run(kube: FakeKubeApi) -> tuple[int, str]:
    out = io.StringIO()
    code = check(kube, FakeNbClient(), Config(), out=out)
    return code, out.getvalue()


def test_owner_missing_from_the_list_but_found_by_a_get_keeps_the_address() -> None:
    kube = LaggingListKube()
    _kept_sts_address(kube)
    kube.add_statefulset(
        {"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 2}}
    )
    code, report = _run(kube)
    assert "orphan-ip-cr" not in report, report
    assert code == EXIT_CLEAN, report


def test_owner_gone_on_the_api_too_is_an_orphan() -> None:
    kube = LaggingListKube()
    _kept_sts_address(kube)
    code, report = _run(kube)
    assert code == EXIT_FINDINGS, report
    assert "orphan-ip-cr" in report and "StatefulSet is gone" in report, report


def test_owner_scaled_below_the_ordinal_on_the_api_is_an_orphan() -> None:
    kube = LaggingListKube()
    _kept_sts_address(kube)
    kube.add_statefulset(
        {"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 1}}
    )
    code, report = _run(kube)
    assert code == EXIT_FINDINGS, report
    assert "orphan-ip-cr" in report, report
